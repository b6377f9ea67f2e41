#include "mechanism/params.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "concord/occupancy.h"
#include "concord/suggest.h"

namespace concord::policy {

Result<int> int_param(const PolicyParams& params, const std::string& key, int fallback, int min) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  int v = 0;
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return Status::invalid_argument("parameter '" + key + "': not an integer: '" + s + "'");
  }
  if (v < min) return Status::invalid_argument("parameter '" + key + "': must be >= " + std::to_string(min));
  return v;
}

Result<bool> bool_param(const PolicyParams& params, const std::string& key, bool fallback) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  const std::string& s = it->second;
  if (s == "1" || s == "true" || s == "on") return true;
  if (s == "0" || s == "false" || s == "off") return false;
  return Status::invalid_argument("parameter '" + key + "': not a switch (1/0, true/false, on/off): '" + s + "'");
}

Result<bool> choice_param(const PolicyParams& params, const std::string& key, const std::string& off_value,
                          const std::string& on_value, bool fallback) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  if (it->second == off_value) return false;
  if (it->second == on_value) return true;
  return Status::invalid_argument("parameter '" + key + "': '" + off_value + "' or '" + on_value + "', not '" + it->second + "'");
}

Result<double> double_param(const PolicyParams& params, const std::string& key, double fallback) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    return Status::invalid_argument("parameter '" + key + "': not a number: '" + it->second + "'");
  }
}

Status only_params(const std::string& policy, const PolicyParams& params, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : params) {
    if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; })) {
      const std::vector<std::string> names(known.begin(), known.end());
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return Status::invalid_argument("policy '" + policy + "' has no parameter '" + k + "'" + did_you_mean(k, names) +
                                      (names.empty() ? "; it takes none" : "; its parameters: " + list));
    }
  }
  return Status::ok();
}

Result<int> dims_param(const std::string& policy, const PolicyParams& params, const std::string& adaptive) {
  auto it = params.find("dims");
  if (it == params.end() || it->second == adaptive) return -1;
  if (it->second == "min") return 0;
  if (it->second == "mid") return 1;
  if (it->second == "max") return 2;
  return Status::invalid_argument(policy + ": parameter 'dims' must be " + adaptive + ", min, mid or max (got '" + it->second + "')");
}

Placement whole_gpu(const SchedContext& ctx) {
  Placement p;
  p.sms = ctx.device().all_sms();
  return p;
}


}  // namespace concord::policy
