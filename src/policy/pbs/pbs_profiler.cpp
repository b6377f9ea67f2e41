#include "policy/pbs/pbs_profiler.h"

#include <map>

#include "concord/suite.h"

namespace concord::policy {

Result<PbsFacet> pbs_facet_of_job(const std::vector<std::vector<profile::NcuLaunch>>& passes_of_job,
                                  int64_t logical_blocks, const std::string& where) {
  if (passes_of_job.empty()) return Status::invalid_argument(where + ": no ncu pass");
  PbsFacet mean{0, 0, 0};
  for (const std::vector<profile::NcuLaunch>& launches : passes_of_job) {
    if (launches.empty()) return Status::invalid_argument(where + ": no launch measured");
    // One launch's worth of metrics: bytes summed over the job's launches, hit rates weighted by
    // each launch's duration (equal weights when no duration was measured).
    std::map<std::string, double> job;
    double weight = 0;
    for (const profile::NcuLaunch& l : launches) {
      auto d = l.metrics.find(profile::kNcuDurationMetric);
      const double w = d != l.metrics.end() && d->second > 0 ? d->second : 1;
      weight += w;
      for (const char* m : {kNcuGlobalLoadBytes, kNcuGlobalStoreBytes}) {
        auto it = l.metrics.find(m);
        if (it != l.metrics.end()) job[m] += it->second;
      }
      for (const char* m : {kNcuL1HitRate, kNcuL2HitRate}) {
        auto it = l.metrics.find(m);
        if (it != l.metrics.end()) job[m] += w * it->second;
      }
    }
    for (const char* m : {kNcuL1HitRate, kNcuL2HitRate}) {
      // A metric absent from every launch stays absent, so pbs_facet_from_ncu names it.
      if (auto it = job.find(m); it != job.end()) it->second /= weight;
    }
    auto f = pbs_facet_from_ncu(job, logical_blocks);
    if (!f) return Status(f.status().code(), where + ": " + f.status().message());
    const double n = static_cast<double>(passes_of_job.size());
    mean.requested_bytes_per_block += f->requested_bytes_per_block / n;
    mean.l1_miss_rate += f->l1_miss_rate / n;
    mean.l2_miss_rate += f->l2_miss_rate / n;
  }
  return mean;
}

std::vector<profile::NcuFacet> pbs_ncu_facets() {
  profile::NcuFacet f;
  f.name = kPbsFacetName;
  f.metrics = {kNcuGlobalLoadBytes, kNcuGlobalStoreBytes, kNcuL1HitRate, kNcuL2HitRate};
  f.of_job = [](const SuiteJob& job, const std::vector<std::vector<profile::NcuLaunch>>& passes,
                const std::string& where) -> Result<std::string> {
    auto spec = make_suite_kernel_with_variant(job.kernel, job.size, job.variant);
    if (!spec) return Status(spec.status().code(), where + ": " + spec.status().message());
    const KernelVariant* variant = nullptr;
    for (const KernelVariant& v : spec->variants) {
      if (v.name == job.variant) variant = &v;
    }
    if (!variant) return Status::not_found(where + ": no variant '" + job.variant + "'");
    auto facet = pbs_facet_of_job(passes, variant->logical_blocks, where);
    if (!facet) return facet.status();
    return pbs_facet_to_json(*facet);
  };
  f.required = false;
  return {f};
}

}  // namespace concord::policy
