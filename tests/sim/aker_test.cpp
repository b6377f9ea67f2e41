// aker, tacker and baymax on the simulator (without profiles: classes and models from the
// estimator): what each fuses, reorders and holds, against the QoS headroom.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/occupancy.h"
#include "concord/placement_rule.h"
#include "policy/aker/aker_policy.h"
#include "policy/aker/baymax_policy.h"
#include "policy/aker/tacker_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

TenantSpec lc_tenant(std::vector<KernelStep> steps, int requests, double rate, Seconds target) {
  TenantSpec t = tenant("infer", std::move(steps), requests);
  t.cls = TenantClass::latency_critical;
  t.arrival.kind = ArrivalProcess::Kind::poisson;
  t.arrival.rate_per_s = rate;
  t.latency_target = target;
  return t;
}

bool is_lc(const RunRecord& run, TenantId t) { return run.tenants[static_cast<size_t>(t.value)].cls == TenantClass::latency_critical; }

// Fused dispatches whose first part is an LC launch (LC + BE).
std::vector<const DispatchRecord*> lc_fusions(const RunRecord& run) {
  std::vector<const DispatchRecord*> out;
  for (const DispatchRecord& d : run.dispatches) {
    if (d.launches.size() == 2 && is_lc(run, d.tenants[0])) out.push_back(&d);
  }
  return out;
}

int64_t grid_of(const RunRecord& run, LaunchId id) {
  for (const LaunchRecord& l : run.launches) {
    if (l.id == id) return l.logical_blocks;
  }
  throw std::logic_error("no such launch");
}

// BE dispatches made while an LC request had arrived and not ended.
int be_dispatches_during_lc_requests(const RunRecord& run) {
  int n = 0;
  for (const DispatchRecord& d : run.dispatches) {
    if (is_lc(run, d.tenants[0])) continue;
    for (const TenantRecord& t : run.tenants) {
      if (t.cls != TenantClass::latency_critical) continue;
      for (const RequestRecord& r : t.requests) {
        if (d.dispatched >= r.arrival && d.dispatched < r.end) ++n;
      }
    }
  }
  return n;
}

double within_target(const RunRecord& run) {
  int in = 0, all = 0;
  for (const TenantRecord& t : run.tenants) {
    if (t.cls != TenantClass::latency_critical) continue;
    for (const RequestRecord& r : t.requests) {
      ++all;
      in += r.latency() <= t.latency_target ? 1 : 0;
    }
  }
  return all ? static_cast<double>(in) / all : 1;
}

// A tensor-core LC kernel beside a memory-bound BE tenant.
Workload tc_beside_memory(Seconds target) {
  return workload({lc_tenant({step("tc_gemm", 2048), step("tc_gemm", 2048)}, 20, 1000, target),
                   tenant("train", {step("stream_triad", 1 << 28)}, 100)});
}

TEST(Aker, FusesASplitBeKernelBesideTheLcKernelWhenTheHeadroomAllows) {
  policy::AkerPolicy aker({.idle_cap = 0.1, .lc_fusion_estimated = true});
  auto run = run_on_sim(tc_beside_memory(20e-3), aker);
  ASSERT_TRUE(run) << run.status().to_string();
  const auto fused = lc_fusions(*run);
  ASSERT_FALSE(fused.empty()) << "aker fused no BE kernel beside an LC kernel with 20 ms of target";
  // Split at the opportune ratio: the BE part is a sub-range of its grid.
  EXPECT_TRUE(std::any_of(fused.begin(), fused.end(), [&](const DispatchRecord* d) {
    return d->ranges[1].size() < grid_of(*run, d->launches[1]);
  }));
  for (const DispatchRecord* d : fused) EXPECT_EQ(d->placement.form, LaunchForm::persistent);
  EXPECT_EQ(within_target(*run), 1.0);
  const auto stats = aker.stats();
  EXPECT_GT(stats.at("fused_lc_be"), 0);
  EXPECT_GT(stats.at("lc_decisions"), 0);
  EXPECT_GT(stats.at("fused_predictions"), 0);
  EXPECT_GT(stats.at("solo_predictions"), 0);
  EXPECT_TRUE(stats.count("lc_decision_median_us"));
}

