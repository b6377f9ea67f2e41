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

}  // namespace
}  // namespace concord::cuda
