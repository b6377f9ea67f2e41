#include "backend/cuda/chunk.h"

#include <gtest/gtest.h>

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

TEST(ChunkRule, HeavyBlocksFetchAboutFourMicrosecondsOfWork) {
  // kmeans on the H200: ~35.8 KB a block over 528 slots of 4.8 TB/s -> ~3.9 us a block -> 1.
  const double t = block_seconds(0, 35.8e3, 528, 67e12, 4.8e12);
  EXPECT_NEAR(t, 3.94e-6, 0.05e-6);
  EXPECT_EQ(chunk_for(262144, 528, 4, t), 1);
  // Half-microsecond blocks: 8 a fetch, under the count cap.
  EXPECT_EQ(chunk_for(1 << 24, 1056, 8, 0.5e-6), 8);
  // Tiny blocks: the count cap decides (16 fetches per slot, at most 64).
  EXPECT_EQ(chunk_for(1056 * 16 * 10, 1056, 8, 1e-9), 10);
  // Unknown time: the count rule.
  EXPECT_EQ(chunk_for(262144, 528, 4, 0), 7);
  // Compute-bound blocks use the FLOP roofline.
  EXPECT_NEAR(block_seconds(2e6, 0, 1000, 50e12, 4e12), 40e-6, 1e-12);
}

}  // namespace
}  // namespace concord::cuda
