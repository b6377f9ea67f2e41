#include "kernels/conv_reference.h"

namespace concord::kernels {

double im2col_entry(const ConvIm2colShape& shape, const Values& input, int64_t k, int64_t pixel) {
  const int64_t c = k / 9, tap = k % 9;
  const int64_t y = pixel / shape.side + tap / 3 - 1, x = pixel % shape.side + tap % 3 - 1;
  if (y < 0 || y >= shape.side || x < 0 || x >= shape.side) return 0.0;
  return input((c * shape.side + y) * shape.side + x);
}

double conv_im2col_reference(const ConvIm2colShape& shape, const Values& input, const Values& weight, int64_t index) {
  const int64_t filter = index / shape.pixels(), pixel = index % shape.pixels();
  double acc = 0;
  for (int64_t k = 0; k < shape.reduction(); ++k) {
    acc += weight(filter * shape.reduction() + k) * im2col_entry(shape, input, k, pixel);
  }
  return acc;
}

}  // namespace concord::kernels
