#include "concord/kernel.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace concord {

const char* to_string(CachePolicy p) {
  switch (p) {
    case CachePolicy::normal: return "normal";
    case CachePolicy::l1_bypass: return "l1-bypass";
    case CachePolicy::l2_evict_first: return "l2-evict-first";
    case CachePolicy::both: return "both";
  }
  return "?";
}

std::optional<CachePolicy> cache_policy_from_string(const std::string& s) {
  for (CachePolicy p : kAllCachePolicies) {
    if (s == to_string(p)) return p;
  }
  return std::nullopt;
}

double curve_seconds(const std::vector<SmCurvePoint>& curve, int sms) {
  if (sms <= curve.front().sms) return curve.front().seconds * curve.front().sms / std::max(sms, 1);
  if (sms >= curve.back().sms) return curve.back().seconds;
  for (size_t i = 1; i < curve.size(); ++i) {
    if (sms <= curve[i].sms) {
      const double f = static_cast<double>(sms - curve[i - 1].sms) / (curve[i].sms - curve[i - 1].sms);
      return curve[i - 1].seconds + f * (curve[i].seconds - curve[i - 1].seconds);
    }
  }
  return curve.back().seconds;
}

std::optional<int> KernelSpec::find_variant(const std::string& wanted) const {
  for (size_t i = 0; i < variants.size(); ++i) {
    if (variants[i].name == wanted) return static_cast<int>(i);
  }
  // "min" names the min slot whatever its block size; "min@64" the min slot at 64 threads.
  const auto want = parse_variant_name(wanted);
  if (!want) return std::nullopt;
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto have = parse_variant_name(variants[i].name);
    if (!have || have->slot != want->slot) continue;
    if (!want->threads || *want->threads == variants[i].threads_per_block) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::optional<VariantName> parse_variant_name(const std::string& name) {
  const size_t at = name.find('@');
  if (at == std::string::npos) return VariantName{name, std::nullopt};
  const std::string count = name.substr(at + 1);
  int threads = 0;
  auto [ptr, ec] = std::from_chars(count.data(), count.data() + count.size(), threads);
  if (ec != std::errc() || ptr != count.data() + count.size() || count.empty() || threads <= 0) return std::nullopt;
  return VariantName{name.substr(0, at), threads};
}

}  // namespace concord
