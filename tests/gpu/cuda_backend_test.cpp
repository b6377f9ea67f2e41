// The CUDA backend on a real GPU: green contexts confine kernels to their SMs; dispatches in
// each form complete with the right block counts; preempt and resize work through the backend.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <cstdlib>
#include <unistd.h>
#include <memory>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gpc_probe.h"
#include "backend/cuda/green_contexts.h"
#include "backend/sim/sim_backend.h"
#include "kernels/device/fusion_compiler.h"
#include "concord/engine.h"
#include "concord/spec_source.h"
#include "concord/occupancy.h"
#include "concord/policy.h"
#include "concord/suite.h"
#include "concord/backend_factory.h"
#include "gpu_test_support.h"
#include "../sim/sgdrc_log.h"

namespace concord {
namespace {

std::unique_ptr<cuda::CudaBackend> backend() {
  auto b = cuda::CudaBackend::create(0, 5);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(*b) : nullptr;
}

TEST(GreenContexts, GroupsPartitionTheGpuIntoTpcs) {
  auto b = backend();
  ASSERT_TRUE(b);
  if (!b->has_green_contexts()) GTEST_SKIP() << "no green contexts that place by SM here (under MPS?)";
  const auto& groups = b->green_contexts().groups();
  SmSet all;
  for (const SmSet& g : groups) {
    EXPECT_FALSE(all.intersects(g));
    all = all | g;
  }
  EXPECT_EQ(all.count(), b->device().sm_count);
  EXPECT_GE(static_cast<int>(groups.size()), b->device().sm_count / 2 - 2);
  EXPECT_EQ(b->device().tpc_count(), static_cast<int>(groups.size()));
}

TEST(GreenContexts, KernelsRunOnlyOnTheContextsSms) {
  auto b = backend();
  ASSERT_TRUE(b);
  if (!b->has_green_contexts()) GTEST_SKIP() << "no green contexts that place by SM here (under MPS?)";
  const auto& groups = b->green_contexts().groups();
  const std::vector<SmSet> sets = {groups[0], groups[1] | groups[5] | groups[9], SmSet::range(0, 40), SmSet::range(50, 30)};
  int owner = 100;
  for (const SmSet& want : sets) {
    auto stream = b->green_contexts().stream_for(want, owner++, 0);
    ASSERT_TRUE(stream.is_ok()) << stream.status().to_string();
    auto seen = cuda::probe_sms(*stream, 2000);
    ASSERT_TRUE(seen.is_ok()) << seen.status().to_string();
    const SmSet cover = b->green_contexts().cover(want);
    EXPECT_TRUE(seen->is_subset_of(cover)) << "ran on " << seen->to_string() << ", context " << cover.to_string();
    EXPECT_EQ(seen->count(), cover.count()) << "a long probe reaches every SM of the context";
  }
}

Workload two_kernels() {
  Workload w;
  w.name = "gpu-backend";
  for (const char* name : {"fma_loop", "stream_triad"}) {
    TenantSpec t;
    t.name = name;
    t.steps.push_back(KernelStep{*make_suite_kernel(name, std::string(name) == "fma_loop" ? (1 << 22) : (1 << 26)), 1});
    w.tenants.push_back(t);
  }
  return w;
}

DispatchRequest request(const Workload& w, int tenant, int64_t id, const Placement& p) {
  const KernelSpec& k = w.tenants[static_cast<size_t>(tenant)].steps[0].kernel;
  DispatchRequest r;
  r.id = DispatchId{id};
  r.parts.push_back(DispatchPart{LaunchId{id}, TenantId{tenant}, &k, k.default_variant,
                                 BlockRange{0, k.variant(k.default_variant).logical_blocks}, 1});
  r.placement = p;
  return r;
}

Result<std::vector<Completion>> drain(Backend& b) {
  std::vector<Completion> all;
  while (b.running() > 0) {
    auto c = b.advance(1e9);
    if (!c) return c.status();
    all.insert(all.end(), c->begin(), c->end());
  }
  return all;
}

TEST(CudaBackend, PersistentNativeAndFusedDispatchesComplete) {
  auto b = backend();
  ASSERT_TRUE(b);
  const Workload w = two_kernels();
  ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
  Placement persistent;
  persistent.sms = SmSet::range(0, 60);
  persistent.form = LaunchForm::persistent;
  persistent.tlp = 2;
  Placement native;
  native.sms = b->green_contexts().cover(SmSet::range(60, b->device().sm_count - 60));
  ASSERT_TRUE(b->dispatch(request(w, 0, 0, persistent)).is_ok());
  ASSERT_TRUE(b->dispatch(request(w, 1, 1, native)).is_ok());
  auto done = drain(*b);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 2u);
  for (const Completion& c : *done) {
    EXPECT_FALSE(c.preempted);
    EXPECT_GT(c.end, c.start);
  }
  Placement fused;
  fused.sms = b->device().all_sms();
  fused.form = LaunchForm::persistent;
  DispatchRequest r = request(w, 0, 2, fused);
  r.parts.push_back(request(w, 1, 3, fused).parts[0]);
  ASSERT_TRUE(b->dispatch(r).is_ok());
  auto fused_done = drain(*b);
  ASSERT_TRUE(fused_done.is_ok()) << fused_done.status().to_string();
  ASSERT_EQ(fused_done->size(), 1u);
  EXPECT_EQ(fused_done->front().blocks_done[0], r.parts[0].range.size());
  EXPECT_EQ(fused_done->front().blocks_done[1], r.parts[1].range.size());
}

TEST(CudaBackend, OpaqueLibraryKernelRunsInAGreenContext) {
  auto b = backend();
  ASSERT_TRUE(b);
  Workload w;
  TenantSpec t;
  t.name = "blas";
  t.steps.push_back(KernelStep{*make_suite_kernel("cublas_gemm", 2048), 1});
  w.tenants.push_back(t);
  ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
  EXPECT_FALSE(b->capabilities(t.steps[0].kernel).persistent_form);
  Placement p;
  p.sms = b->green_contexts().cover(SmSet::range(0, 20));
  p.cache = CachePolicy::l2_evict_first;
  ASSERT_TRUE(b->dispatch(request(w, 0, 0, p)).is_ok());
  auto done = drain(*b);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_FALSE(done->front().preempted);
}

TEST(CudaBackend, PreemptReturnsAPrefixAndResizeKeepsRunning) {
  auto b = backend();
  ASSERT_TRUE(b);
  Workload w = two_kernels();
  w.tenants[0].steps[0].kernel = *make_suite_kernel("fma_loop", 1 << 26);  // ~1 s on a few SMs
  ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
  Placement p;
  p.sms = SmSet::range(0, 8);
  p.form = LaunchForm::persistent;
  const DispatchRequest r = request(w, 0, 0, p);
  ASSERT_TRUE(b->dispatch(r).is_ok());
  auto early = b->advance(b->now() + 0.01);
  ASSERT_TRUE(early.is_ok());
  EXPECT_TRUE(early->empty());
  ASSERT_TRUE(b->set_sm_set(r.id, SmSet::range(0, 24)).is_ok());  // grow: a second launch joins
  auto mid = b->progress(r.id);
  ASSERT_TRUE(mid.is_ok());
  EXPECT_GT((*mid)[0], 0);
  ASSERT_TRUE(b->preempt(r.id).is_ok());
  auto done = drain(*b);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_TRUE(done->front().preempted);
  EXPECT_GT(done->front().blocks_done[0], 0);
  EXPECT_LT(done->front().blocks_done[0], r.parts[0].range.size());
}

TEST(CudaBackend, RaisingTheTlpOfARunningLaunchSpeedsItUp) {
  auto b = backend();
  ASSERT_TRUE(b);
  Workload w = two_kernels();
  w.tenants[0].steps[0].kernel = *make_suite_kernel("fma_loop", 1 << 26);  // seconds on 8 SMs at 1 block each
  ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
  const KernelSpec& k = w.tenants[0].steps[0].kernel;
  const int occupancy = max_resident_blocks(b->device(), k.variant(k.default_variant));
  ASSERT_GE(occupancy, 4);
  // Full occupancy in general, 1 block on the tight SMs: all 8 of the set (the device reads the
  // tight bitmap at admission).
  Placement p;
  p.sms = SmSet::range(0, 8);
  p.form = LaunchForm::persistent;
  p.tight_sms = SmSet::range(0, 8);
  p.tight_tlp = 1;
  const DispatchRequest r = request(w, 0, 0, p);
  ASSERT_TRUE(b->dispatch(r).is_ok());
  // Blocks finished per second over `seconds` of wall time (0 if the launch ended meanwhile).
  auto rate = [&](double seconds) -> double {
    auto a = b->progress(r.id);
    const double t0 = b->now();
    auto none = b->advance(t0 + seconds);
    auto z = b->progress(r.id);
    if (!a.is_ok() || !none.is_ok() || !none->empty() || !z.is_ok()) return 0;
    return static_cast<double>((*z)[0] - (*a)[0]) / (b->now() - t0);
  };
  ASSERT_TRUE(b->advance(b->now() + 0.005).is_ok());
  const double slow = rate(0.01);
  ASSERT_GT(slow, 0);
  ASSERT_TRUE(b->set_tlp(r.id, 0, SmSet(), 0).is_ok());  // no tight SMs: a second launch fills the new slots
  ASSERT_TRUE(b->advance(b->now() + 0.002).is_ok());
  const double fast = rate(0.01);
  EXPECT_GT(fast, 1.5 * slow) << "1 block per SM: " << slow << " blocks/s; " << occupancy << ": " << fast;
  ASSERT_TRUE(b->preempt(r.id).is_ok());
  auto done = drain(*b);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_GT(done->front().blocks_done[0], 0);
  EXPECT_LE(done->front().blocks_done[0], r.parts[0].range.size());
  // Native launches have no TLP to change.
  Placement native;
  native.sms = b->device().all_sms();
  const DispatchRequest n = request(w, 1, 1, native);
  ASSERT_TRUE(b->dispatch(n).is_ok());
  EXPECT_EQ(b->set_tlp(n.id, 2, SmSet(), 0).code(), StatusCode::unsupported);
  ASSERT_TRUE(drain(*b).is_ok());
}

// Placement::priority on the GPU: a small launch made just after a long one that fills every SM
// ends within the long one's first half when it is on the high-priority stream (its blocks go
// before the long launch's waiting ones as SMs free up), and only near the long one's end when both
// are normal (the block scheduler serves the older launch first: the compute + memory pair: streams ~ serial).
TEST(CudaBackend, HighPriorityBlocksGoBeforeAnOlderLaunchsWaitingBlocks) {
  Workload w;
  w.name = "priority";
  for (const auto& [name, size] : {std::pair{"stream_triad", int64_t{1} << 28}, std::pair{"vector_add", int64_t{1} << 20}}) {
    TenantSpec t;
    t.name = name;
    t.steps.push_back(KernelStep{*make_suite_kernel(name, size), 1});
    w.tenants.push_back(t);
  }
  for (const int priority : {kNormalStreamPriority, kHighStreamPriority}) {
    SCOPED_TRACE(priority);
    auto b = backend();
    ASSERT_TRUE(b);
    ASSERT_OK(testing::prepare_all(*b, w));
    ASSERT_OK(b->start_clock());
    Placement normal;
    normal.sms = b->device().all_sms();
    Placement small = normal;
    small.priority = priority;
    ASSERT_TRUE(b->dispatch(request(w, 0, 0, normal)).is_ok());
    ASSERT_TRUE(b->dispatch(request(w, 1, 1, small)).is_ok());
    auto done = drain(*b);
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    ASSERT_EQ(done->size(), 2u);
    const auto of = [&](int64_t id) {
      return *std::find_if(done->begin(), done->end(), [&](const Completion& c) { return c.dispatch.value == id; });
    };
    const Completion big = of(0);
    const Completion little = of(1);
    const Seconds half = big.start + 0.5 * (big.end - big.start);
    if (priority == kHighStreamPriority) {
      EXPECT_LT(little.end, half) << "long " << big.start << "-" << big.end << ", small ended " << little.end;
    } else {
      EXPECT_GT(little.end, half) << "long " << big.start << "-" << big.end << ", small ended " << little.end;
    }
  }
}

TEST(CudaBackend, EngineRunsEveryBaselineOnTheGpu) {
  const Workload w = two_kernels();
  for (const auto& entry : builtin_policies().list()) {
    auto b = backend();
    ASSERT_TRUE(b);
    auto p = builtin_policies().make(entry.name, {});
    ASSERT_TRUE(p.is_ok());
    EngineOptions o;
    auto run = run_workload(w, *b, **p, o);
    ASSERT_TRUE(run.is_ok()) << entry.name << ": " << run.status().to_string();
    EXPECT_GT(run->makespan, 0);
    for (const auto& l : run->launches) EXPECT_GT(l.end, l.start) << entry.name;
  }
}

// SGDRC's tidal masking under load on the GPU: a long elastic BE kernel runs while three LC
// requests come and go; each request shrinks it once (off the LC side) and grows it back once (to
// every SM) through the backend's resize, never to the set it already has, and every launch ends
// with all its blocks (the engine checks the counts).
TEST(CudaBackend, SgdrcShrinksAndGrowsARunningBeKernelOncePerLcRequest) {
  auto b = backend();
  ASSERT_TRUE(b);
  Workload w;
  w.name = "sgdrc-gpu";
  TenantSpec lc;
  lc.name = "infer";
  lc.cls = TenantClass::latency_critical;
  lc.latency_target = 0.01;
  lc.steps.push_back(KernelStep{*make_suite_kernel("tc_gemm", 1024), 1});
  lc.steps.push_back(KernelStep{*make_suite_kernel("vector_add", 1 << 20), 1});
  lc.arrival.kind = ArrivalProcess::Kind::timestamps;
  lc.arrival.timestamps = {0.005, 0.015, 0.025};
  lc.requests = 3;
  TenantSpec be;
  be.name = "train";
  // About 40 ms on a whole H100 (2^28 took 10 ms), so that it outlasts the three LC requests.
  be.steps.push_back(KernelStep{*make_suite_kernel("fma_loop", int64_t{1} << 30), 1});
  w.tenants = {lc, be};
  testing::LoggedSgdrc sgdrc{policy::SgdrcOptions{}};
  auto run = run_workload(w, *b, sgdrc, EngineOptions{});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const auto be_launch = std::find_if(run->launches.begin(), run->launches.end(), [](const LaunchRecord& l) { return l.tenant == TenantId{1}; });
  ASSERT_NE(be_launch, run->launches.end());
  ASSERT_GT(be_launch->end, run->tenants[0].requests.back().end) << "the BE kernel ended before the LC requests did: make it longer";
  const testing::TidalResizes r = testing::tidal_resizes(sgdrc.log, b->device().all_sms());
  EXPECT_EQ(r.shrinks, 3);
  EXPECT_EQ(r.grows, 3);
  EXPECT_EQ(r.repeats, 0);
  EXPECT_EQ(r.unknown, 0);
  for (const auto& d : run->dispatches) {
    if (d.tenants.front() != TenantId{0}) continue;
    EXPECT_EQ(d.placement.priority, 1);
    EXPECT_TRUE(d.placement.sms.contains(b->device().sms_of_tpc(0).ids().front()));
  }
}

// Dispatches queued behind a running one on the GPU (SchedContext::dispatch with `after`): a task's kernels queued on its stream behind the running
// one start only after it ends (also across streams: a persistent dispatch behind a native one
// on a green context waits on the GPU for its end event), every block runs once, and the host's
// round trip between them is gone: the gap from one end to the next start is shorter than with
// ahead=0 (checked on the median, with a wide margin; the numbers are in bench/raise's traces).
TEST(CudaBackend, QueuedKernelsStartWhenTheirPredecessorEnds) {
  Workload w;
  w.name = "queued";
  TenantSpec t;
  t.name = "chain";
  t.steps.push_back(KernelStep{*make_suite_kernel("vector_add", 1 << 22), 6});
  t.steps.push_back(KernelStep{*make_suite_kernel("stream_triad", 1 << 24), 2});
  w.tenants.push_back(t);
  auto median_gap = [](const RunRecord& r) {
    std::vector<double> gaps;
    for (size_t i = 1; i < r.launches.size(); ++i) gaps.push_back(r.launches[i].start - r.launches[i - 1].end);
    std::sort(gaps.begin(), gaps.end());
    return gaps[gaps.size() / 2];
  };
  double gap_task = 0, gap_none = 0;
  for (const char* ahead : {"task", "0"}) {
    auto b = backend();
    ASSERT_TRUE(b);
    // burst=0: every queued kernel in one go (with a burst limit the rest goes on a tick, and a
    // kernel whose predecessor has already finished by then is dispatched the usual way).
    auto p = builtin_policies().make("rd", {{"ahead", ahead}, {"dims", "max"}, {"burst", "0"}});
    ASSERT_TRUE(p.is_ok());
    auto run = run_workload(w, *b, **p, EngineOptions{});
    ASSERT_TRUE(run.is_ok()) << ahead << ": " << run.status().to_string();
    ASSERT_EQ(run->launches.size(), 8u);
    for (size_t i = 0; i < run->launches.size(); ++i) {
      EXPECT_GT(run->launches[i].end, run->launches[i].start);
      if (i > 0) {
        EXPECT_GE(run->launches[i].start, run->launches[i - 1].end - 1e-6) << ahead << " launch " << i;
      }
    }
    int queued = 0;
    for (const auto& d : run->dispatches) queued += d.after.valid();
    EXPECT_EQ(queued, std::string(ahead) == "0" ? 0 : 7);
    (std::string(ahead) == "0" ? gap_none : gap_task) = median_gap(*run);
  }
  std::printf("median gap between a task's kernels: queued %.1f us, host round trip %.1f us\n", gap_task * 1e6, gap_none * 1e6);
  EXPECT_LT(gap_task, gap_none);

  // Across streams: a persistent dispatch on SMs 0-59 queued behind a native one on a green
  // context of the other SMs (different streams: the wait is on the GPU).
  auto b = backend();
  ASSERT_TRUE(b);
  const Workload two = two_kernels();
  ASSERT_TRUE(testing::prepare_all(*b, two).is_ok());
  Placement native;
  native.sms = b->green_contexts().cover(SmSet::range(60, b->device().sm_count - 60));
  Placement persistent;
  persistent.sms = SmSet::range(0, 60);
  persistent.form = LaunchForm::persistent;
  ASSERT_TRUE(b->dispatch(request(two, 0, 0, native)).is_ok());
  DispatchRequest behind = request(two, 1, 1, persistent);
  behind.after = DispatchId{0};
  ASSERT_TRUE(b->dispatch(behind).is_ok());
  auto done = drain(*b);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 2u);
  const Completion& first = (*done)[0].dispatch.value == 0 ? (*done)[0] : (*done)[1];
  const Completion& second = (*done)[0].dispatch.value == 0 ? (*done)[1] : (*done)[0];
  EXPECT_GE(second.start, first.end - 1e-6);
  EXPECT_FALSE(second.preempted);
  EXPECT_EQ(second.blocks_done[0], behind.parts[0].range.size());
}

