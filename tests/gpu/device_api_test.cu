// The device API on a real GPU: every kernel in every mode against its CPU reference; elastic
// launches only on allowed SMs and within TLP; preempt + resume and shrink + grow finish every
// logical block exactly once; the TLP lowered and raised in place holds its new limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "concord/device/launch.cuh"
#include "concord/suite.h"
#include "concord/workload.h"
#include <cuda/atomic>
#include "gpu_test_support.h"
#include "backend/cuda/cuda_backend.h"
#include "concord/backend.h"
#include "concord/placement_rule.h"
#include "kernels/device/device_kernel.h"
#include "kernels/device/fusion_compiler.h"

namespace concord {
namespace {

using testing::DeviceControl;
using testing::sm_count;

const auto& kCases = testing::kReferenceCases;
using testing::selected;

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

// Every pair of elastic bodies (unordered, a body with itself included) that the shared rule
// accepts runs fused, at 1:1 and 2:1, and both outputs match their CPU references; the rule's
// refusals are not launched. The fused kernels are compiled first, in parallel.
TEST(DeviceApi, EveryPairTheRuleAcceptsRunsFusedCorrectly) {
  const int sms = sm_count();
  auto spec = cuda::probe_device_spec(0);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  ASSERT_OK(kernels::FusionCompiler::shared().available());
  struct Case {
    std::string a, b;
    int pa, pb;
  };
  std::vector<Case> cases;
  for (auto ia = kCases.begin(); ia != kCases.end(); ++ia) {
    for (auto ib = ia; ib != kCases.end(); ++ib) {
      if (!selected(ia->first) && !selected(ib->first)) continue;
      for (const auto& [pa, pb] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}}) {
        cases.push_back({ia->first, ib->first, pa, pb});
      }
    }
  }
  // The rule's answer for each case, from the kernels' specs (as can_implement gives it).
  auto rule = [&](const kernels::DeviceKernel& a, const kernels::DeviceKernel& b, int pa, int pb) {
    DispatchRequest r;
    r.id = DispatchId{1};
    r.parts = {DispatchPart{LaunchId{1}, TenantId{1}, &a.spec(), a.spec().default_variant,
                            {0, a.spec().variant(a.spec().default_variant).logical_blocks}, pa},
               DispatchPart{LaunchId{2}, TenantId{2}, &b.spec(), b.spec().default_variant,
                            {0, b.spec().variant(b.spec().default_variant).logical_blocks}, pb}};
    r.placement.sms = spec->all_sms();
    r.placement.form = LaunchForm::persistent;
    Capabilities caps;
    caps.persistent_form = caps.split_range = caps.fusion = caps.l1_bypass = caps.l2_evict_first = true;
    caps.block_variants = true;
    return check_dispatch_resources(*spec, r, caps, &caps);
  };
  {
    // Compile every accepted case's kernel in parallel (16 threads), timed for docs/cuda_backend.md.
    std::vector<std::pair<std::unique_ptr<kernels::DeviceKernel>, std::unique_ptr<kernels::DeviceKernel>>> made;
    std::vector<const Case*> accepted;
    for (const Case& c : cases) {
      auto a = make(c.a);
      auto b = make(c.b);
      if (!rule(*a, *b, c.pa, c.pb).is_ok()) continue;
      accepted.push_back(&c);
      made.emplace_back(std::move(a), std::move(b));
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    std::vector<Status> results(accepted.size());
    std::atomic<bool> no_device{false};
    for (int t = 0; t < 16; ++t) {
      pool.emplace_back([&] {
        if (cudaSetDevice(0) != cudaSuccess) {
          no_device = true;
          return;
        }
        for (size_t i = next++; i < accepted.size(); i = next++) {
          const auto& [a, b] = made[i];
          Status s = kernels::prepare_fused(*a, a->spec().default_variant, accepted[i]->pa, *b, b->spec().default_variant,
                                            accepted[i]->pb, CachePolicy::normal);
          static_cast<void>(results[i] = std::move(s));  // the assignment returns a Status&, which nvcc flags as discarded
        }
      });
    }
    for (auto& t : pool) t.join();
    ASSERT_FALSE(no_device.load()) << "a compiling thread could not select the device";
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto stats = kernels::FusionCompiler::shared().stats();
    std::printf("fusion compiler: %zu fused kernels ready in %.1f s wall (%d compiled, %.1f s in NVRTC, %d from the disk cache)\n",
                accepted.size(), seconds, stats.compiled, stats.compile_seconds, stats.from_disk);
    for (size_t i = 0; i < accepted.size(); ++i) {
      EXPECT_TRUE(results[i].is_ok()) << accepted[i]->a << " + " << accepted[i]->b << ": " << results[i].to_string();
    }
  }
  int ran = 0, refused = 0;
  for (const Case& c : cases) {
    auto a = make(c.a);
    auto b = make(c.b);
    const int va = a->spec().default_variant, vb = b->spec().default_variant;
    const Status accepted = rule(*a, *b, c.pa, c.pb);
    if (!accepted) {
      ++refused;
      EXPECT_EQ(accepted.code(), StatusCode::unsupported) << accepted.to_string();
      continue;
    }
    auto occupancy = kernels::fused_occupancy(*a, va, c.pa, *b, vb, c.pb);
    ASSERT_TRUE(occupancy.is_ok()) << c.a << " + " << c.b << ": " << occupancy.status().to_string();
    ASSERT_GE(*occupancy, 1) << c.a << " + " << c.b << " " << c.pa << ":" << c.pb << ": the rule accepted a block that does not fit";
    DeviceControl ca, cb;
    ASSERT_OK(ca.init({0, a->spec().variant(va).logical_blocks}, SmSet::all(sms), *occupancy, 2));
    ASSERT_OK(cb.init({0, b->spec().variant(vb).logical_blocks}, SmSet::all(sms), *occupancy, 5));
    ASSERT_OK(a->poison_output(nullptr));
    ASSERT_OK(b->poison_output(nullptr));
    ASSERT_OK(kernels::launch_fused(*a, va, c.pa, ca.get(), *b, vb, c.pb, cb.get(), CachePolicy::normal, *occupancy * sms, nullptr));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.a << " + " << c.b;
    auto ea = a->check(3), eb = b->check(3);
    ASSERT_TRUE(ea.is_ok() && eb.is_ok());
    EXPECT_LE(*ea, kCases.at(c.a).second) << c.a << " fused with " << c.b << " " << c.pa << ":" << c.pb;
    EXPECT_LE(*eb, kCases.at(c.b).second) << c.b << " fused with " << c.a << " " << c.pa << ":" << c.pb;
    ++ran;
  }
  std::printf("fused pairs: %d ran and matched their references, %d refused by the rule\n", ran, refused);
  EXPECT_GT(ran, 0);
}

// Aker's fused versions (its section 5.4) in the shapes fusion uses: each part on its own named
// barrier, both outputs match their CPU references, every logical block of both ranges is counted
// done once, and the compiled kernel holds at least the fused blocks per SM the rule predicted (its
// register cap keeps them). Parts that finish at different times must not wait for each other
// (conv_im2col and sgemm sync inside their bodies): a barrier over the whole block would hang here.
// Coverage with few NVRTC compiles (each case is one, compiled in parallel before any runs): both
// pair classes (tensor-core + CUDA-core; compute + memory), bodies that sync inside beside bodies
// that do not, ratios with more parts of either kernel (1:2, 3:1, 1:3, 2:1) besides each pair's
// chosen shape (best_fusion_shape: 64- and 128-thread variants), and one fusion of the default
// variants. Every ratio of every bench pair runs in `concord_aker_bench pairs` (docs/running.md).
TEST(DeviceApi, AkerPairsAtFlexibleRatiosMatchBothReferences) {
  const auto t0 = std::chrono::steady_clock::now();
  const int sms = sm_count();
  auto spec = cuda::probe_device_spec(0);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  ASSERT_OK(kernels::FusionCompiler::shared().available());
  struct Case {
    std::string a, b;
    int pa = 0, pb = 0;        // 0: the chosen shape's ratio
    bool defaults = false;     // the default variants, else best_fusion_shape's at that ratio
  };
  const std::vector<Case> cases = {
      {"tc_gemm", "fft_stage"},          {"tc_gemm", "fft_stage", 1, 2}, {"conv_im2col", "mri_q"},
      {"conv_im2col", "mri_q", 3, 1},    {"sgemm", "stencil"},           {"sgemm", "stencil", 1, 3},
      {"fma_loop", "stream_triad"},      {"fma_loop", "stream_triad", 2, 1, true}};
  struct Planned {
    const Case* c = nullptr;
    std::shared_ptr<kernels::DeviceKernel> a, b;
    FusionShape shape{};
  };
  std::map<std::string, std::shared_ptr<kernels::DeviceKernel>> made;
  auto kernel = [&](const std::string& name) {
    auto& k = made[name];
    if (!k) k = make(name);
    return k;
  };
  std::vector<Planned> planned;
  for (const Case& c : cases) {
    if (!selected(c.a) && !selected(c.b)) continue;
    Planned p{&c, kernel(c.a), kernel(c.b)};
    FusionShapeFilter filter;
    if (c.pa > 0) {
      filter.parts_a = c.pa;
      filter.parts_b = c.pb;
    }
    if (c.defaults) {
      filter.variant_a = p.a->spec().default_variant;
      filter.variant_b = p.b->spec().default_variant;
    }
    const auto shape = best_fusion_shape(*spec, p.a->spec(), p.b->spec(), filter);
    ASSERT_TRUE(shape.has_value()) << c.a << " + " << c.b << ": no shape fits";
    p.shape = *shape;
    planned.push_back(std::move(p));
  }
  // NVRTC compiles the cases at once (the fusion compiler compiles different kernels in parallel).
  std::vector<std::future<Status>> compiling;
  for (const Planned& p : planned) {
    compiling.push_back(std::async(std::launch::async, [&p] {
      return kernels::prepare_fused(*p.a, p.shape.variant_a, p.shape.parts_a, *p.b, p.shape.variant_b, p.shape.parts_b,
                                    CachePolicy::normal);
    }));
  }
  std::vector<Status> compiled;
  for (std::future<Status>& f : compiling) compiled.push_back(f.get());
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int ran = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    const Planned& p = planned[i];
    const FusionShape& s = p.shape;
    const std::string& na = p.c->a;
    const std::string& nb = p.c->b;
    SCOPED_TRACE(na + " (" + p.a->spec().variant(s.variant_a).name + ") + " + nb + " (" + p.b->spec().variant(s.variant_b).name +
                 ") " + std::to_string(s.parts_a) + ":" + std::to_string(s.parts_b));
    ASSERT_OK(compiled[i]);
    auto occupancy = kernels::fused_occupancy(*p.a, s.variant_a, s.parts_a, *p.b, s.variant_b, s.parts_b);
    ASSERT_TRUE(occupancy.is_ok()) << occupancy.status().to_string();
    ASSERT_GE(*occupancy, 1) << "fused_block_fits accepted a block that does not fit";
    auto footprint = kernels::fused_footprint(*p.a, s.variant_a, s.parts_a, *p.b, s.variant_b, s.parts_b);
    ASSERT_TRUE(footprint.is_ok()) << footprint.status().to_string();
    EXPECT_GE(*occupancy, s.blocks_per_sm) << "the compiled fused kernel holds fewer blocks per SM than the rule predicted ("
                                           << *footprint << "; the rule: " << s.threads << " threads)";
    const int64_t blocks_a = p.a->spec().variant(s.variant_a).logical_blocks;
    const int64_t blocks_b = p.b->spec().variant(s.variant_b).logical_blocks;
    DeviceControl ca, cb;
    ASSERT_OK(ca.init({0, blocks_a}, SmSet::all(sms), *occupancy, 1));
    ASSERT_OK(cb.init({0, blocks_b}, SmSet::all(sms), *occupancy, 3));
    ASSERT_OK(p.a->poison_output(nullptr));
    ASSERT_OK(p.b->poison_output(nullptr));
    ASSERT_OK(kernels::launch_fused(*p.a, s.variant_a, s.parts_a, ca.get(), *p.b, s.variant_b, s.parts_b, cb.get(),
                                    CachePolicy::normal, *occupancy * sms, nullptr));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto ea = p.a->check(5), eb = p.b->check(5);
    ASSERT_TRUE(ea.is_ok() && eb.is_ok());
    EXPECT_LE(*ea, kCases.at(na).second) << na;
    EXPECT_LE(*eb, kCases.at(nb).second) << nb;
    auto sa = ca.read(), sb = cb.read();
    ASSERT_TRUE(sa.is_ok() && sb.is_ok());
    EXPECT_EQ(sa->done, static_cast<unsigned long long>(blocks_a));
    EXPECT_EQ(sb->done, static_cast<unsigned long long>(blocks_b));
    std::printf("  %s (%s) + %s (%s) %d:%d: %d fused blocks/SM (rule: %d)\n", na.c_str(),
                p.a->spec().variant(s.variant_a).name.c_str(), nb.c_str(), p.b->spec().variant(s.variant_b).name.c_str(),
                s.parts_a, s.parts_b, *occupancy, s.blocks_per_sm);
    ++ran;
  }
  const auto stats = kernels::FusionCompiler::shared().stats();
  std::printf("Aker pairs: %d fused versions ran and matched their references; %d compiled (%.1f s of NVRTC over %.1f s of "
              "wall time), %d from the disk cache\n",
              ran, stats.compiled, stats.compile_seconds, compile_s, stats.from_disk);
  EXPECT_GT(ran, 0);
}

