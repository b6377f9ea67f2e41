// The device API on a real GPU: every kernel in every mode against its CPU reference; elastic
// launches only on allowed SMs and within TLP; preempt + resume and shrink + grow finish every
// logical block exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstddef>
#include <map>
#include <thread>

#include "concord/device/launch.cuh"
#include "concord/suite.h"
#include "gpu_test_support.h"
#include "kernels/device/device_kernel.h"

namespace concord {
namespace {

using testing::DeviceControl;
using testing::sm_count;

// Small sizes: references run on the CPU.
const std::map<std::string, std::pair<int64_t, double>> kCases = {
    {"fma_loop", {1 << 16, 1e-6}}, {"stream_triad", {1 << 20, 1e-6}}, {"vector_add", {1 << 20, 1e-6}},
    {"hotspot", {512, 1e-6}},      {"matmul", {256, 1e-5}},         {"kmeans", {1 << 15, 1e-3}},
    {"tc_gemm", {256, 1e-3}},      {"srad", {512, 1e-5}},          {"cfd_flux", {1 << 16, 1e-5}},
    {"gaussian", {512, 1e-6}},     {"hotspot3d", {128, 1e-6}},     {"bfs", {1 << 16, 0}},
    {"fft_stage", {1 << 16, 1e-5}}, {"pathfinder", {1 << 16, 0}},  {"backprop", {1 << 16, 1e-5}},
    {"sgemm", {256, 1e-5}},        {"stencil", {64, 1e-6}},        {"lbm", {1 << 16, 1e-5}},
    {"mri_q", {1 << 12, 1e-4}},
};

// CONCORD_GPU_TEST_KERNELS=a,b,c limits the per-kernel tests to those kernels (the sanitizer runs
// use the kernels with shared memory and barriers; every kernel runs in the plain test run).
bool selected(const std::string& name) {
  const char* env = std::getenv("CONCORD_GPU_TEST_KERNELS");
  if (!env || !*env) return true;
  const std::string list = std::string(",") + env + ",";
  return list.find("," + name + ",") != std::string::npos;
}

std::unique_ptr<kernels::DeviceKernel> make(const std::string& name) {
  auto spec = make_suite_kernel(name, kCases.at(name).first);
  EXPECT_TRUE(spec.is_ok()) << spec.status().to_string();
  auto k = kernels::make_device_kernel(*spec);
  EXPECT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_TRUE((*k)->prepare(42).is_ok());
  return std::move(*k);
}

const std::map<std::string, std::pair<int64_t, double>> kLibraryCases = {{"cublas_gemm", {512, 1e-3}}, {"cufft", {1 << 14, 1e-4}}};

TEST(DeviceApi, EverySuiteKernelHasDeviceCodeAndATestCase) {
  for (const SuiteEntry& e : suite_catalog()) {
    auto spec = make_suite_kernel(e.name, e.default_size);
    ASSERT_TRUE(spec.is_ok());
    EXPECT_TRUE(kernels::make_device_kernel(*spec).is_ok()) << e.name;
    EXPECT_TRUE(e.elastic ? kCases.count(e.name) != 0 : kLibraryCases.count(e.name) != 0) << e.name;
  }
}

TEST(DeviceApi, LibraryKernelsMatchReferenceWithAndWithoutAnAccessPolicyWindow) {
  for (const auto& [name, c] : kLibraryCases) {
    SCOPED_TRACE(name);
    auto spec = make_suite_kernel(name, c.first);
    ASSERT_TRUE(spec.is_ok());
    auto k = kernels::make_device_kernel(*spec);
    ASSERT_TRUE(k.is_ok());
    ASSERT_OK((*k)->prepare(9));
    cuda::Stream s;
    ASSERT_OK(s.create());
    for (CachePolicy cache : {CachePolicy::normal, CachePolicy::l2_evict_first}) {
      ASSERT_OK((*k)->poison_output(s.get()));
      ASSERT_OK((*k)->launch_standalone(0, {0, spec->variant(0).logical_blocks}, cache, s.get()));
      ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
      auto err = (*k)->check(5);
      ASSERT_TRUE(err.is_ok()) << err.status().to_string();
      EXPECT_LE(*err, c.second) << to_string(cache);
    }
    EXPECT_FALSE((*k)->launch_standalone(0, {0, spec->variant(0).logical_blocks}, CachePolicy::l1_bypass, s.get()).is_ok());
    EXPECT_FALSE((*k)->elastic_occupancy(0).is_ok());
  }
}

TEST(DeviceApi, StandaloneMatchesReferenceInEveryVariantAndCachePolicy) {
  for (const auto& [name, c] : kCases) {
    if (!selected(name)) continue;
    SCOPED_TRACE(name);
    auto k = make(name);
    for (int v = 0; v < k->spec().variant_count(); ++v) {
      for (CachePolicy cache : kAllCachePolicies) {
        ASSERT_OK(k->poison_output(nullptr));
        ASSERT_OK(k->launch_standalone(v, {0, k->spec().variant(v).logical_blocks}, cache, nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        auto err = k->check(7);
        ASSERT_TRUE(err.is_ok()) << err.status().to_string();
        EXPECT_LE(*err, c.second) << name << " variant " << v << " cache " << to_string(cache);
      }
    }
  }
}

TEST(DeviceApi, ElasticMatchesReferenceOnlyOnAllowedSmsWithinTlp) {
  const int sms = sm_count();
  SmSet even;
  for (int s = 0; s < sms; s += 2) even.add(s);
  const std::vector<std::pair<SmSet, int>> placements = {{SmSet::all(sms), 0}, {SmSet::range(0, 33), 1}, {even, 2}};
  for (const auto& [name, c] : kCases) {
    if (!selected(name)) continue;
    SCOPED_TRACE(name);
    auto k = make(name);
    const int v = k->spec().default_variant;
    auto occupancy = k->elastic_occupancy(v);
    ASSERT_TRUE(occupancy.is_ok());
    ASSERT_GT(*occupancy, 0) << name;
    for (const auto& [set, tlp_request] : placements) {
      for (CachePolicy cache : {CachePolicy::normal, CachePolicy::both}) {
        const int tlp = tlp_request > 0 ? tlp_request : *occupancy;
        DeviceControl ctl;
        ASSERT_OK(ctl.init({0, k->spec().variant(v).logical_blocks}, set, tlp, /*chunk=*/3));
        ASSERT_OK(k->poison_output(nullptr));
        ASSERT_OK(k->launch_elastic(v, cache, ctl.get(), *occupancy * sms, nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        auto err = k->check(11);
        ASSERT_TRUE(err.is_ok());
        EXPECT_LE(*err, c.second) << name << " on " << set.count() << " SMs, tlp " << tlp;
        auto state = ctl.read();
        ASSERT_TRUE(state.is_ok());
        EXPECT_EQ(state->done, static_cast<unsigned long long>(k->spec().variant(v).logical_blocks));
        for (int s = 0; s < sms; ++s) {
          if (!set.contains(s)) EXPECT_EQ(state->sm_done[s], 0u) << name << ": work on SM " << s << " outside the set";
          EXPECT_LE(state->resident_peak[s], tlp) << name << ": SM " << s;
          EXPECT_EQ(state->resident[s], 0) << "every admitted block left";
        }
      }
    }
  }
}

TEST(DeviceApi, FusedPairsFinishBothBodies) {
  const int sms = sm_count();
  for (const auto& [a_name, b_name] : kernels::fused_pairs()) {
    if (!selected(a_name) && !selected(b_name)) continue;
    for (const auto& [pa, pb] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}}) {
      auto a = make(a_name);
      auto b = make(b_name);
      const int va = a->spec().default_variant, vb = b->spec().default_variant;
      auto occupancy = kernels::fused_occupancy(*a, va, pa, *b, vb, pb);
      // Over 1024 threads or over the register file: not a valid ratio for this pair.
      if (!occupancy.is_ok() || *occupancy == 0) continue;
      DeviceControl ca, cb;
      ASSERT_OK(ca.init({0, a->spec().variant(va).logical_blocks}, SmSet::all(sms), *occupancy, 2));
      ASSERT_OK(cb.init({0, b->spec().variant(vb).logical_blocks}, SmSet::all(sms), *occupancy, 5));
      ASSERT_OK(a->poison_output(nullptr));
      ASSERT_OK(b->poison_output(nullptr));
      ASSERT_OK(kernels::launch_fused(*a, va, pa, ca.get(), *b, vb, pb, cb.get(), CachePolicy::normal, *occupancy * sms, nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto ea = a->check(3), eb = b->check(3);
      ASSERT_TRUE(ea.is_ok() && eb.is_ok());
      EXPECT_LE(*ea, kCases.at(a_name).second) << a_name << " fused with " << b_name << " " << pa << ":" << pb;
      EXPECT_LE(*eb, kCases.at(b_name).second) << b_name << " fused with " << a_name << " " << pa << ":" << pb;
    }
  }
}

// Counts how often each logical block ran, where, and in which phase; spins to make blocks long.
struct CountBody {
  unsigned* count;
  unsigned* sm_of;
  int* phase_of;
  const int32_t* phase;
  long long spin_cycles;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    if (ctx.thread == 0) {
      atomicAdd(&count[ctx.block], 1u);
      sm_of[ctx.block] = device::sm_id();
      phase_of[ctx.block] = device::load_relaxed(phase);
      const long long until = clock64() + spin_cycles;
      while (clock64() < until) {
      }
    }
    ctx.sync();
  }
};

struct CountRun {
  cuda::DeviceBuffer<unsigned> count, sm_of;
  cuda::DeviceBuffer<int> phase_of;
  cuda::DeviceBuffer<int32_t> phase;
  int64_t blocks = 0;
  Status init(int64_t n) {
    blocks = n;
    CONCORD_RETURN_IF_ERROR(count.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(sm_of.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(phase_of.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(phase.allocate(1));
    CONCORD_CUDA(cudaMemset(count.get(), 0, count.bytes()));
    CONCORD_CUDA(cudaMemset(phase.get(), 0, phase.bytes()));
    return Status::ok();
  }
  CountBody body(long long spin) const { return {count.get(), sm_of.get(), phase_of.get(), phase.get(), spin}; }
  template <typename T>
  std::vector<T> fetch(const cuda::DeviceBuffer<T>& b) const {
    std::vector<T> h(b.size());
    EXPECT_EQ(cudaMemcpy(h.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

TEST(DeviceApi, PreemptThenResumeRunsEveryLogicalBlockExactlyOnce) {
  const int sms = sm_count();
  CountRun run;
  ASSERT_OK(run.init(400000));
  cuda::Stream work, control;
  ASSERT_OK(work.create());
  ASSERT_OK(control.create());
  // Pinned source for the flag, allocated before the launch (allocation can take milliseconds).
  int32_t* one = nullptr;
  ASSERT_EQ(cudaMallocHost(&one, sizeof(int32_t)), cudaSuccess);
  *one = 1;
  DeviceControl first;
  ASSERT_OK(first.init({0, run.blocks}, SmSet::all(sms), 2));
  // About 400000 blocks x 10000 cycles / (2 x SMs) = about 7 ms: long enough to preempt midway.
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(run.body(10000), first.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_OK(first.write(offsetof(device::ElasticControl, preempt), one, sizeof(int32_t), control.get()));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto state = first.read();
  ASSERT_TRUE(state.is_ok());
  const int64_t done = static_cast<int64_t>(state->done);
  EXPECT_GT(done, 0);
  EXPECT_LT(done, run.blocks) << "the preempt flag arrived after the launch finished: lengthen it";
  // Resume the unfinished suffix on a fresh control block.
  DeviceControl second;
  ASSERT_OK(second.init({done, run.blocks}, SmSet::all(sms), 2));
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(run.body(100), second.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto resumed = second.read();
  ASSERT_TRUE(resumed.is_ok());
  EXPECT_EQ(static_cast<int64_t>(resumed->done), run.blocks - done);
  const auto count = run.fetch(run.count);
  for (int64_t b = 0; b < run.blocks; ++b) ASSERT_EQ(count[static_cast<size_t>(b)], 1u) << "logical block " << b;
  cudaFreeHost(one);
}

TEST(DeviceApi, ShrinkThenGrowKeepsWorkOnAllowedSmsAndRunsEveryBlockOnce) {
  const int sms = sm_count();
  constexpr int kTlp = 2;
  CountRun run;
  ASSERT_OK(run.init(600000));
  cuda::Stream work, grow, control;
  ASSERT_OK(work.create());
  ASSERT_OK(grow.create());
  ASSERT_OK(control.create());
  struct Pinned {
    uint64_t words[4];
    int32_t phase;
  };
  Pinned* pinned = nullptr;  // allocated before the launch (allocation can take milliseconds)
  Pinned* grown = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, sizeof(Pinned)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&grown, sizeof(Pinned)), cudaSuccess);
  DeviceControl ctl;
  ASSERT_OK(ctl.init({0, run.blocks}, SmSet::all(sms), kTlp));
  const CountBody body = run.body(10000);
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(body, ctl.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // Shrink to the first 16 SMs, then mark phase 1.
  const auto small = SmSet::range(0, 16).words();
  for (int i = 0; i < 4; ++i) pinned->words[i] = small[static_cast<size_t>(i)];
  pinned->phase = 1;
  ASSERT_OK(ctl.write(offsetof(device::ElasticControl, allowed), pinned->words, sizeof(pinned->words), control.get()));
  ASSERT_EQ(cudaMemcpyAsync(run.phase.get(), &pinned->phase, sizeof(int32_t), cudaMemcpyHostToDevice, control.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(control.get()), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  // Grow back to every SM: rewrite the set and launch again on the same control block.
  const auto all = SmSet::all(sms).words();
  for (int i = 0; i < 4; ++i) grown->words[i] = all[static_cast<size_t>(i)];
  grown->phase = 2;
  ASSERT_EQ(cudaMemcpyAsync(run.phase.get(), &grown->phase, sizeof(int32_t), cudaMemcpyHostToDevice, control.get()), cudaSuccess);
  ASSERT_OK(ctl.write(offsetof(device::ElasticControl, allowed), grown->words, sizeof(grown->words), control.get()));
  ASSERT_EQ(cudaStreamSynchronize(control.get()), cudaSuccess);
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, grow.get()>>>(body, ctl.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const auto count = run.fetch(run.count);
  const auto sm_of = run.fetch(run.sm_of);
  const auto phase_of = run.fetch(run.phase_of);
  std::vector<int> shrunk_outside(static_cast<size_t>(sms), 0);
  int64_t phase1 = 0, phase2_outside = 0;
  for (int64_t b = 0; b < run.blocks; ++b) {
    ASSERT_EQ(count[static_cast<size_t>(b)], 1u) << "logical block " << b;
    const int sm = static_cast<int>(sm_of[static_cast<size_t>(b)]);
    if (phase_of[static_cast<size_t>(b)] == 1) {
      ++phase1;
      if (sm >= 16) ++shrunk_outside[static_cast<size_t>(sm)];
    }
    if (phase_of[static_cast<size_t>(b)] == 2 && sm >= 16) ++phase2_outside;
  }
  EXPECT_GT(phase1, 0) << "no work during the shrunk phase";
  // Within one logical block: a block resident on a removed SM finishes at most the block it held.
  for (int s = 16; s < sms; ++s) EXPECT_LE(shrunk_outside[static_cast<size_t>(s)], kTlp) << "SM " << s;
  EXPECT_GT(phase2_outside, 0) << "growing did not bring work back to the other SMs";
  auto state = ctl.read();
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(static_cast<int64_t>(state->done), run.blocks);
  cudaFreeHost(pinned);
  cudaFreeHost(grown);
}

}  // namespace
}  // namespace concord