TEST(CudaBackend, BackendsGiveTheirDeviceMemoryBack) {
  auto free_bytes = [] {
    size_t free = 0, total = 0;
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return static_cast<double>(free);
  };
  Workload w = two_kernels();
  TenantSpec km;
  km.name = "kmeans";
  km.steps.push_back(KernelStep{*make_suite_kernel("kmeans", 1 << 20), 1});  // 140 MB of features
  w.tenants.push_back(km);
  auto one_run = [&](bool with_workload) {
    auto b = backend();
    ASSERT_TRUE(b);
    if (!with_workload) return;
    auto p = builtin_policies().make("streams", {});
    ASSERT_TRUE(p.is_ok());
    auto run = run_workload(w, *b, **p, EngineOptions{});
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  };
  one_run(true);  // the runtime's own first-use allocations
  for (bool with_workload : {false, true}) {
    const double before = free_bytes();
    for (int i = 0; i < 8; ++i) {
      one_run(with_workload);
      std::printf("backend %d (%s): %.0f MB free\n", i, with_workload ? "with a run" : "created only", free_bytes() / 1e6);
    }
    EXPECT_GT(free_bytes(), before - 64e6) << (with_workload ? "with a run" : "created only") << ": "
                                            << (before - free_bytes()) / 1e6 << " MB not given back over 8 backends";
  }
}

}  // namespace
}  // namespace concord

