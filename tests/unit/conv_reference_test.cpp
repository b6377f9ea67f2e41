// conv_im2col's CPU reference (src/kernels/conv_reference.h) against a direct 3x3 convolution
// written here loop by loop, and its suite spec (sizes, variants, roofline numbers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "concord/occupancy.h"
#include "concord/suite.h"
#include "concord/device.h"
#include "kernels/conv_reference.h"

namespace concord::kernels {
namespace {

double value(uint64_t seed, int64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(i) + 1;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 32;
  return static_cast<double>(x % 2001) / 1000.0 - 1.0;
}

TEST(ConvReference, MatchesADirectConvolutionWithZeroPadding) {
  const ConvIm2colShape s{kConvChannels, kConvFilters, 7};  // odd side: borders on every edge
  const Values input = [](int64_t i) { return value(1, i); };
  const Values weight = [](int64_t i) { return value(2, i); };
  double largest = 0;
  for (int f = 0; f < s.filters; ++f) {
    for (int y = 0; y < s.side; ++y) {
      for (int x = 0; x < s.side; ++x) {
        double direct = 0;
        for (int c = 0; c < s.channels; ++c) {
          for (int dy = -1; dy <= 1; ++dy) {
            for (int dx = -1; dx <= 1; ++dx) {
              const int yy = y + dy, xx = x + dx;
              if (yy < 0 || yy >= s.side || xx < 0 || xx >= s.side) continue;
              const double w = weight(static_cast<int64_t>(f) * s.channels * 9 + c * 9 + (dy + 1) * 3 + (dx + 1));
              direct += w * input((static_cast<int64_t>(c) * s.side + yy) * s.side + xx);
            }
          }
        }
        const int64_t index = static_cast<int64_t>(f) * s.pixels() + y * s.side + x;
        const double ref = conv_im2col_reference(s, input, weight, index);
        ASSERT_NEAR(ref, direct, 1e-9) << "filter " << f << " pixel (" << y << ", " << x << ")";
        largest = std::max(largest, std::fabs(direct));
      }
    }
  }
  EXPECT_GT(largest, 1.0);  // the check compared real sums, not zeros
}

TEST(ConvReference, IdentityFilterCopiesItsChannelAndShiftedTapsShift) {
  const ConvIm2colShape s{kConvChannels, kConvFilters, 5};
  const Values input = [](int64_t i) { return value(3, i); };
  // Filter f takes channel f % channels at the centre tap: the output is that channel.
  const Values centre = [&](int64_t i) {
    const int64_t f = i / s.reduction(), k = i % s.reduction();
    return k == (f % s.channels) * 9 + 4 ? 1.0 : 0.0;
  };
  // Filter f takes channel 0 at the tap left of the centre: out(y, x) = in(y, x - 1), 0 at x = 0.
  const Values left = [&](int64_t i) { return i % s.reduction() == 3 ? 1.0 : 0.0; };
  for (int f = 0; f < s.filters; ++f) {
    for (int64_t p = 0; p < s.pixels(); ++p) {
      const int64_t index = f * s.pixels() + p;
      EXPECT_DOUBLE_EQ(conv_im2col_reference(s, input, centre, index), input((f % s.channels) * s.pixels() + p));
      const double expected = p % s.side == 0 ? 0.0 : input(p - 1);
      EXPECT_DOUBLE_EQ(conv_im2col_reference(s, input, left, index), expected) << "pixel " << p;
    }
  }
  EXPECT_EQ(im2col_entry(s, input, 0, 0), 0.0);  // the window's top-left tap of pixel (0, 0) is padding
  EXPECT_EQ(im2col_entry(s, input, 8, 0), input(s.side + 1));
}

TEST(ConvSuiteSpec, SizesVariantsAndRoofline) {
  auto k = make_suite_kernel("conv_im2col", 256);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_TRUE(k->elastic);
  EXPECT_EQ(k->unit, ComputeUnit::tensor);
  ASSERT_EQ(k->variants.size(), 3u);
  for (const KernelVariant& v : k->variants) {
    // threads/2 pixels x 64 filters per logical block; FP16 staging of 64 im2col rows + 32 bytes.
    EXPECT_EQ(v.items_per_block, v.threads_per_block / 2 * 64) << v.name;
    EXPECT_EQ(v.logical_blocks, 256 * 256 / (v.threads_per_block / 2)) << v.name;
    EXPECT_GE(v.shared_bytes_per_block, v.threads_per_block / 2 * 64 * 2 + 32) << v.name;
    EXPECT_DOUBLE_EQ(v.flops_per_block, 2.0 * 576 * v.items_per_block) << v.name;
    EXPECT_GT(v.bytes_per_block, 4.0 * v.items_per_block) << v.name;
    EXPECT_GE(max_resident_blocks(h100_sxm_spec(), v), 1) << v.name;
  }
  EXPECT_FALSE(make_suite_kernel("conv_im2col", 24).is_ok());   // below the minimum
  EXPECT_FALSE(make_suite_kernel("conv_im2col", 40).is_ok());   // not a multiple of 16
  EXPECT_FALSE(make_suite_kernel("conv_im2col", 256, BlockSizes{64, 96, 512}).is_ok());  // 512 threads: too many registers
}

}  // namespace
}  // namespace concord::kernels
