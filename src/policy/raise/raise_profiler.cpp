#include "policy/raise/raise_profiler.h"

#include <algorithm>

#include "policy/raise/raise_facet.h"

namespace concord::policy {

Result<RaiseVector> raise_vector(const std::vector<profile::NcuLaunch>& launches, const std::string& where) {
  RaiseVector sum{};
  double total = 0;
  for (const profile::NcuLaunch& l : launches) {
    auto d = l.metrics.find(profile::kNcuDurationMetric);
    if (d == l.metrics.end()) {
      return Status::parse_error(where + ": launch " + std::to_string(l.id) + " has no " + profile::kNcuDurationMetric);
    }
    const double w = std::max(d->second, 0.0);
    for (int i = 0; i < kRaiseMetrics; ++i) {
      const auto& info = raise_metric_info()[static_cast<size_t>(i)];
      auto it = l.metrics.find(info.ncu);
      if (it == l.metrics.end()) {
        return Status::parse_error(where + ": launch " + std::to_string(l.id) + " (" + l.kernel + ") has no " + info.ncu);
      }
      sum[static_cast<size_t>(i)] += w * raise_scale(static_cast<RaiseMetric>(i), it->second);
    }
    total += w;
  }
  if (total <= 0) return Status::parse_error(where + ": the launches have no duration");
  for (double& v : sum) v /= total;
  return sum;
}

std::vector<profile::NcuFacet> raise_ncu_facets() {
  profile::NcuFacet f;
  f.name = kRaiseFacetName;
  for (const auto& m : raise_metric_info()) f.metrics.emplace_back(m.ncu);
  f.of_job = [](const SuiteJob&, const std::vector<std::vector<profile::NcuLaunch>>& passes,
                const std::string& where) -> Result<std::string> {
    if (passes.empty()) return Status::invalid_argument(where + ": no ncu pass");
    RaiseVector vec{};
    for (size_t k = 0; k < passes.size(); ++k) {
      auto one = raise_vector(passes[k], where + ": pass " + std::to_string(k + 1));
      if (!one) return one.status();
      for (size_t m = 0; m < one->size(); ++m) vec[m] += (*one)[m] / static_cast<double>(passes.size());
    }
    return raise_facet_to_json(vec);
  };
  f.required = true;
  return {f};
}

}  // namespace concord::policy
