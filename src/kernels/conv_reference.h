// The CPU reference of the suite's conv_im2col kernel (a 3x3 convolution, stride 1, zero padding
// 1, as im2col + GEMM): what the device check compares against, and what tests/unit checks
// against a direct convolution. Inputs come as functions of their flat index so that the device
// check can pass the seeded, rounded values the GPU used.
#pragma once

#include <cstdint>
#include <functional>

namespace concord::kernels {

struct ConvIm2colShape {
  int channels = 64;  // input channels
  int filters = 64;   // output channels
  int side = 0;       // the image is side x side (batch 1)
  int64_t pixels() const { return static_cast<int64_t>(side) * side; }
  // The GEMM's reduction: channels x 3 x 3 taps (row k of the im2col matrix is channel k / 9,
  // tap k % 9, row-major over the 3 x 3 window).
  int reduction() const { return channels * 9; }
};
inline constexpr int kConvChannels = 64;
inline constexpr int kConvFilters = 64;

using Values = std::function<double(int64_t)>;

// Entry (k, pixel) of the im2col matrix: input[c][y + dy][x + dx] with c = k / 9, dy = (k % 9) / 3 - 1,
// dx = k % 3 - 1, and 0 outside the image. `input` is indexed [c][y][x] row-major.
double im2col_entry(const ConvIm2colShape& shape, const Values& input, int64_t k, int64_t pixel);
// Output element `index` of out[filter][pixel] (row-major): the sum over k of weight[filter][k]
// (row-major, `reduction()` per filter) times im2col_entry(k, pixel).
double conv_im2col_reference(const ConvIm2colShape& shape, const Values& input, const Values& weight, int64_t index);

}  // namespace concord::kernels
