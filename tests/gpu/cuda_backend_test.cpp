// The CUDA backend on a real GPU: green contexts confine kernels to their SMs; dispatches in
// each form complete with the right block counts; preempt and resize work through the backend.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/green_contexts.h"
#include "concord/spec_source.h"
#include "concord/occupancy.h"
#include "concord/policy.h"
#include "concord/suite.h"
#include "gpu_test_support.h"

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
  ASSERT_TRUE(b->prepare(w).is_ok());
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
  ASSERT_TRUE(b->prepare(w).is_ok());
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
  ASSERT_TRUE(b->prepare(w).is_ok());
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
  ASSERT_TRUE(b->prepare(w).is_ok());
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

// SchedContext::queue_next on the GPU: a task's kernels queued on its stream behind the running
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
  ASSERT_TRUE(b->prepare(two).is_ok());
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

// SchedContext::dispatch_after on the GPU (the task-stream policies' hand-off): with one stream,
// every task but the first is dispatched behind the last kernel of the task before it (another
// tenant, another CUDA stream), before that kernel ends, and starts only after it has ended.
TEST(CudaBackend, HandedOffTasksStartWhenTheTaskBeforeEnds) {
  Workload w;
  w.name = "handoff";
  for (int i = 0; i < 4; ++i) {
    TenantSpec t;
    t.name = "task" + std::to_string(i);
    t.steps.push_back(KernelStep{*make_suite_kernel(i % 2 ? "stream_triad" : "vector_add", 1 << 24), 3});
    w.tenants.push_back(t);
  }
  auto b = backend();
  ASSERT_TRUE(b);
  auto p = builtin_policies().make("sq", {{"streams", "1"}, {"handoff", "1"}, {"dims", "max"}, {"burst", "0"}});
  ASSERT_TRUE(p.is_ok());
  auto run = run_workload(w, *b, **p, EngineOptions{});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->launches.size(), 12u);
  int handed = 0;
  for (const DispatchRecord& d : run->dispatches) {
    EXPECT_GT(d.end, d.start);
    if (!d.after.valid()) continue;
    const DispatchRecord& before = run->dispatches[static_cast<size_t>(d.after.value)];
    EXPECT_GE(d.start, before.end - 1e-6) << "dispatch " << d.id.value;
    if (before.tenants[0] == d.tenants[0]) continue;
    ++handed;
    std::printf("hand-off %lld -> %lld: %.1f us from the end to the next task's start\n",
                static_cast<long long>(before.id.value), static_cast<long long>(d.id.value), (d.start - before.end) * 1e6);
  }
  // Three hand-offs, each decided while the task's last kernel (100-300 us here) runs; one may
  // miss when the host sees the second-to-last kernel's end only after the last one's.
  EXPECT_GE(handed, 2);
  for (const TenantRecord& t : run->tenants) EXPECT_GT(t.logical_blocks, 0);
}

// Benches make a fresh backend per run (bench/raise: over 500 in one process): each must give
// its device memory back, buffers and contexts alike.
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
