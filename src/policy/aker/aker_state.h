// What the aker, tacker and baymax policies share (Aker paper, Section 6.3, 8): each kernel's class and solo
// duration model and each pair's fused version, from the "aker" profile facet where `concord
// profile aker` stored one and from the estimator otherwise; the online refits of those models
// from completions; the LC queries of the present and their headroom; the one dispatch the GPU
// runs (the three issue one kernel, fused or not, at a time); and the counters they report.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "concord/policy.h"
#include "concord/placement_rule.h"
#include "policy/aker/aker_class.h"
#include "policy/aker/aker_facet.h"
#include "policy/aker/aker_model.h"
#include "policy/aker/aker_rule.h"

namespace concord::policy {

struct AkerKernel {
  AkerClass cls = AkerClass::neutral;
  AkerUtilisation utilisation;
  AkerSoloModel solo;
  bool measured = false;  // the solo model and class come from the facet
  std::optional<AkerFacet> facet;
};

// A fused version of a pair: the model, the block-size variant of each kernel, the ratio of parts
// in a block, the fused blocks an SM holds, and whether it was measured.
struct AkerVersion {
  AkerFusedModel model;
  int self_variant = 0;
  int partner_variant = 0;
  int self_parts = 1;
  int partner_parts = 1;
  int blocks_per_sm = 0;
  bool measured = false;
};

// The variant a ready launch runs: the one its first dispatch fixed, else its kernel's default.
inline int aker_variant_of(const ReadyLaunch& r) { return r.variant >= 0 ? r.variant : r.kernel->default_variant; }
// A ready launch's first pending range in `variant`'s logical blocks: its pending range when the
// variant is fixed (it must then be that one) or is the default; else the variant's whole grid.
BlockRange aker_pending_in(const ReadyLaunch& r, int variant);

// The present as the three policies decide on it.
struct AkerPresent {
  std::vector<AkerQuery> queries;         // active LC queries, in arrival order
  std::optional<ReadyLaunch> lc;          // the LC launch to run next: the oldest query's
  bool lc_of_newest = false;              // it belongs to the newest query (8.3.2: only that one is fused or reordered)
  std::vector<ReadyLaunch> be;            // ready BE launches, round robin from the tenant after the last served
  Seconds headroom = 0;                   // aker_headroom over `queries` (infinity: none)
};

class AkerState {
 public:
  // `idle_cap`: when no LC query is active, a BE dispatch is kept within this share of the
  // smallest LC target (0: no limit).
  explicit AkerState(double idle_cap) : idle_cap_(idle_cap) {}
  // Whether an LC kernel may fuse in a version without a measured model (estimated from the two
  // kernels' utilisations). Off by default: on the H100 such estimates took fused versions to be
  // 1.0-1.6x the slower kernel where they measured 1.6-4x, and the fusions broke LC targets.
  void set_lc_fusion_estimated(bool on) { lc_fusion_estimated_ = on; }

  const AkerKernel& kernel(const SchedContext& ctx, const KernelSpec& k, int variant);
  Seconds solo_seconds(const SchedContext& ctx, const KernelSpec& k, int variant, int64_t blocks) {
    return kernel(ctx, k, variant).solo.seconds(static_cast<double>(blocks));
  }
  // The version K_1 = `self` with K_2 = `partner` runs in, within the variants the two launches
  // already run (aker_variant_of when fixed, any before their first dispatch): the measured one
  // with the largest makespan reduction (Section 7) among every variant pair and ratio the facet
  // holds and the rule lets fit; else one estimated from the two kernels' utilisations in the
  // shape best_fusion_shape chooses (several fused blocks per SM). nullptr when the backend
  // refused the pair before or no shape fits.
  const AkerVersion* version(const SchedContext& ctx, const ReadyLaunch& self, const ReadyLaunch& partner);
  // Whether two ready launches may fuse at all: both elastic with fusion on this backend, a pair
  // of classes (aker_pair_rank), and not refused before. Returns the pair's rank.
  std::optional<int> pair_rank(const SchedContext& ctx, const KernelSpec& a, const KernelSpec& b);

  // The present: queries, the next LC launch, the BE launches.
  const AkerPresent& present(const SchedContext& ctx);
  // The BE work allowed while no LC query is active (infinity: no limit).
  Seconds idle_limit(const SchedContext& ctx) const;