namespace concord {
namespace {

// can_implement on the GPU means what it means on the simulator: for every pair of elastic suite
// kernels, at their default and largest block sizes and at ratios 1:1 and 2:1, both give the same
// answer (the fusion compiler is available on the GPU machines).
TEST(CudaBackend, CanImplementAgreesWithTheSimulatorForEveryPair) {
  auto b = backend();
  ASSERT_TRUE(b);
  ASSERT_TRUE(kernels::FusionCompiler::shared().available().is_ok())
      << kernels::FusionCompiler::shared().available().to_string();
  sim::SimBackend sim(b->device());
  std::vector<KernelSpec> suite;
  for (const SuiteEntry& e : suite_catalog()) {
    if (!e.elastic) continue;
    auto k = make_suite_kernel(e.name, e.default_size);
    ASSERT_TRUE(k.is_ok()) << k.status().to_string();
    suite.push_back(*k);
    k->default_variant = k->variant_count() - 1;
    suite.push_back(*k);
  }
  int accepted = 0, compared = 0;
  for (const KernelSpec& a : suite) {
    for (const KernelSpec& c : suite) {
      for (const auto& [pa, pc] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}}) {
        DispatchRequest r;
        r.id = DispatchId{1};
        r.parts = {DispatchPart{LaunchId{1}, TenantId{1}, &a, a.default_variant,
                                {0, a.variant(a.default_variant).logical_blocks}, pa},
                   DispatchPart{LaunchId{2}, TenantId{2}, &c, c.default_variant,
                                {0, c.variant(c.default_variant).logical_blocks}, pc}};
        r.placement.sms = b->device().all_sms();
        r.placement.form = LaunchForm::persistent;
        const Status on_gpu = b->can_implement(r);
        const Status on_sim = sim.can_implement(r);
        EXPECT_EQ(on_gpu.code(), on_sim.code()) << a.name << " + " << c.name << " " << pa << ":" << pc << ": cuda "
                                                << on_gpu.to_string() << " / sim " << on_sim.to_string();
        accepted += on_gpu.is_ok();
        ++compared;
      }
    }
  }
  std::printf("can_implement: %d of %d fused requests accepted on both backends\n", accepted, compared);
  EXPECT_GT(accepted, 0);
}

