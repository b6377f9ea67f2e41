// Reading typed values from PolicyParams, with errors that name the parameter.
#pragma once

#include <string>

#include "concord/policy.h"

namespace concord::policy {

// The integer under `key`, `fallback` when absent; an error when malformed or below `min`.
Result<int> int_param(const PolicyParams& params, const std::string& key, int fallback, int min);
Result<double> double_param(const PolicyParams& params, const std::string& key, double fallback);
// An error naming any key not in `known`.
Status only_params(const std::string& policy, const PolicyParams& params, std::initializer_list<const char*> known);
// A `dims` parameter of RAISE and its baselines: the fixed variant (0 min, 1 mid, 2 max), or -1 for
// the policy's own choice, spelt `adaptive` ("dynamic" for raise, "random" for the baselines).
Result<int> dims_param(const std::string& policy, const PolicyParams& params, const std::string& adaptive);

// A placement on every SM of the device with the kernel's defaults (what a plain launch gets).
Placement whole_gpu(const SchedContext& ctx);

// How an SM-set policy (FEDCM, KRISP) runs a kernel on `sms`, where `share` (0, 1] is the share of
// each SM's resources it is expected to hold next to the kernels already there (FEDCM's U). On
// every SM, or for an opaque kernel: a native launch (the hardware interleaves its blocks with the
// other kernels' blocks as they finish, as CU masks let AMD's dispatcher do; opaque kernels get the
// nearest green context). On part of the GPU, an elastic kernel runs persistent blocks on exactly
// those SMs with TLP = ceil(share x resident blocks per SM): persistent blocks hold their slots
// until the launch ends, so without the cap the first kernel on an SM would keep every later one
// off it.
Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share);

}  // namespace concord::policy
