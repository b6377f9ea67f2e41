// concord: the project's own LC/BE policy, composed from the mechanisms the seed policies measured
// best at (docs/policies.md, "concord"). No parameter is tuned per mix.
//   - LC kernels launch at once, natively, on every SM, at high stream priority (Orion): an LC
//     kernel confined to part of the GPU ran slower on Hopper than one beside BE work on all SMs.
//   - BE kernels launch natively on every SM while no LC work is in flight (`native_alone`): on the
//     H200 the persistent form cost the BE 0-17% of its throughput against orion's native launches.
//   - Beside LC work, an elastic BE kernel (the persistent form with in-place resize) may run
//     persistent on the TPCs the LC's kernels leave (SGDRC's tidal rule: the LC side is the TPCs
//     its kernels, and the next `window` each LC tenant has queued, need to reach their minimum
//     latency, from the measured SM curve where a profile store is attached); it grows back to
//     every SM when the LC's work ends. It passes Orion's profile and duration rules but not its SM
//     count (`elastic_gate`; it shrinks instead): on the simulator's lsbe mixes, elastic BE that
//     skipped those rules took SLO attainment from 13 to 9 of 18 mix-loads, since a BE kernel on
//     the other TPCs still shares DRAM bandwidth and L2 with the LC's.
//     It does so only where measured to leave the LC alone, by the LC's requests: a request's
//     latency (from its arrival to when the engine hears its last kernel ended) with no shrunk
//     elastic BE beside any of its kernels is a baseline sample of its tenant, one with elastic
//     BE beside is a verdict on each such BE kernel (its latency over the tenant's baseline mean).
//     Elastic BE runs beside LC work only once every LC tenant with work in flight has a
//     baseline, and a BE kernel whose verdicts' mean passes 1 + `slack` (from its first verdict)
//     is treated as opaque from then on: unproven or interfering elastic kernels pass Orion's whole
//     rule, natively. Why requests: on the H200 the LC kernels' own times under-report the harm
//     (bench/aker's mlp-sgemm: 0.72x their baseline beside elastic sgemm while SLO attainment fell
//     from 0.36 to 0.23; the host gaps and resizes between an LC request's kernels do not show in
//     them). Why from the first verdict: judged on the median of four or more, elastic sgemm was
//     never found to interfere; a kernel judged wrongly costs only BE throughput, one judged late
//     the LC's tail. On the H200, elastic BE on the other TPCs slowed some LC services 26x
//     (deep-compute) and others not at all; no model in the tree predicts which.
//   - Opaque BE kernels (no persistent form: library kernels, native launches) pass Orion's
//     admission rule: while an LC request is active they launch only when their SM needs fit and
//     their compute/memory profile differs from the LC kernel's, and once the BE work admitted
//     since BE last drained exceeds a share of the LC request's alone latency, BE waits for BE to
//     drain (mechanism/orion_gate.h).
// Not composed (stated in docs/policies.md): fusion with the LC kernel (Aker's rule) and a TLP
// search among BE tenants (PBS): on the H200 neither fused kernels at full occupancy nor TLP
// moved throughput enough to pay for themselves (docs/results.md).
//
// Every choice is counted (stats(): concord.*).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "concord/policy.h"
#include "mechanism/orion_gate.h"
#include "mechanism/orion_present.h"
#include "mechanism/tidal.h"