// The device's figures come from its own attributes, not from a name.
TEST(CudaBackend, DeviceSpecComesFromTheDevicesAttributes) {
  auto b = backend();
  ASSERT_TRUE(b);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  int clock_khz = 0, mem_khz = 0, bus = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0), cudaSuccess);
  const DeviceSpec& d = b->device();
  EXPECT_EQ(d.name, prop.name);
  EXPECT_EQ(d.sm_count, prop.multiProcessorCount);
  EXPECT_DOUBLE_EQ(d.l2_bytes, prop.l2CacheSize);
  EXPECT_DOUBLE_EQ(d.dram_bytes_per_s, 2.0 * mem_khz * 1e3 * bus / 8);
  EXPECT_DOUBLE_EQ(d.clock_hz, clock_khz * 1e3);
  std::printf("device: %s, %d SMs, %.0f MB L2, %.2f TB/s, %.1f FP32 TFLOP/s, %.0f tensor TFLOP/s\n", d.name.c_str(),
              d.sm_count, d.l2_bytes / 1e6, d.dram_bytes_per_s / 1e12, d.fp32_flops / 1e12, d.tensor_flops / 1e12);
  // On the H100 and H200 the derived peaks are near the data-sheet figures.
  if (prop.major == 9) {
    EXPECT_NEAR(d.fp32_flops, 66.9e12, 8e12);
    EXPECT_GT(d.dram_bytes_per_s, 3.0e12);
  }
  // Versions as the driver and the runtime report them (results files carry them).
  int runtime = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime), cudaSuccess);
  EXPECT_EQ(d.cuda_version, std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10));
  EXPECT_FALSE(d.driver_version.empty());
  std::printf("driver %s, CUDA runtime %s\n", d.driver_version.c_str(), d.cuda_version.c_str());
}