// The default variants of tc_gemm and stream_triad fit one fused block per SM; aker fuses them in
// the variants best_fusion_shape chooses (several blocks per SM), the BE part's range in its
// variant's blocks, and the rest of that BE launch keeps the variant.
TEST(Aker, FusesInVariantsThatLeaveSeveralBlocksPerSm) {
  const Workload w = tc_beside_memory(20e-3);
  const KernelSpec& tc = w.tenants[0].steps[0].kernel;
  const KernelSpec& triad = w.tenants[1].steps[0].kernel;
  const DeviceSpec dev = h200_spec();
  ASSERT_EQ(max_resident_blocks(dev, fused_block_variant(tc.variant(tc.default_variant), 1, triad.variant(triad.default_variant), 1)), 1);
  const auto chosen = best_fusion_shape(dev, tc, triad);
  ASSERT_TRUE(chosen);
  policy::AkerPolicy aker({.idle_cap = 0.1, .lc_fusion_estimated = true});
  auto run = run_on_sim(w, aker);
  ASSERT_TRUE(run) << run.status().to_string();
  const auto fused = lc_fusions(*run);
  ASSERT_FALSE(fused.empty());
  std::map<int64_t, int> be_variant;  // BE launch -> the variant its fused part ran
  for (const DispatchRecord* d : fused) {
    ASSERT_TRUE(d->placement.fusion.has_value());
    const Fusion& f = *d->placement.fusion;
    const KernelVariant& va = tc.variant(d->placement.variant);
    const KernelVariant& vb = triad.variant(f.partner_variant);
    EXPECT_GE(max_resident_blocks(dev, fused_block_variant(va, f.self_parts, vb, f.partner_parts)), kMinFusedBlocksPerSm);
    EXPECT_LE(d->ranges[1].end, vb.logical_blocks);
    be_variant[d->launches[1].value] = f.partner_variant;
  }
  // The first fusion of a fresh BE launch takes the chosen shape.
  EXPECT_EQ(fused.front()->placement.variant, chosen->variant_a);
  EXPECT_EQ(fused.front()->placement.fusion->partner_variant, chosen->variant_b);
  for (const DispatchRecord& d : run->dispatches) {
    for (size_t i = 0; i < d.launches.size(); ++i) {
      const auto it = be_variant.find(d.launches[i].value);
      if (it == be_variant.end()) continue;
      const int ran = i == 0 ? d.placement.variant : d.placement.fusion->partner_variant;
      EXPECT_EQ(ran, it->second) << "launch " << it->first;
    }
  }
  EXPECT_EQ(within_target(*run), 1.0);
}

TEST(Aker, DoesNotFuseOrReorderWithoutHeadroom) {
  // A target below the LC request's own time: every query is late, so no BE work goes first.
  policy::AkerPolicy aker({.idle_cap = 0.1, .lc_fusion_estimated = true});
  auto run = run_on_sim(tc_beside_memory(1e-6), aker);
  ASSERT_TRUE(run) << run.status().to_string();
  EXPECT_TRUE(lc_fusions(*run).empty());
  EXPECT_EQ(aker.stats().at("fused_lc_be"), 0);
  // Nor does BE work start alone while a query is active (not even one wave).
  EXPECT_EQ(be_dispatches_during_lc_requests(*run), 0);
  // BE still runs between queries.
  EXPECT_GT(aker.stats().at("be_alone") + aker.stats().at("fused_be_be"), 0);
}

TEST(Aker, FusesComputeWithMemoryAndTackerDoesNot) {
  // Two CUDA-core kernels: compute-prefer LC (fma_loop), memory-prefer BE (stream_triad).
  const Workload w =
      workload({lc_tenant({step("fma_loop", 1 << 22)}, 20, 1000, 20e-3), tenant("train", {step("stream_triad", 1 << 28)}, 100)});
  policy::AkerPolicy aker({.idle_cap = 0.1, .lc_fusion_estimated = true});
  auto a = run_on_sim(w, aker);
  ASSERT_TRUE(a) << a.status().to_string();
  EXPECT_FALSE(lc_fusions(*a).empty()) << "aker fuses compute-prefer with memory-prefer kernels (rank 1)";
  auto t = run_on_sim(w, "tacker", 1, {{"lc_fusion", "estimated"}});
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_TRUE(lc_fusions(*t).empty()) << "tacker fuses tensor-core with CUDA-core kernels only";
}

