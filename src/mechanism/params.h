// Reading typed values from PolicyParams, with errors that name the parameter.
#pragma once

#include <string>

#include "concord/policy.h"

namespace concord::policy {

// The integer under `key`, `fallback` when absent; an error when malformed or below `min`.
Result<int> int_param(const PolicyParams& params, const std::string& key, int fallback, int min);
Result<double> double_param(const PolicyParams& params, const std::string& key, double fallback);
// A switch: 1/true/on or 0/false/off; an error naming the parameter for anything else.
Result<bool> bool_param(const PolicyParams& params, const std::string& key, bool fallback);
// One of two named values: false for `off_value`, true for `on_value`, `fallback` when absent;
// an error naming the parameter and both values for anything else.
Result<bool> choice_param(const PolicyParams& params, const std::string& key, const std::string& off_value,
                          const std::string& on_value, bool fallback);
// An error naming any key not in `known`.
Status only_params(const std::string& policy, const PolicyParams& params, std::initializer_list<const char*> known);
// A `dims` parameter of RAISE and its baselines: the fixed variant (0 min, 1 mid, 2 max), or -1 for
// the policy's own choice, spelt `adaptive` ("dynamic" for raise, "random" for the baselines).
Result<int> dims_param(const std::string& policy, const PolicyParams& params, const std::string& adaptive);

// A placement on every SM of the device with the kernel's defaults (what a plain launch gets).
Placement whole_gpu(const SchedContext& ctx);


}  // namespace concord::policy
