// The LC/BE scenario the SGDRC and concord tests run on the simulator: an inference-like LC
// tenant (tensor-core GEMMs and small kernels, Poisson arrivals) beside two compute-heavy BE
// tenants (examples/lsbe.yaml's shape, smaller), and what is measured of a run.
#pragma once

#include <algorithm>
#include <vector>

#include "concord/metrics.h"
#include "test_support.h"

namespace concord::testing {

// The scenario's workload; without the BE tenants when with_be is false (the LC alone).
inline Workload lc_beside_be(bool with_be) {
  TenantSpec lc = tenant("infer",
                         {step("tc_gemm", 1024), step("vector_add", 1 << 20), step("tc_gemm", 2048), step("vector_add", 1 << 22),
                          step("tc_gemm", 1024, 2), step("kmeans", 1 << 16)},
                         80);
  lc.cls = TenantClass::latency_critical;
  lc.latency_target = 2e-3;
  lc.arrival.kind = ArrivalProcess::Kind::poisson;
  lc.arrival.rate_per_s = 500;
  std::vector<TenantSpec> ts{lc};
  if (with_be) {
    ts.push_back(tenant("train", {step("sgemm", 2048, 2), step("lbm", 1 << 22)}, 600));
    ts.push_back(tenant("science", {step("mri_q", 1 << 18), step("fma_loop", 1 << 23)}, 600));
  }
  return workload(ts);
}

struct LcBe {
  Seconds p99 = 0;
  double be_per_s = 0;  // BE requests finished while the LC tenant was active, per second of it
};
inline LcBe measure(const RunRecord& run) {
  const TenantRecord& lc = run.tenants[0];
  std::vector<double> lat;
  Seconds first = lc.requests.front().arrival, last = 0;
  for (const auto& r : lc.requests) {
    lat.push_back(r.latency());
    last = std::max(last, r.end);
  }
  int64_t be = 0;
  for (size_t i = 1; i < run.tenants.size(); ++i) {
    for (const auto& r : run.tenants[i].requests) be += (r.end >= 0 && r.end <= last) ? 1 : 0;
  }
  return {percentile(lat, 99), static_cast<double>(be) / (last - first)};
}

}  // namespace concord::testing