TEST(Tacker, FusesTheWholeBeKernelBesideATensorCoreKernel) {
  // A BE kernel short enough to fit the headroom whole.
  const Workload w =
      workload({lc_tenant({step("tc_gemm", 2048), step("tc_gemm", 2048)}, 20, 1000, 20e-3), tenant("train", {step("stream_triad", 1 << 22)}, 4000)});
  auto run = run_on_sim(w, "tacker", 1, {{"lc_fusion", "estimated"}});
  ASSERT_TRUE(run) << run.status().to_string();
  const auto fused = lc_fusions(*run);
  ASSERT_FALSE(fused.empty());
  for (const DispatchRecord* d : fused) {
    EXPECT_EQ(d->ranges[1].size(), grid_of(*run, d->launches[1])) << "tacker split a BE kernel";
  }
}

TEST(Baymax, HoldsABeKernelThatDoesNotFitTheHeadroom) {
  // BE kernels of about 0.75 ms against a 0.5 ms target: none may start while a query is active
  // (idle_cap=0: whole kernels, not the tail of one split while no query was active, which fits).
  const Workload w = workload({lc_tenant({step("tc_gemm", 2048)}, 20, 1000, 0.5e-3), tenant("train", {step("stream_triad", 1 << 28)}, 40)});
  auto run = run_on_sim(w, "baymax", 1, {{"idle_cap", "0"}});
  ASSERT_TRUE(run) << run.status().to_string();
  EXPECT_EQ(be_dispatches_during_lc_requests(*run), 0);
  EXPECT_TRUE(lc_fusions(*run).empty());
  // The same LC tenant beside short BE kernels (3 us): they are reordered before it.
  const Workload short_be =
      workload({lc_tenant({step("tc_gemm", 2048)}, 20, 1000, 0.5e-3), tenant("train", {step("vector_add", 1 << 20)}, 10000)});
  auto reordered = run_on_sim(short_be, "baymax", 1, {{"idle_cap", "0"}});
  ASSERT_TRUE(reordered) << reordered.status().to_string();
  EXPECT_GT(be_dispatches_during_lc_requests(*reordered), 0);
}

TEST(Baymax, CapsBeWorkWhileNoQueryIsActive) {
  // With no query active, each BE dispatch is kept within idle_cap x the LC target (split).
  const Workload w = workload({lc_tenant({step("tc_gemm", 2048)}, 5, 50, 4e-3), tenant("train", {step("stream_triad", 1 << 28)}, 4)});
  auto run = run_on_sim(w, "baymax", 1, {{"idle_cap", "0.1"}});
  ASSERT_TRUE(run) << run.status().to_string();
  int split = 0;
  for (const DispatchRecord& d : run->dispatches) {
    if (!is_lc(*run, d.tenants[0]) && d.ranges[0].size() < grid_of(*run, d.launches[0])) ++split;
  }
  EXPECT_GT(split, 0);
  EXPECT_FALSE(run_on_sim(w, "baymax", 1, {{"idle_cap", "-1"}}));
  EXPECT_FALSE(run_on_sim(w, "baymax", 1, {{"cap", "1"}}));
}

TEST(Aker, DegradesToReorderBesideAnOpaqueLcTenant) {
  const Workload w =
      workload({lc_tenant({step("cublas_gemm", 2048)}, 10, 1000, 20e-3), tenant("train", {step("stream_triad", 1 << 24)}, 400)});
  auto run = run_on_sim(w, "aker");
  ASSERT_TRUE(run) << run.status().to_string();
  EXPECT_TRUE(lc_fusions(*run).empty());
  for (const DispatchRecord& d : run->dispatches) {
    if (is_lc(*run, d.tenants[0])) {
      EXPECT_EQ(d.placement.form, LaunchForm::native);  // its fastest form
    }
  }
  EXPECT_GT(be_dispatches_during_lc_requests(*run), 0);  // reordered
}

TEST(Aker, FusesAnLcKernelOnlyInAMeasuredVersionByDefault) {
  // Without profiles no fused version has a measured model: by default the LC kernel is not fused
  // (reordering still applies), while BE pairs may still fuse on estimates.
  auto run = run_on_sim(tc_beside_memory(20e-3), "aker");
  ASSERT_TRUE(run) << run.status().to_string();
  EXPECT_TRUE(lc_fusions(*run).empty());
  EXPECT_EQ(within_target(*run), 1.0);
  auto estimated = run_on_sim(tc_beside_memory(20e-3), "aker", 1, {{"lc_fusion", "estimated"}});
  ASSERT_TRUE(estimated) << estimated.status().to_string();
  EXPECT_FALSE(lc_fusions(*estimated).empty());
  EXPECT_FALSE(run_on_sim(tc_beside_memory(20e-3), "aker", 1, {{"lc_fusion", "always"}}));
}

}  // namespace
}  // namespace concord