namespace concord::policy {

struct ConcordOptions {
  double dur_fraction = 0.025;  // Orion's DUR_THRESHOLD over the LC request's alone latency (opaque BE)
  double tolerance = 0.03;      // an LC kernel's TPC need: the fewest TPCs within this of its minimum latency
  int steps = 8;                // LC sides are rounded up to one of this many sizes
  int be_reserve = 1;           // TPCs always left to elastic BE kernels
  int window = 4;               // each LC tenant's queued launches the LC side also covers
  bool elastic_gate = true;     // elastic BE beside LC work passes Orion's profile and duration rules
  int be_tlp = 0;               // elastic BE's resident blocks per SM while LC work is in flight (0: as many as fit)
  bool native_alone = true;     // BE launches natively while no LC work is in flight (else persistent)
  double slack = 0.10;          // an elastic BE kernel interferes once LC requests beside it took this much longer
};


class ConcordPolicy final : public Policy {
 public:
  explicit ConcordPolicy(ConcordOptions options) : o_(options) {}
  std::string name() const override { return "concord"; }
  // A BE launch gets its tenant's standing admission until an LC request changes it.
  bool repeats_decisions() const override { return true; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;
  Status on_complete(SchedContext& ctx, const Completion& completion) override;
  std::map<std::string, double> stats() const override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  // An elastic BE kernel in flight, resized with the split.
  struct ElasticFlight {
    DispatchId id;
    const KernelSpec* kernel = nullptr;
    SmSet sms;
    int tlp = 0;
  };
  bool is_lc(const SchedContext& ctx, TenantId t) const;
  bool elastic(const SchedContext& ctx, const KernelSpec& kernel) const;
  const OrionOp& op_of(const SchedContext& ctx, const KernelSpec& kernel);
  int need_of(const SchedContext& ctx, const KernelSpec& kernel);
  Status resize_elastic(SchedContext& ctx, const SmSet& be_side, int tlp);
  // Whether LC tenant `tenant` has a request latency measured without elastic BE beside it.
  bool has_baseline(TenantId tenant) const;
  // An LC dispatch ended (at `now`): the last of a request makes the request's latency a baseline
  // sample of its tenant, or a verdict on the elastic BE kernels beside any of its kernels.
  void learn(const Completion& completion, Seconds now);

  // An LC kernel in flight: whose request it is, and whether its end ends the request.
  struct LcFlight {
    TenantId tenant;
    int64_t request = 0;
    bool last = false;
  };
  // The request an LC tenant runs: since when (its arrival), and the elastic BE kernels that ran
  // beside its kernels.
  struct LcRequest {
    int64_t request = -1;
    Seconds arrival = 0;
    bool spoiled = false;  // a kernel of it failed or was preempted: it teaches nothing
    std::vector<const KernelSpec*> beside;
  };
  // An LC tenant's request latency without elastic BE beside it (running mean).
  struct LcBaseline {
    Seconds seconds = 0;
    int64_t samples = 0;
  };
  // What the LC requests beside an elastic BE kernel measured, over their tenants' baselines: the
  // mean slowdown and the verdict.
  struct BeBeside {
    double slowdown = 1;
    int64_t samples = 0;
    bool interferes = false;
  };
  bool interferes(const KernelSpec* kernel) const;

  ConcordOptions o_;
  std::vector<SmSet> tpcs_;
  std::unordered_map<const KernelSpec*, OrionOp> ops_;
  std::unordered_map<const KernelSpec*, int> needs_;
  OrionLcLatency lc_;  // each LC tenant's request latency alone (DUR_THRESHOLD)
  OrionBeState gate_;
  std::map<int64_t, ElasticFlight> elastic_;  // by dispatch id
  std::map<int64_t, LcFlight> lc_flights_;     // by dispatch id
  std::vector<LcRequest> lc_request_;  // by tenant
  std::vector<LcBaseline> lc_baseline_;  // by tenant
  std::unordered_map<const KernelSpec*, BeBeside> be_beside_;
  std::unordered_set<int64_t> held_;          // opaque BE launches held at least once (counted once)
  std::unordered_set<int64_t> as_opaque_;     // elastic launches sent through Orion's whole rule (counted once)
  int64_t last_be_tenant_ = -1;
  // Counters (stats()).
  int64_t lc_launches_ = 0, be_alone_ = 0, be_persistent_alone_ = 0, be_elastic_beside_lc_ = 0, be_opaque_admitted_beside_lc_ = 0;
  int64_t be_opaque_held_ = 0, be_elastic_held_ = 0, resizes_ = 0;
  int64_t be_elastic_as_opaque_ = 0, be_elastic_interfering_ = 0, lc_baseline_samples_ = 0, lc_judged_samples_ = 0;
  // Reused between decisions.
  std::vector<ReadyLaunch> waiting_;
  OrionPresentReader present_;
};

Result<std::unique_ptr<Policy>> make_concord(const PolicyParams& params);

}  // namespace concord::policy