// The fused kernel with another cache policy: a pair at each policy still matches the references.
TEST(DeviceApi, FusedPairAtEveryCachePolicy) {
  const int sms = sm_count();
  for (CachePolicy cache : kAllCachePolicies) {
    auto a = make("hotspot");
    auto b = make("stream_triad");
    auto occupancy = kernels::fused_occupancy(*a, 0, 1, *b, 0, 1, cache);
    ASSERT_TRUE(occupancy.is_ok()) << occupancy.status().to_string();
    ASSERT_GE(*occupancy, 1);
    DeviceControl ca, cb;
    ASSERT_OK(ca.init({0, a->spec().variant(0).logical_blocks}, SmSet::all(sms), *occupancy, 2));
    ASSERT_OK(cb.init({0, b->spec().variant(0).logical_blocks}, SmSet::all(sms), *occupancy, 5));
    ASSERT_OK(a->poison_output(nullptr));
    ASSERT_OK(b->poison_output(nullptr));
    ASSERT_OK(kernels::launch_fused(*a, 0, 1, ca.get(), *b, 0, 1, cb.get(), cache, *occupancy * sms, nullptr));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto ea = a->check(3), eb = b->check(3);
    ASSERT_TRUE(ea.is_ok() && eb.is_ok());
    EXPECT_LE(*ea, kCases.at("hotspot").second) << to_string(cache);
    EXPECT_LE(*eb, kCases.at("stream_triad").second) << to_string(cache);
  }
}

