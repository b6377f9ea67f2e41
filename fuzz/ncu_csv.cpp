// Fuzz target: the Nsight Compute CSV reader (`concord profile raise --from-csv`) and every facet
// the policy folders read from what it gives (RAISE's vectors, PBS's miss rates). Any input must
// give launches or an error; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "concord/suite.h"
#include "policy/ncu_facets.h"
#include "profile/ncu.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace concord;
  static const std::vector<profile::NcuFacet> facets = policy::ncu_facets();
  static const std::vector<std::string> metrics = profile::ncu_metric_names(facets);
  static const std::vector<SuiteJob> jobs = [] {
    auto k = make_suite_kernel("bfs", 4096);
    return k ? suite_jobs({*k}) : std::vector<SuiteJob>{};
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto launches = profile::parse_ncu_csv(text, metrics, "fuzz.csv");
  if (!launches.is_ok()) {
    if (launches.status().message().empty()) std::abort();
    return 0;
  }
  if (!launches->empty()) {
    for (const profile::NcuFacet& f : facets) {
      for (const SuiteJob& job : jobs) {
        auto facet = f.of_job(job, {*launches}, "fuzz.csv");
        if (!facet.is_ok() && facet.status().message().empty()) std::abort();
      }
    }
    for (size_t n : {size_t{1}, size_t{2}}) {
      auto split = profile::split_at_markers(*launches, n, "fuzz.csv");
      (void)split.is_ok();
    }
  }
  return 0;
}