  // Dispatches. Each records what was predicted, for the refit when it completes. An error of the
  // backend refusing a fused placement (unsupported, invalid_argument) marks the pair refused and
  // returns false; other errors are returned.
  Result<bool> dispatch_fused(SchedContext& ctx, const ReadyLaunch& self, const ReadyLaunch& partner, int64_t self_blocks,
                              const AkerFusionPlan& plan, bool lc);
  Status dispatch_alone(SchedContext& ctx, const ReadyLaunch& r, int64_t blocks, bool lc);
  // Fusion beside the LC launch (8.3.1): among the BE launches with a version beside `lc` (only
  // tensor-core + CUDA-core pairs when `tc_cd_only`: Tacker), the plan that fits the headroom —
  // the BE kernel split at the opportune ratio, or whole when `whole_be` (Tacker) — by pair rank
  // (Section 5.1's order), then gain, is dispatched fused. A version the backend refuses is
  // excluded and the choice made again. False when none fits (nothing dispatched).
  Result<bool> fuse_beside_lc(SchedContext& ctx, const AkerPresent& present, const ReadyLaunch& lc, bool whole_be,
                              bool tc_cd_only);
  // A BE launch alone within `limit` seconds: elastic kernels split to fit (whole waves of blocks
  // where at least one fits), others whole. Where less than a wave fits: one wave when `idle` (no
  // active query), else the blocks that fit, and nothing where not one does.
  Status dispatch_be_within(SchedContext& ctx, const ReadyLaunch& r, Seconds limit, bool idle);
  // Kernel reorder (8.3.1): the first BE launch, in round-robin order, whose predicted duration
  // is below the headroom runs alone before the LC launch; if none, the LC launch runs alone.
  // Ends the LC decision's timing.
  Status reorder_or_lc(SchedContext& ctx, const ReadyLaunch& lc, const std::vector<ReadyLaunch>& be, Seconds headroom);
  // The BE step with no LC launch ready: the first BE launch within the headroom of the active
  // queries, or idle_limit() when there are none.
  Status be_alone(SchedContext& ctx, const AkerPresent& present) {
    const bool idle = present.queries.empty();
    return dispatch_be_within(ctx, present.be.front(), idle ? idle_limit(ctx) : present.headroom, idle);
  }
  bool in_flight() const { return flight_.has_value(); }
  // Refits the models from the dispatch's duration; forgets the dispatch.
  void complete(const Completion& c);

  // Decision time of one LC kernel (from the policy's start of the decision to its dispatch call).
  void start_decision() { decision_t0_ = std::chrono::steady_clock::now(); }
  void end_lc_decision();
  std::map<std::string, double> stats() const;

 private:
  using PairKey = std::pair<const KernelSpec*, const KernelSpec*>;
  // A pair and the variants its launches were fixed to (-1: free).
  using VersionKey = std::tuple<const KernelSpec*, const KernelSpec*, int, int>;
  struct Flight {
    DispatchId id;
    const KernelSpec* kernel = nullptr;  // solo: the kernel
    int variant = 0;                     // solo: the variant it ran
    int64_t blocks = 0;                  // solo: blocks run
    std::optional<VersionKey> version;   // fused: the version it ran
    double ratio = 0;                    // fused: the planned load ratio
    Seconds self = 0;                    // fused: predicted X_k1
  };

  double idle_cap_;
  bool lc_fusion_estimated_ = false;
  std::map<std::pair<const KernelSpec*, int>, AkerKernel> kernels_;
  std::map<VersionKey, std::optional<AkerVersion>> versions_;
  std::map<PairKey, bool> refused_;
  std::map<std::pair<int64_t, int64_t>, Seconds> arrivals_;  // (tenant, request) -> arrival, for queued requests
  Seconds last_call_ = 0;
  int64_t be_cursor_ = -1;
  AkerPresent present_;
  std::optional<Flight> flight_;
  // Counters.
  std::chrono::steady_clock::time_point decision_t0_;
  std::vector<double> decision_seconds_;
  std::vector<double> solo_errors_, fused_errors_;
  int64_t lc_alone_ = 0, be_alone_ = 0, fused_lc_ = 0, fused_be_ = 0, refusals_ = 0;
};

}  // namespace concord::policy
