#include "backend/cuda/chunk.h"

#include <gtest/gtest.h>

#include "concord/suite.h"

namespace concord::cuda {
namespace {

TEST(ChunkRule, SixteenFetchesPerSlotWithManyBlocksPerSm) {
  // 8 blocks/SM on 132 SMs = 1056 slots; 1056 * 16 * 10 blocks -> chunks of 10.
  EXPECT_EQ(chunk_for(1056 * 16 * 10, 1056, 8), 10);
}

TEST(ChunkRule, FinerChunksWithFourOrFewerBlocksPerSm) {
  // kmeans on the H200: 262144 logical blocks over 4 x 132 slots -> 7 (31 under the 16-fetch rule).
  EXPECT_EQ(chunk_for(262144, 4 * 132, 4), 7);
  EXPECT_EQ(chunk_for(262144, 4 * 132, 8), 31);
  EXPECT_EQ(fetches_per_slot(1), 64);
  EXPECT_EQ(fetches_per_slot(5), 16);
}

TEST(ChunkRule, ClampedToOneAndSixtyFour) {
  EXPECT_EQ(chunk_for(10, 1056, 8), 1);
  EXPECT_EQ(chunk_for(int64_t{1} << 40, 1056, 8), 64);
  EXPECT_EQ(chunk_for(100, 0, 8), 6);  // no slots: treated as one
}

TEST(ChunkRule, ShortBlocksTakeAtLeastEightAFetch) {
  // vector_add of 16 M on the H200: 16384 blocks of about 2.7 us on 1056 slots; the count rule
  // alone gives 1.
  EXPECT_EQ(chunk_for(16384, 1056, 8), 1);
  EXPECT_EQ(chunk_for(16384, 1056, 8, 2.7e-6), 8);
  // Never so coarse that a resident block gets no chunk: 2048 blocks on 1056 slots -> 2.
  EXPECT_EQ(chunk_for(2048, 1056, 8, 2.7e-6), 2);
  EXPECT_EQ(chunk_for(1024, 1056, 8, 2.7e-6), 1);
  // A rule chunk above the floor stands.
  EXPECT_EQ(chunk_for(1056 * 16 * 10, 1056, 8, 2.7e-6), 10);
  // Heavy blocks keep the count rule: long ones, and 4 or fewer per SM.
  EXPECT_EQ(chunk_for(61440, 1056, 8, 99e-6), 3);
  EXPECT_EQ(chunk_for(16384, 528, 4, 2.7e-6), 1);
}

TEST(ChunkRule, SlotBlockTimeIsTheRooflineShareOfOneSlot) {
  const DeviceSpec d = h200_spec();
  auto va = make_suite_kernel("vector_add", 16 << 20);
  auto mri = make_suite_kernel("mri_q", 1 << 20);
  ASSERT_TRUE(va.is_ok() && mri.is_ok());
  const double slots = 8.0 * d.sm_count;
  // vector_add is DRAM-bound: its bytes at a slot's share of the bandwidth.
  const KernelVariant& v = va->variant(va->default_variant);
  EXPECT_NEAR(slot_block_seconds(*va, va->default_variant, d, 8), v.bytes_per_block / (d.dram_bytes_per_s / slots), 1e-12);
  EXPECT_LT(slot_block_seconds(*va, va->default_variant, d, 8), kShortBlockSeconds);
  // mri_q's blocks are long (2048 k-samples a voxel, compute-bound): no floor for it.
  EXPECT_GT(slot_block_seconds(*mri, mri->default_variant, d, 8), kShortBlockSeconds);
}

}  // namespace
}  // namespace concord::cuda