// Occupies every thread slot of every SM until *release (mapped host memory) turns nonzero: from
// the backend's view, a kernel that never ends.
__global__ void hog_kernel(int* release) {
  ::cuda::atomic_ref<int, ::cuda::thread_scope_system> flag(*release);
  while (flag.load(::cuda::memory_order_relaxed) == 0) __nanosleep(10000);
}

TEST(CudaBackendWatchdog, AbortAllReturnsWithinItsGraceAndNamesWhatStillRuns) {
  auto created = cuda::CudaBackend::create(0, 5);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  auto& b = **created;
  auto triad = make_suite_kernel("stream_triad", 1 << 22);
  auto add = make_suite_kernel("vector_add", 1 << 22);
  ASSERT_TRUE(triad && add);
  Workload w;
  for (const auto* k : {&*triad, &*add}) {
    TenantSpec t;
    t.name = k->name;
    t.steps.push_back(KernelStep{*k, 1});
    w.tenants.push_back(t);
  }
  ASSERT_OK(testing::prepare_all(b, w));
  int* release = nullptr;
  ASSERT_EQ(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped), cudaSuccess);
  *release = 0;
  int* release_dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&release_dev, release, 0), cudaSuccess);
  cuda::Stream hog_stream;
  ASSERT_OK(hog_stream.create());
  int threads_per_sm = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, 0), cudaSuccess);
  hog_kernel<<<sm_count() * (threads_per_sm / 1024), 1024, 0, hog_stream.get()>>>(release_dev);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every hog block resident

  auto req = [&](int tenant, int64_t id, LaunchForm form) {
    const KernelSpec& k = w.tenants[static_cast<size_t>(tenant)].steps[0].kernel;
    DispatchRequest r;
    r.id = DispatchId{id};
    r.parts.push_back(DispatchPart{LaunchId{id}, TenantId{tenant}, &k, k.default_variant,
                                   BlockRange{0, k.variant(k.default_variant).logical_blocks}, 1});
    r.placement.sms = b.device().all_sms();
    r.placement.form = form;
    return r;
  };
  ASSERT_OK(b.dispatch(req(0, 1, LaunchForm::persistent)));
  ASSERT_OK(b.dispatch(req(1, 2, LaunchForm::native)));
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = b.abort_all(0.5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 1.5) << "abort_all must not wait past its grace";
  EXPECT_EQ(s.code(), StatusCode::device_error) << s.to_string();
  EXPECT_NE(s.message().find("tenant 1 kernel 'vector_add' dispatch 2"), std::string::npos) << s.message();

  // Released, the native dispatch runs to its end and the persistent one ends preempted.
  __atomic_store_n(release, 1, __ATOMIC_RELEASE);
  std::vector<Completion> all;
  while (b.running() > 0) {
    auto c = b.advance(1e9);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    all.insert(all.end(), c->begin(), c->end());
  }
  ASSERT_EQ(all.size(), 2u);
  for (const Completion& c : all) {
    EXPECT_TRUE(c.error.is_ok()) << c.error.to_string();
    if (c.dispatch == DispatchId{1}) {
      EXPECT_TRUE(c.preempted);
    } else {
      EXPECT_FALSE(c.preempted);
      EXPECT_EQ(c.blocks_done[0], req(1, 2, LaunchForm::native).parts[0].range.size());
    }
  }
  ASSERT_EQ(cudaStreamSynchronize(hog_stream.get()), cudaSuccess);
  cudaFreeHost(release);
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
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(run.body(10000), first.get(), device::BlockAudit{});
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
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(run.body(100), second.get(), device::BlockAudit{});
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
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, work.get()>>>(body, ctl.get(), device::BlockAudit{});
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
  device::elastic_kernel<CountBody, device::CacheOp::normal><<<4 * sms, 64, 0, grow.get()>>>(body, ctl.get(), device::BlockAudit{});
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