// The backend runs on the GPU its config names, counted among those CUDA_VISIBLE_DEVICES leaves;
// an index past them is an error that says how many there are.
TEST(CudaBackend, DeviceIsChosenByIndex) {
  cuda::register_backend();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  BackendConfig config;
  config.kind = "cuda";
  config.device_index = count - 1;
  {
    auto b = make_backend(config);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, count - 1), cudaSuccess);
    EXPECT_EQ((*b)->device().name, prop.name);
  }
  config.device_index = count;
  auto missing = make_backend(config);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find(std::to_string(count) + " visible"), std::string::npos)
      << missing.status().message();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// GPCs measured with thread-block clusters: every SM in one, each TPC (green-context group) within
// one, and the backend's topology (the trace's GPC tracks) is the measured one.
TEST(CudaBackend, GpcProbeGroupsSmsByTheirClusters) {
  auto b = backend();
  ASSERT_TRUE(b);
  const DeviceSpec& d = b->device();
  int cluster_launch = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, 0), cudaSuccess);
  auto probe = cuda::probe_gpcs(0, d.sm_count);
  if (!cluster_launch) GTEST_SKIP() << "no cluster launch here: " << probe.status().to_string();
  ASSERT_TRUE(probe.is_ok()) << probe.status().to_string();
  ASSERT_EQ(probe->gpc_of_sm.size(), static_cast<size_t>(d.sm_count));
  std::map<int, int> sms_of_gpc;
  for (int g : probe->gpc_of_sm) ++sms_of_gpc[g];
  int cc_major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  // More groups than Hopper has GPCs: SMs that never shared a cluster although one GPC holds them
  // (seen on an H100: 12 groups, four of 2 SMs). The backend must then keep the nominal layout.
  const bool plausible = cc_major != 9 || sms_of_gpc.size() <= 8u;
  if (plausible) {
    EXPECT_EQ(d.gpc_of_sm, probe->gpc_of_sm) << "the backend uses the measured GPCs";
  } else {
    EXPECT_NE(d.gpc_of_sm, probe->gpc_of_sm) << "the backend must not use an implausible probe";
  }
  std::string sizes;
  for (const auto& [g, n] : sms_of_gpc) sizes += (sizes.empty() ? "" : " ") + std::to_string(n);
  std::printf("GPC probe: %zu GPCs of %s SMs (largest cluster %d, %d clusters)\n", sms_of_gpc.size(), sizes.c_str(),
              probe->largest_cluster, probe->clusters);
  EXPECT_GE(probe->largest_cluster, 2);
  for (const auto& [g, n] : sms_of_gpc) EXPECT_GE(n, 2) << "GPC " << g;
  // Numbered in the order of their lowest SM.
  int next = 0;
  for (int g : probe->gpc_of_sm) {
    EXPECT_LE(g, next);
    next = std::max(next, g + 1);
  }
  for (const SmSet& tpc : b->green_contexts().groups()) {
    std::set<int> gpcs;
    for (int sm : tpc.ids()) {
      if (sm < d.sm_count) gpcs.insert(probe->gpc_of_sm[static_cast<size_t>(sm)]);
    }
    EXPECT_LE(gpcs.size(), 1u) << "a TPC spans GPCs";
  }
}

