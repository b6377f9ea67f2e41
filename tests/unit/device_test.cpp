#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "concord/device.h"
#include "concord/occupancy.h"
#include "concord/placement_rule.h"

#if CONCORD_HAVE_CUDA_OCCUPANCY_H
#include <cuda_occupancy.h>
#endif
#include "concord/sm_set.h"

namespace concord {
namespace {

TEST(SmSet, SetAlgebraAndText) {
  SmSet a = SmSet::range(0, 4);
  SmSet b = SmSet::of({2, 3, 7});
  EXPECT_EQ(a.count(), 4);
  EXPECT_EQ((a | b).count(), 5);
  EXPECT_EQ((a & b).ids(), (std::vector<int>{2, 3}));
  EXPECT_EQ(a.minus(b).ids(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(SmSet::of({1, 2}).is_subset_of(a));
  EXPECT_FALSE(b.is_subset_of(a));
  EXPECT_EQ((a | b).to_string(), "0-3,7");
  EXPECT_EQ(b.span(), 8);
  EXPECT_EQ(SmSet::of({0, 64, 255}).words(), (std::vector<uint64_t>{1, 1, 0, uint64_t{1} << 63}));
}

TEST(SmSet, RangesAreClippedToTheSetsBounds) {
  // Each range equals the set built one SM at a time.
  auto slow = [](int first, int count) {
    SmSet s;
    for (int i = first; i < first + count; ++i) {
      if (i >= 0 && i < kMaxSms) s.add(i);
    }
    return s;
  };
  for (int first : {-5, 0, 1, 63, 64, 130, 200, 255, 256}) {
    for (int count : {-1, 0, 1, 2, 63, 64, 65, 132, 256, 300}) {
      EXPECT_EQ(SmSet::range(first, count), slow(first, count)) << first << "+" << count;
    }
  }
  EXPECT_EQ(SmSet::all(132).count(), 132);
  EXPECT_EQ(SmSet::all(132).span(), 132);
  EXPECT_EQ(SmSet::range(250, 10).ids(), (std::vector<int>{250, 251, 252, 253, 254, 255}));
  EXPECT_TRUE(SmSet::range(256, 4).empty());
}

TEST(Device, BuiltinTopologyIsConsistent) {
  for (const DeviceSpec& d : {h100_sxm_spec(), h200_spec()}) {
    ASSERT_TRUE(d.validate().is_ok());
    EXPECT_EQ(d.sm_count, 132);
    EXPECT_EQ(d.tpc_count(), 66);
    EXPECT_EQ(d.gpc_count(), 8);
    EXPECT_EQ(d.sms_of_tpc(5).ids(), (std::vector<int>{10, 11}));
    int total = 0;
    for (int g = 0; g < d.gpc_count(); ++g) total += d.sms_of_gpc(g).count();
    EXPECT_EQ(total, 132);
  }
  EXPECT_GT(h200_spec().dram_bytes_per_s, h100_sxm_spec().dram_bytes_per_s);
}

TEST(Device, RoundUpToTpcsAndGpcSpan) {
  const DeviceSpec d = h200_spec();
  EXPECT_EQ(d.round_up_to_tpcs(SmSet::of({1, 4})).ids(), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_TRUE(d.spans_all_gpcs(d.all_sms()));
  EXPECT_FALSE(d.spans_all_gpcs(d.sms_of_gpc(0)));
  // One SM of every GPC is enough; missing one GPC is not.
  SmSet one_each;
  for (int g = 0; g < d.gpc_count(); ++g) one_each.add(d.sms_of_gpc(g).ids().front());
  EXPECT_TRUE(d.spans_all_gpcs(one_each));
  EXPECT_FALSE(d.spans_all_gpcs(d.all_sms().minus(d.sms_of_gpc(3))));
}

TEST(Device, TopologyIdsOutOfRangeAreRefused) {
  DeviceSpec d = h200_spec();
  d.gpc_of_sm[7] = -1;
  auto s = d.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("SM 7"), std::string::npos) << s.message();
  d = h200_spec();
  d.tpc_of_sm[0] = kMaxSms;
  EXPECT_FALSE(d.validate().is_ok());
}

TEST(Device, BuiltinLookup) {
  EXPECT_TRUE(builtin_device("H200").is_ok());
  EXPECT_TRUE(builtin_device("h100").is_ok());
  EXPECT_EQ(builtin_device("a100").status().code(), StatusCode::not_found);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Device, FileOverridesBase) {
  const std::string path = write_temp("dev_ok.json", R"({"base": "h200", "name": "H200 test", "dram_bytes_per_s": 4.0e12,
    "sm": {"max_blocks": 16}})");
  auto d = load_device_file(path);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->name, "H200 test");
  EXPECT_DOUBLE_EQ(d->dram_bytes_per_s, 4.0e12);
  EXPECT_EQ(d->sm.max_blocks, 16);
  EXPECT_EQ(d->sm_count, 132);
}

TEST(Device, FileWithSmallerSmCountGetsNominalTopology) {
  auto d = load_device_file(write_temp("dev_small.json", R"({"base": "h100", "sm_count": 16})"));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->tpc_count(), 8);
}

TEST(Device, BadFilesNameTheField) {
  auto unknown = load_device_file(write_temp("dev_bad1.json", R"({"base": "h200", "sm_cuont": 12})"));
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("sm_cuont"), std::string::npos);
  auto negative = load_device_file(write_temp("dev_bad2.json", R"({"base": "h200", "fp32_flops": -1})"));
  ASSERT_FALSE(negative.is_ok());
  EXPECT_NE(negative.status().message().find("fp32_flops"), std::string::npos);
  auto broken = load_device_file(write_temp("dev_bad3.json", R"({"base": )"));
  ASSERT_FALSE(broken.is_ok());
  EXPECT_EQ(broken.status().code(), StatusCode::parse_error);
  EXPECT_EQ(load_device_file("/nonexistent/dev.json").status().code(), StatusCode::not_found);
  for (const char* bad : {R"({"base": "h200", "sm": {"register_sub_partitions": 16}})",
                          R"({"base": "h200", "sm": {"register_sub_partitions": 3}})"}) {
    auto sub = load_device_file(write_temp("dev_bad4.json", bad));
    ASSERT_FALSE(sub.is_ok()) << bad;
    EXPECT_NE(sub.status().message().find("register_sub_partitions"), std::string::npos) << sub.status().message();
  }
}

