// Backend::can_implement on the simulator: the placement rule both backends share
// (check_dispatch_resources), fusion pairs included; and the simulator's watchdog (abort_all).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "cuda/allocation_scope.h"
#include "backend/sim/sim_backend.h"
#include "concord/backend.h"
#include "concord/device.h"
#include "concord/suite.h"
#include "concord/placement_rule.h"

namespace concord {
namespace {

std::vector<KernelSpec> elastic_suite() {
  std::vector<KernelSpec> out;
  for (const SuiteEntry& e : suite_catalog()) {
    if (!e.elastic) continue;
    auto k = make_suite_kernel(e.name, e.default_size);
    EXPECT_TRUE(k.is_ok()) << e.name << ": " << k.status().to_string();
    if (k) out.push_back(*k);
  }
  return out;
}

DispatchPart part_of(const KernelSpec& k, int tenant, int parts = 1) {
  DispatchPart p;
  p.launch = LaunchId{tenant};
  p.tenant = TenantId{tenant};
  p.kernel = &k;
  p.variant = k.default_variant;
  p.range = {0, k.variant(k.default_variant).logical_blocks};
  p.parts_per_block = parts;
  return p;
}

DispatchRequest fused(const DeviceSpec& d, const KernelSpec& a, int pa, const KernelSpec& b, int pb) {
  DispatchRequest r;
  r.id = DispatchId{7};
  r.parts = {part_of(a, 1, pa), part_of(b, 2, pb)};
  r.placement.sms = d.all_sms();
  r.placement.form = LaunchForm::persistent;
  return r;
}

bool mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// The rule written out independently of src/core/placement_rule.cpp, for a pair of elastic kernels.
bool fits_by_hand(const DeviceSpec& d, const KernelVariant& a, int pa, const KernelVariant& b, int pb) {
  if (a.threads_per_block % 32 != 0 || b.threads_per_block % 32 != 0) return false;
  if (pa + pb > 15) return false;
  const int threads = pa * a.threads_per_block + pb * b.threads_per_block;
  if (threads > d.sm.max_threads_per_block) return false;
  const int shared = pa * a.shared_bytes_per_block + pb * b.shared_bytes_per_block + kFusedWrapperSharedBytes;
  if (shared > d.sm.max_shared_bytes_per_block || shared > d.sm.max_shared_bytes) return false;
  const int regs = std::max(a.registers_per_thread, b.registers_per_thread);
  const int per_warp = (regs * 32 + 255) / 256 * 256;
  return per_warp * (threads / 32) <= d.sm.max_registers;
}

// Each kernel at its default variant, and at its largest block size (its last variant).
std::vector<KernelSpec> with_largest_blocks(std::vector<KernelSpec> suite) {
  for (KernelSpec& k : suite) k.default_variant = k.variant_count() - 1;
  return suite;
}

TEST(CanImplement, EveryPairOfSuiteBodiesAtOneToOneGetsTheRulesAnswer) {
  const DeviceSpec d = h100_sxm_spec();
  sim::SimBackend sim(d);
  auto suite = elastic_suite();
  ASSERT_GE(suite.size(), 19u);
  const auto largest = with_largest_blocks(suite);
  suite.insert(suite.end(), largest.begin(), largest.end());
  int accepted = 0, refused = 0;
  for (const KernelSpec& a : suite) {
    for (const KernelSpec& b : suite) {
      const Status s = sim.can_implement(fused(d, a, 1, b, 1));
      const bool expect = fits_by_hand(d, a.variant(a.default_variant), 1, b.variant(b.default_variant), 1);
      EXPECT_EQ(s.is_ok(), expect) << a.name << " + " << b.name << ": " << s.to_string();
      if (s.is_ok()) {
        ++accepted;
      } else {
        ++refused;
        EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
        // A fused block's refusal names both kernels; one kernel's own block, that kernel.
        EXPECT_TRUE(mentions(s, "'" + a.name + "'") || mentions(s, "'" + b.name + "'")) << s.message();
        EXPECT_TRUE(mentions(s, "tenant 1") || mentions(s, "tenant 2")) << s.message();
      }
    }
  }
  // Default variants (256 threads or fewer) fuse; two 1024-thread blocks do not.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

TEST(CanImplement, RatiosFollowTheRuleUpToItsLimits) {
  const DeviceSpec d = h100_sxm_spec();
  sim::SimBackend sim(d);
  auto a = make_suite_kernel("fma_loop", 1 << 20);
  auto b = make_suite_kernel("stream_triad", 1 << 20);
  ASSERT_TRUE(a && b);
  for (int pa = 1; pa <= 16; ++pa) {
    for (int pb = 1; pb <= 16; ++pb) {
      const Status s = sim.can_implement(fused(d, *a, pa, *b, pb));
      EXPECT_EQ(s.is_ok(), fits_by_hand(d, a->variant(a->default_variant), pa, b->variant(b->default_variant), pb))
          << pa << ":" << pb << " " << s.to_string();
    }
  }
  const Status zero = sim.can_implement(fused(d, *a, 0, *b, 1));
  EXPECT_EQ(zero.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(mentions(zero, "parts_per_block")) << zero.message();
}

TEST(CanImplement, RefusesWhatNoBackendCanRunAndNamesTheField) {
  const DeviceSpec d = h100_sxm_spec();
  sim::SimBackend sim(d);
  auto fma = make_suite_kernel("fma_loop", 1 << 20);
  auto gemm = make_suite_kernel("cublas_gemm", 1024);
  auto tiny = make_suite_kernel_with_variant("vector_add", 1 << 20, "min@8");
  ASSERT_TRUE(fma && gemm && tiny) << tiny.status().to_string();

  // An opaque kernel fuses with nothing and has no persistent form.
  Status s = sim.can_implement(fused(d, *fma, 1, *gemm, 1));
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(mentions(s, "cublas_gemm") && mentions(s, "fusion")) << s.message();
  DispatchRequest one;
  one.id = DispatchId{3};
  one.parts = {part_of(*gemm, 4)};
  one.placement.sms = d.all_sms();
  EXPECT_TRUE(sim.can_implement(one).is_ok()) << sim.can_implement(one).to_string();
  one.placement.form = LaunchForm::persistent;
  s = sim.can_implement(one);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(mentions(s, "'form'") && mentions(s, "tenant 4")) << s.message();

  // A part of 8 threads is not a whole number of warps: its named barrier cannot count it.
  const int tiny_variant = *tiny->find_variant("min@8");
  DispatchRequest t = fused(d, *fma, 1, *tiny, 1);
  t.parts[1].variant = tiny_variant;
  t.parts[1].range = {0, tiny->variant(tiny_variant).logical_blocks};
  s = sim.can_implement(t);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(mentions(s, "whole number of warps") && mentions(s, "min@8")) << s.message();

  // Fields out of range.
  DispatchRequest r = fused(d, *fma, 1, *fma, 1);
  r.placement.sms = SmSet::of({0, 140});
  s = sim.can_implement(r);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(mentions(s, "'sms'")) << s.message();
  r = fused(d, *fma, 1, *fma, 1);
  r.parts[1].range.end += 1;
  s = sim.can_implement(r);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(mentions(s, "'range'") && mentions(s, "tenant 2")) << s.message();
  r = fused(d, *fma, 1, *fma, 1);
  r.placement.form = LaunchForm::native;
  EXPECT_TRUE(mentions(sim.can_implement(r), "persistent form only"));
  // Keeping data in L2 and evicting it first contradict each other; persisting alone is fine.
  r = fused(d, *fma, 1, *fma, 1);
  r.placement.l2_persist = true;
  EXPECT_TRUE(sim.can_implement(r).is_ok()) << sim.can_implement(r).to_string();
  one.placement.form = LaunchForm::native;
  one.placement.l2_persist = true;
  EXPECT_TRUE(sim.can_implement(one).is_ok()) << sim.can_implement(one).to_string();
  for (CachePolicy c : {CachePolicy::l2_evict_first, CachePolicy::both}) {
    r.placement.cache = c;
    s = sim.can_implement(r);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_TRUE(mentions(s, "'l2_persist'") && mentions(s, to_string(c))) << s.message();
  }
  r.placement.cache = CachePolicy::l1_bypass;
  EXPECT_TRUE(sim.can_implement(r).is_ok()) << sim.can_implement(r).to_string();

  // One block that no SM holds: named with its kernel and variant.
  KernelSpec fat = *fma;
  fat.name = "fat";
  fat.variants[fat.default_variant].registers_per_thread = 255;
  fat.variants[fat.default_variant].threads_per_block = 1024;
  DispatchRequest f;
  f.id = DispatchId{9};
  f.parts = {part_of(fat, 5)};
  f.placement.sms = d.all_sms();
  s = sim.can_implement(f);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(mentions(s, "'fat'") && mentions(s, "does not fit an SM")) << s.message();

  // Registers of the larger body over every thread of the fused block.
  KernelSpec heavy = *fma;
  heavy.name = "heavy";
  heavy.variants[heavy.default_variant].registers_per_thread = 96;
  s = sim.can_implement(fused(d, heavy, 2, *fma, 1));  // 768 threads x 96 registers > 64K
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(mentions(s, "registers per thread")) << s.message();
  EXPECT_TRUE(sim.can_implement(fused(d, heavy, 1, *fma, 1)).is_ok());  // 512 x 96 fits
}

TEST(CanImplement, FusedRegisterCapFitsOneBlock) {
  const DeviceSpec d = h100_sxm_spec();
  for (int threads = 32; threads <= 1024; threads += 32) {
    const int cap = fused_register_cap(d, threads);
    EXPECT_GE(cap, 64) << threads;
    EXPECT_LE(cap, 255) << threads;
    EXPECT_TRUE(cap == 255 || cap % 8 == 0) << threads << ": " << cap;
    EXPECT_LE((cap * 32 + 255) / 256 * 256 * (threads / 32), d.sm.max_registers) << threads;
  }
}

// fused_block_fits is the rule's answer for a pair at a:b, and fusion_ratios_that_fit lists exactly
// the ratios it accepts, with the fused blocks resident per SM that occupancy gives.
TEST(FusedBlockFits, AgreesWithTheRuleAndListsTheRatiosThatFit) {
  const DeviceSpec d = h100_sxm_spec();
  sim::SimBackend sim(d);
  auto tc = make_suite_kernel("tc_gemm", 2048);
  auto sg = make_suite_kernel("sgemm", 2048);
  auto mem = make_suite_kernel("stream_triad", 1 << 24);
  ASSERT_TRUE(tc && sg && mem);
  for (const auto& [a, b] : std::vector<std::pair<const KernelSpec*, const KernelSpec*>>{{&*tc, &*mem}, {&*sg, &*mem}, {&*tc, &*sg}}) {
    const KernelVariant& va = a->variant(a->default_variant);
    const KernelVariant& vb = b->variant(b->default_variant);
    const auto ratios = fusion_ratios_that_fit(d, va, vb);
    for (int pa = 1; pa < kMaxFusedParts; ++pa) {
      for (int pb = 1; pa + pb <= kMaxFusedParts; ++pb) {
        const Status fits = fused_block_fits(d, va, pa, vb, pb);
        EXPECT_EQ(fits.is_ok(), sim.can_implement(fused(d, *a, pa, *b, pb)).is_ok()) << a->name << "+" << b->name << " " << pa << ":" << pb;
        const auto listed = std::find_if(ratios.begin(), ratios.end(), [&](const FusionRatio& r) { return r.parts_a == pa && r.parts_b == pb; });
        EXPECT_EQ(fits.is_ok(), listed != ratios.end()) << pa << ":" << pb;
        if (listed != ratios.end()) {
          EXPECT_GE(listed->blocks_per_sm, 1);
          EXPECT_EQ(listed->blocks_per_sm, max_resident_blocks(d, fused_block_variant(va, pa, vb, pb)));
        }
      }
    }
    EXPECT_FALSE(ratios.empty()) << a->name << "+" << b->name;
  }
  // tc_gemm's 96 registers a thread: 1:1 with stream_triad fits, but not so many parts that the
  // block's threads pass 1024 or its registers an SM's.
  const KernelVariant& vt = tc->variant(tc->default_variant);
  const KernelVariant& vm = mem->variant(mem->default_variant);
  EXPECT_TRUE(fused_block_fits(d, vt, 1, vm, 1).is_ok());
  const Status over = fused_block_fits(d, vt, 4, vm, 1);  // 4 x 256 + 256 threads
  EXPECT_EQ(over.code(), StatusCode::unsupported);
  EXPECT_NE(over.message().find("threads"), std::string::npos) << over.message();
  EXPECT_EQ(fused_block_fits(d, vt, 0, vm, 1).code(), StatusCode::invalid_argument);
  const Status barriers = fused_block_fits(d, vm, 8, vm, 8);
  EXPECT_NE(barriers.message().find("named barriers"), std::string::npos) << barriers.message();
  // A tighter max_parts lists only ratios within it.
  for (const FusionRatio& r : fusion_ratios_that_fit(d, vm, vm, 3)) EXPECT_LE(r.parts_a + r.parts_b, 3);
}

// best_fusion_shape over every variant pair and ratio of the bench's pairs: the shape it returns
// fits, leaves at least two fused blocks per SM where any shape does, and no shape with two or more
// blocks per SM has more resident warps. The default variants of tc_gemm + sgemm fit one fused
// block per SM (the first GPU run's finding); the chosen shape several.
TEST(BestFusionShape, LeavesSeveralBlocksPerSmWithTheMostResidentWarps) {
  const DeviceSpec d = h100_sxm_spec();
  const std::vector<std::pair<std::string, int64_t>> kernels = {
      {"tc_gemm", 2048}, {"sgemm", 2048}, {"fft_stage", 1 << 24}, {"conv_im2col", 1024}, {"mri_q", 1 << 20},
      {"lbm", 1 << 22},  {"stencil", 512}, {"stream_triad", 1 << 24}, {"fma_loop", 1 << 22}, {"hotspot3d", 2048}};
  std::vector<KernelSpec> specs;
  for (const auto& [name, size] : kernels) {
    auto k = make_suite_kernel(name, size);
    ASSERT_TRUE(k) << name;
    specs.push_back(*k);
  }
  for (const KernelSpec& a : specs) {
    for (const KernelSpec& b : specs) {
      if (&a == &b) continue;
      SCOPED_TRACE(a.name + "+" + b.name);
      const auto shapes = fusion_shapes_that_fit(d, a, b);
      const auto best = best_fusion_shape(d, a, b);
      ASSERT_EQ(best.has_value(), !shapes.empty());
      if (!best) continue;
      EXPECT_TRUE(fused_block_fits(d, a.variant(best->variant_a), best->parts_a, b.variant(best->variant_b), best->parts_b));
      EXPECT_EQ(best->blocks_per_sm, max_resident_blocks(d, fused_block_variant(a.variant(best->variant_a), best->parts_a,
                                                                                   b.variant(best->variant_b), best->parts_b)));
      const bool several = std::any_of(shapes.begin(), shapes.end(), [](const FusionShape& s) { return s.blocks_per_sm >= 2; });
      if (several) {
        EXPECT_GE(best->blocks_per_sm, kMinFusedBlocksPerSm);
      }
      for (const FusionShape& s : shapes) {
        if (!several || s.blocks_per_sm >= kMinFusedBlocksPerSm) {
          EXPECT_LE(s.resident_warps(), best->resident_warps());
        }
      }
    }
  }
  const KernelSpec& tc = specs[0];
  const KernelSpec& sg = specs[1];
  const KernelVariant& dt = tc.variant(tc.default_variant);
  const KernelVariant& ds = sg.variant(sg.default_variant);
  EXPECT_EQ(max_resident_blocks(d, fused_block_variant(dt, 1, ds, 1)), 1);
  const auto chosen = best_fusion_shape(d, tc, sg);
  ASSERT_TRUE(chosen);
  EXPECT_GE(chosen->blocks_per_sm, 2);
  EXPECT_GT(chosen->resident_warps(), max_resident_blocks(d, fused_block_variant(dt, 1, ds, 1)) * (256 + 256) / 32);

  // The filter: a fixed variant (a launch already runs it) and a fixed ratio are kept.
  FusionShapeFilter fixed;
  fixed.variant_b = sg.default_variant;
  fixed.parts_a = 2;
  fixed.parts_b = 1;
  const auto within = best_fusion_shape(d, tc, sg, fixed);
  ASSERT_TRUE(within);
  EXPECT_EQ(within->variant_b, sg.default_variant);
  EXPECT_EQ(within->parts_a, 2);
  EXPECT_EQ(within->parts_b, 1);
  for (const FusionShape& s : fusion_shapes_that_fit(d, tc, sg, fixed)) {
    EXPECT_EQ(s.variant_b, sg.default_variant);
    EXPECT_EQ(s.parts_a, 2);
  }
  // Nothing fits: no shape.
  FusionShapeFilter too_many;
  too_many.variant_a = tc.variant_count() - 1;
  too_many.variant_b = sg.variant_count() - 1;  // 256 + 1024 threads
  EXPECT_FALSE(best_fusion_shape(d, tc, sg, too_many));
}

// The register cap a fused block is compiled with keeps the blocks per SM the declared registers
// allow, is never below the larger declared count, and never above the one-block cap.
TEST(FusedBlockRegisterCap, KeepsThePredictedBlocksPerSm) {
  const DeviceSpec d = h100_sxm_spec();
  for (const std::string name : {"tc_gemm", "sgemm", "lbm", "stream_triad"}) {
    auto a = make_suite_kernel(name, name == "lbm" ? (1 << 22) : 2048);
    auto b = make_suite_kernel("fft_stage", 1 << 24);
    ASSERT_TRUE(a && b);
    for (int va = 0; va < a->variant_count(); ++va) {
      for (int vb = 0; vb < b->variant_count(); ++vb) {
        for (const FusionRatio& r : fusion_ratios_that_fit(d, a->variant(va), b->variant(vb))) {
          SCOPED_TRACE(name + " " + std::to_string(va) + "+" + std::to_string(vb) + " " + std::to_string(r.parts_a) + ":" +
                       std::to_string(r.parts_b));
          KernelVariant fused = fused_block_variant(a->variant(va), r.parts_a, b->variant(vb), r.parts_b);
          const int cap = fused_block_register_cap(d, a->variant(va), r.parts_a, b->variant(vb), r.parts_b);
          EXPECT_GE(cap, fused.registers_per_thread);
          EXPECT_LE(cap, fused_register_cap(d, fused.threads_per_block));
          fused.registers_per_thread = cap;  // compiled at the cap: still as many blocks per SM
          EXPECT_EQ(max_resident_blocks(d, fused), r.blocks_per_sm);
        }
      }
    }
  }
}

TEST(SimAbortAll, PreemptsPersistentAndNamesNativeLaunchesThatOutlastTheGrace) {
  const DeviceSpec d = h100_sxm_spec();
  sim::SimBackend sim(d);
  auto triad = make_suite_kernel("stream_triad", 1 << 28);
  ASSERT_TRUE(triad);
  DispatchRequest elastic;
  elastic.id = DispatchId{1};
  elastic.parts = {part_of(*triad, 1)};
  elastic.placement.sms = SmSet::range(0, 66);
  elastic.placement.form = LaunchForm::persistent;
  ASSERT_TRUE(sim.dispatch(elastic).is_ok());
  DispatchRequest native;
  native.id = DispatchId{2};
  native.parts = {part_of(*triad, 2)};
  native.placement.sms = SmSet::range(66, 66);
  ASSERT_TRUE(sim.dispatch(native).is_ok());
  auto first = sim.advance(1e-4);
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE(first->empty());

  // The native stream_triad over 2^28 elements needs milliseconds: a microsecond of grace is short.
  const Status s = sim.abort_all(1e-6);
  EXPECT_EQ(s.code(), StatusCode::device_error);
  EXPECT_TRUE(mentions(s, "tenant 2") && mentions(s, "stream_triad") && mentions(s, "dispatch 2")) << s.message();
  EXPECT_FALSE(mentions(s, "dispatch 1")) << s.message();
  EXPECT_TRUE(sim.abort_all(10.0).is_ok());

  // The persistent one ends preempted, short of its range.
  bool saw_preempted = false;
  while (sim.running() > 0) {
    auto done = sim.advance(std::numeric_limits<double>::infinity());
    ASSERT_TRUE(done.is_ok());
    for (const Completion& c : *done) {
      EXPECT_TRUE(c.error.is_ok());
      if (c.dispatch == DispatchId{1}) {
        saw_preempted = c.preempted;
        EXPECT_LT(c.blocks_done.at(0), triad->variant(0).logical_blocks);
      }
    }
  }
  EXPECT_TRUE(saw_preempted);
}

class NamedAllocator final : public DeviceAllocator {
 public:
  explicit NamedAllocator(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Result<void*> allocate(size_t) override { return Status::unsupported("not on the CPU"); }
  void release(void*, size_t) override {}

 private:
  std::string name_;
};

TEST(AllocationScope, InnermostScopeWinsAndEachThreadHasItsOwn) {
  EXPECT_EQ(AllocationScope::current(), nullptr);
  auto colour_a = std::make_shared<NamedAllocator>("colour a");
  auto colour_b = std::make_shared<NamedAllocator>("colour b");
  {
    AllocationScope outer(colour_a);
    EXPECT_EQ(AllocationScope::current(), colour_a);
    {
      AllocationScope inner(colour_b);
      EXPECT_EQ(AllocationScope::current(), colour_b);
      std::shared_ptr<DeviceAllocator> seen = colour_a;
      std::thread([&] { seen = AllocationScope::current(); }).join();
      EXPECT_EQ(seen, nullptr);  // another thread's buffers are not this tenant's
      {
        AllocationScope back_to_default(nullptr);
        EXPECT_EQ(AllocationScope::current(), nullptr);
      }
      EXPECT_EQ(AllocationScope::current(), colour_b);
    }
    EXPECT_EQ(AllocationScope::current(), colour_a);
  }
  EXPECT_EQ(AllocationScope::current(), nullptr);
  EXPECT_EQ(colour_a.use_count(), 1);  // scopes hold no reference once closed
}

}  // namespace
}  // namespace concord