// A tenant's allocator: its kernels' buffers come from it, and go back to it.
class CountingAllocator final : public DeviceAllocator {
 public:
  std::string name() const override { return "counting"; }
  Result<void*> allocate(size_t bytes) override {
    void* p = nullptr;
    CONCORD_CUDA(cudaMalloc(&p, bytes));
    ++live;
    total_bytes += bytes;
    return p;
  }
  void release(void* p, size_t) override {
    cudaFree(p);
    --live;
  }
  int live = 0;
  size_t total_bytes = 0;
};

TEST(CudaBackend, ATenantsBuffersComeFromItsAllocator) {
  auto counting = std::make_shared<CountingAllocator>();
  const Workload w = two_kernels();
  {
    auto b = backend();
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->set_allocator(TenantId{0}, counting).is_ok());
    ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
    // fma_loop (tenant 0) has one output buffer of `size` floats; stream_triad's are not counted.
    EXPECT_EQ(counting->live, 1);
    EXPECT_EQ(counting->total_bytes, static_cast<size_t>(w.tenants[0].steps[0].kernel.size) * sizeof(float));
    Placement p;
    p.sms = b->device().all_sms();
    p.form = LaunchForm::persistent;
    ASSERT_TRUE(b->dispatch(request(w, 0, 0, p)).is_ok());
    auto done = drain(*b);
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    ASSERT_EQ(done->size(), 1u);
    EXPECT_TRUE(done->front().error.is_ok()) << done->front().error.to_string();
    const KernelSpec& k = w.tenants[0].steps[0].kernel;
    EXPECT_EQ(done->front().blocks_done[0], k.variant(k.default_variant).logical_blocks);
  }
  EXPECT_EQ(counting->live, 0) << "the backend gave the tenant's buffers back to its allocator";
}