TEST(Occupancy, LimitedByEachResource) {
  const DeviceSpec d = h200_spec();
  KernelVariant v;
  v.threads_per_block = 256;
  v.registers_per_thread = 32;
  EXPECT_EQ(max_resident_blocks(d, v), 8);  // threads: 2048 / 256
  v.registers_per_thread = 128;
  EXPECT_EQ(max_resident_blocks(d, v), 2);  // registers: 65536 / (128 * 256)
  v.registers_per_thread = 32;
  v.shared_bytes_per_block = 100 * 1024;
  EXPECT_EQ(max_resident_blocks(d, v), 2);  // shared memory: 228 KiB / 100 KiB
  v.threads_per_block = 32;
  v.shared_bytes_per_block = 0;
  EXPECT_EQ(max_resident_blocks(d, v), 32);  // block slots
  v.shared_bytes_per_block = 300 * 1024;
  EXPECT_EQ(max_resident_blocks(d, v), 0);   // does not fit at all
}

// Registers are allocated per warp in units of 256: 33 a thread takes 1056 a warp, rounded to 1280.
TEST(Occupancy, RegistersAreAllocatedPerWarpInWholeUnits) {
  const DeviceSpec d = h200_spec();
  KernelVariant v;
  v.threads_per_block = 256;  // 8 warps
  v.registers_per_thread = 33;
  EXPECT_EQ(footprint_of(d, v).registers, 1280 * 8);
  EXPECT_EQ(max_resident_blocks(d, v), 6);  // 65536 / 10240; unrounded (8448 a block) it would be 7
  v.registers_per_thread = 40;               // 1280 a warp exactly
  EXPECT_EQ(footprint_of(d, v).registers, 1280 * 8);
}

// The register file is four sub-partitions of 16384 registers and a warp's registers come from
// one of them: at 108 registers a thread (3584 a warp) a sub-partition holds 4 warps, an SM 16,
// so two blocks of 6 warps, not the three that 65536 / 21504 would give (H200: the compiled fused
// tc_gemm + fft_stage kernel held 2 blocks per SM where the rule had said 3).
TEST(Occupancy, RegistersCountPerSubPartition) {
  const DeviceSpec d = h200_spec();
  KernelVariant v;
  v.threads_per_block = 192;
  v.registers_per_thread = 108;
  EXPECT_EQ(max_resident_blocks(d, v), 2);
  // The simulator's per-SM bookkeeping agrees, block by block, and gives the registers back.
  const BlockFootprint f = footprint_of(d, v);
  SmResources sm = SmResources::empty_sm(d);
  ASSERT_TRUE(sm.fits(f));
  sm.take(f);
  ASSERT_TRUE(sm.fits(f));
  sm.take(f);
  EXPECT_FALSE(sm.fits(f));
  EXPECT_GE(sm.registers, f.registers) << "enough registers in all, but no sub-partition has room for a warp";
  sm.give(f, 2);
  for (int k = 0; k < sm.sub_partitions; ++k) EXPECT_EQ(sm.sub_registers[static_cast<size_t>(k)], 16384);
  // One-warp blocks fill every sub-partition: 16 of them at 108 registers.
  v.threads_per_block = 32;
  EXPECT_EQ(max_resident_blocks(d, v), 16);
  // The launch check counts a block's warps rounded up to whole sub-partitions: 17 warps of 3584
  // registers (60928 in all) would need 20 * 3584 = 71680.
  v.threads_per_block = 17 * 32;
  EXPECT_EQ(max_resident_blocks(d, v), 0);
  EXPECT_LT(fused_register_cap(d, 17 * 32), 108);
  EXPECT_EQ(fused_register_cap(d, 16 * 32), 128);  // 65536 / 16 warps / 32 threads
}