// A logical block's body that records, besides its run count and SM, how many blocks of the
// launch were running a body on its SM when it started (itself included): the concurrency a TLP
// limit bounds.
struct ConcurrencyBody {
  unsigned* count;
  unsigned* sm_of;
  int* phase_of;
  int* concurrency_of;
  int* active;  // per SM: blocks inside a body now
  const int32_t* phase;
  long long spin_cycles;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    if (ctx.thread == 0) {
      const unsigned sm = device::sm_id();
      concurrency_of[ctx.block] = atomicAdd(&active[sm], 1) + 1;
      atomicAdd(&count[ctx.block], 1u);
      sm_of[ctx.block] = sm;
      phase_of[ctx.block] = device::load_relaxed(phase);
      const long long until = clock64() + spin_cycles;
      while (clock64() < until) {
      }
      atomicSub(&active[sm], 1);
    }
    ctx.sync();
  }
};

// The TLP of a running launch lowered and raised several times in place (no relaunch to lower; a
// second grid on the same control block to raise, as CudaBackend::set_tlp does): every logical
// block runs exactly once, and once a change has had time to take effect (longer than a few
// logical blocks) no SM runs more bodies of the launch at once than the new limit. While a change
// takes effect, the blocks over the limit finish at most the chunk (here one logical block) they hold.
TEST(DeviceApi, TlpChangedInPlaceHoldsTheNewLimitAndRunsEveryBlockOnce) {
  const int sms = sm_count();
  CountRun run;
  ASSERT_OK(run.init(3000000));
  cuda::DeviceBuffer<int> concurrency_of, active;
  ASSERT_OK(concurrency_of.allocate(static_cast<size_t>(run.blocks)));
  ASSERT_OK(active.allocate(static_cast<size_t>(device::kMaxControlSms)));
  ASSERT_EQ(cudaMemset(active.get(), 0, active.bytes()), cudaSuccess);
  const ConcurrencyBody body{run.count.get(), run.sm_of.get(), run.phase_of.get(), concurrency_of.get(),
                             active.get(), run.phase.get(), 20000};
  int occupancy = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &occupancy, device::elastic_kernel<ConcurrencyBody, device::CacheOp::normal>, 64, 0),
            cudaSuccess);
  // TLP per step: the first is the launch's; even phases are settled, odd ones in transition.
  const std::vector<int32_t> tlps = {4, 1, 3, 2, 6, 1};
  ASSERT_GE(occupancy, 6);
  cuda::Stream work, control;
  std::deque<cuda::Stream> grows;  // one per raise (deque: the streams do not move)
  ASSERT_OK(work.create());
  ASSERT_OK(control.create());
  struct Pinned {
    int32_t tlp;
    int32_t phase;
  };
  Pinned* pinned = nullptr;  // one slot per write, allocated before the launch
  const size_t writes = 2 * tlps.size();
  ASSERT_EQ(cudaMallocHost(&pinned, writes * sizeof(Pinned)), cudaSuccess);
  DeviceControl ctl;
  ASSERT_OK(ctl.init({0, run.blocks}, SmSet::all(sms), tlps[0], /*chunk=*/1));
  const int grid = occupancy * sms;
  device::elastic_kernel<ConcurrencyBody, device::CacheOp::normal><<<grid, 64, 0, work.get()>>>(body, ctl.get(), device::BlockAudit{});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(4));
  for (size_t i = 1; i < tlps.size(); ++i) {
    Pinned& change = pinned[2 * i];
    change.tlp = tlps[i];
    change.phase = static_cast<int32_t>(2 * i - 1);
    ASSERT_OK(ctl.write(offsetof(device::ElasticControl, tlp), &change.tlp, sizeof(int32_t), control.get()));
    ASSERT_EQ(cudaMemcpyAsync(run.phase.get(), &change.phase, sizeof(int32_t), cudaMemcpyHostToDevice, control.get()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(control.get()), cudaSuccess);
    if (tlps[i] > tlps[i - 1]) {
      // The first grid's blocks that found their SM full have exited: new slots need new blocks.
      // Each raise on a stream of its own: an earlier raise's grid still runs (its admitted blocks
      // loop until the work ends), and a grid behind it on one stream would not start.
      grows.emplace_back();
      ASSERT_OK(grows.back().create());
      device::elastic_kernel<ConcurrencyBody, device::CacheOp::normal><<<grid, 64, 0, grows.back().get()>>>(body, ctl.get(), device::BlockAudit{});
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // about 200 logical blocks per slot
    Pinned& settled = pinned[2 * i + 1];
    settled.phase = static_cast<int32_t>(2 * i);
    ASSERT_EQ(cudaMemcpyAsync(run.phase.get(), &settled.phase, sizeof(int32_t), cudaMemcpyHostToDevice, control.get()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(control.get()), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const auto count = run.fetch(run.count);
  const auto sm_of = run.fetch(run.sm_of);
  const auto phase_of = run.fetch(run.phase_of);
  const auto concurrency = run.fetch(concurrency_of);
  const int phases = static_cast<int>(2 * tlps.size() - 1);
  std::vector<int64_t> in_phase(static_cast<size_t>(phases), 0);
  std::vector<int> most(static_cast<size_t>(phases), 0);
  std::map<std::pair<int, int>, int> over_in_transition;  // (phase, SM) -> blocks over the new limit
  for (int64_t b = 0; b < run.blocks; ++b) {
    const size_t i = static_cast<size_t>(b);
    ASSERT_EQ(count[i], 1u) << "logical block " << b;
    const int phase = phase_of[i];
    ASSERT_TRUE(phase >= 0 && phase < phases) << "logical block " << b << " phase " << phase;
    const int32_t limit = tlps[static_cast<size_t>((phase + 1) / 2)];
    ++in_phase[static_cast<size_t>(phase)];
    most[static_cast<size_t>(phase)] = std::max(most[static_cast<size_t>(phase)], concurrency[i]);
    if (phase % 2 == 0) {
      ASSERT_LE(concurrency[i], limit) << "logical block " << b << " on SM " << sm_of[i] << " in settled phase " << phase;
    } else if (concurrency[i] > limit) {
      ++over_in_transition[{phase, static_cast<int>(sm_of[i])}];
    }
  }
  for (int phase = 0; phase < phases; phase += 2) {
    EXPECT_GT(in_phase[static_cast<size_t>(phase)], 0) << "no work in settled phase " << phase << ": lengthen the run";
    // A raised limit is reached: the new grid's blocks were admitted.
    EXPECT_EQ(most[static_cast<size_t>(phase)], tlps[static_cast<size_t>(phase / 2)]) << "settled phase " << phase;
  }
  // Over the limit while a lowering takes effect: the blocks that must leave finish the logical
  // block they hold; the staying ones start at most one or two more while those run.
  for (const auto& [where, n] : over_in_transition) {
    const int32_t before = tlps[static_cast<size_t>((where.first - 1) / 2)];
    EXPECT_LE(n, 2 * before) << "transition phase " << where.first << ", SM " << where.second;
  }
  auto state = ctl.read();
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(static_cast<int64_t>(state->done), run.blocks);
  cudaFreeHost(pinned);
}

}  // namespace
}  // namespace concord