// An allocator that hands out an address nothing maps: the tenant's kernel faults.
class UnmappedAllocator final : public DeviceAllocator {
 public:
  std::string name() const override { return "unmapped"; }
  Result<void*> allocate(size_t) override { return reinterpret_cast<void*>(uintptr_t{1} << 40); }
  void release(void*, size_t) override {}
};

// Runs in a child process (an illegal address poisons the CUDA context for the rest of the
// process): the parent test below starts it and reads its verdict.
TEST(CudaFaultChild, IllegalAddressIsNamedAndEarlierWorkKept) {
  if (!std::getenv("CONCORD_GPU_FAULT_CHILD")) GTEST_SKIP() << "runs as the child of CudaFaults.*";
  auto b = backend();
  ASSERT_TRUE(b);
  const Workload w = two_kernels();
  ASSERT_TRUE(b->set_allocator(TenantId{0}, std::make_shared<UnmappedAllocator>()).is_ok());
  ASSERT_TRUE(testing::prepare_all(*b, w).is_ok());
  Placement p;
  p.sms = b->device().all_sms();
  p.form = LaunchForm::persistent;
  // Tenant 1's work first, to the end: it is reported whole.
  ASSERT_TRUE(b->dispatch(request(w, 1, 4, p)).is_ok());
  auto good = drain(*b);
  ASSERT_TRUE(good.is_ok()) << good.status().to_string();
  ASSERT_EQ(good->size(), 1u);
  EXPECT_TRUE(good->front().error.is_ok());
  EXPECT_EQ(good->front().blocks_done[0], request(w, 1, 4, p).parts[0].range.size());
  // Tenant 0's kernel writes through the unmapped address: its completion carries the error.
  ASSERT_TRUE(b->dispatch(request(w, 0, 5, p)).is_ok());
  auto bad = drain(*b);
  ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
  ASSERT_EQ(bad->size(), 1u);
  const Status& e = bad->front().error;
  EXPECT_EQ(e.code(), StatusCode::device_error);
  EXPECT_NE(e.message().find("tenant 0 kernel 'fma_loop' dispatch 5"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("cudaErrorIllegalAddress"), std::string::npos) << e.message();
  if (!::testing::Test::HasFailure()) std::printf("CHILD-OK\n");
  std::fflush(stdout);
  std::_Exit(0);  // the context is poisoned: no teardown that could wait on it
}

TEST(CudaFaults, IllegalAddressIsNamedAndEarlierWorkKept) {
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  const std::string cmd = std::string("CONCORD_GPU_FAULT_CHILD=1 timeout 120 '") + self +
                          "' --gtest_filter=CudaFaultChild.IllegalAddressIsNamedAndEarlierWorkKept 2>&1";
  FILE* child = popen(cmd.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), child)) out.append(buf, n);
  const int rc = pclose(child);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("CHILD-OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace concord