#if CONCORD_HAVE_CUDA_OCCUPANCY_H
// Against CUDA's own occupancy calculator (cuda_occupancy.h, header-only) for Hopper, over every
// block size and register count, with no shared memory: the limits by threads, block slots and
// registers must agree.
TEST(Occupancy, AgreesWithCudasOccupancyCalculator) {
  const DeviceSpec d = h200_spec();
  cudaOccDeviceProp prop{};
  prop.computeMajor = 9;
  prop.computeMinor = 0;
  prop.maxThreadsPerBlock = d.sm.max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = d.sm.max_threads;
  prop.regsPerBlock = 65536;
  prop.regsPerMultiprocessor = d.sm.max_registers;
  prop.warpSize = 32;
  prop.sharedMemPerBlock = 48 * 1024;
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(d.sm.max_shared_bytes);
  prop.numSms = d.sm_count;
  prop.sharedMemPerBlockOptin = static_cast<size_t>(d.sm.max_shared_bytes_per_block);
  prop.reservedSharedMemPerBlock = 0;
  cudaOccDeviceState state{};
  int compared = 0;
  for (int threads = 32; threads <= 1024; threads += 32) {
    for (int regs = 16; regs <= 255; ++regs) {
      cudaOccFuncAttributes attr{};
      attr.maxThreadsPerBlock = 1024;
      attr.numRegs = regs;
      cudaOccResult result{};
      ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, threads, 0), CUDA_OCC_SUCCESS);
      KernelVariant v;
      v.threads_per_block = threads;
      v.registers_per_thread = regs;
      ASSERT_EQ(max_resident_blocks(d, v), result.activeBlocksPerMultiprocessor) << threads << " threads, " << regs << " registers";
      ++compared;
    }
  }
  EXPECT_EQ(compared, 32 * 240);
}
#endif

}  // namespace
}  // namespace concord

namespace concord {
namespace {

DeviceAttributes h100_attributes() {
  DeviceAttributes a;
  a.name = "NVIDIA H100 80GB HBM3";
  a.cc_major = 9;
  a.cc_minor = 0;
  a.sm_count = 132;
  a.l2_bytes = 50 * 1024 * 1024;
  a.max_threads_per_sm = 2048;
  a.max_registers_per_sm = 65536;
  a.max_shared_bytes_per_sm = 233472;
  a.max_blocks_per_sm = 32;
  a.max_threads_per_block = 1024;
  a.max_shared_bytes_per_block_optin = 232448;
  a.clock_khz = 1980000;
  a.memory_clock_khz = 2619000;
  a.memory_bus_bits = 5120;
  return a;
}

TEST(SpecFromAttributes, DerivesHopperPeaksFromClocksAndWidths) {
  auto spec = spec_from_attributes(h100_attributes());
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(spec->sm_count, 132);
  EXPECT_DOUBLE_EQ(spec->l2_bytes, 50.0 * 1024 * 1024);
  // 2 x 2619 MHz x 640 bytes = 3.35 TB/s; 132 SMs x 128 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s.
  EXPECT_NEAR(spec->dram_bytes_per_s, 3.352e12, 0.001e12);
  EXPECT_NEAR(spec->fp32_flops, 66.9e12, 0.1e12);
  EXPECT_NEAR(spec->tensor_flops, 132 * 4096 * 1.98e9, 1e9);
  EXPECT_EQ(spec->sm.max_shared_bytes_per_block, 232448);
  EXPECT_TRUE(spec->validate().is_ok());
  EXPECT_EQ(spec->tpc_count(), 66);
}

TEST(SpecFromAttributes, AnotherGpuGetsItsOwnFiguresNotHopper) {
  DeviceAttributes a = h100_attributes();
  a.name = "NVIDIA A100-SXM4-80GB";
  a.cc_major = 8;
  a.cc_minor = 0;
  a.sm_count = 108;
  a.clock_khz = 1410000;
  a.memory_clock_khz = 1593000;
  auto spec = spec_from_attributes(a);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_NEAR(spec->fp32_flops, 108 * 64 * 2 * 1.41e9, 1e9);   // 19.5 TFLOP/s
  EXPECT_NEAR(spec->tensor_flops, 108 * 2048 * 1.41e9, 1e9);   // 312 TFLOP/s
  EXPECT_NEAR(spec->dram_bytes_per_s, 2 * 1.593e9 * 640, 1e6); // 2.04 TB/s
}

TEST(SpecFromAttributes, MissingAttributeOrUnknownArchitectureIsNamed) {
  DeviceAttributes a = h100_attributes();
  a.memory_bus_bits = 0;
  auto spec = spec_from_attributes(a);
  ASSERT_FALSE(spec.is_ok());
  EXPECT_NE(spec.status().message().find("memory_bus_bits"), std::string::npos) << spec.status().message();
  a = h100_attributes();
  a.cc_major = 42;
  spec = spec_from_attributes(a);
  ASSERT_FALSE(spec.is_ok());
  EXPECT_EQ(spec.status().code(), StatusCode::unsupported);
  EXPECT_NE(spec.status().message().find("42.0"), std::string::npos) << spec.status().message();
}

}  // namespace
}  // namespace concord
