// Elastic bodies of the workload suite. Each processes one logical block through a PartContext:
// items [block * items_per_block, (block + 1) * items_per_block) of its problem, with any number of
// threads (the block-size variant), syncing only through ctx.sync().
#pragma once

#include <cstdint>
#include <mma.h>
#include <cuda_fp16.h>

#include "concord/device/context.cuh"

namespace concord::kernels {

// What a kernel named by CONCORD_TEST_STUB_KERNEL runs in place of its body (device_kernel.h):
// nothing, so its output keeps whatever was there.
struct StubBody {
  static constexpr const char* kName = "StubBody";  // its name in the fusion compiler's source
  template <class Ctx>
  __device__ void operator()(const Ctx&) const {}
};

// fma_loop: out[i] = 1024 dependent FMAs seeded by i (compute-bound, 2048 FLOP per element).
struct FmaLoopBody {
  static constexpr const char* kName = "FmaLoopBody";  // its name in the fusion compiler's source
  float* out;
  int64_t n;
  int items_per_block;
  static constexpr int kIterations = 1024;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t base = ctx.block * items_per_block;
    for (int i = ctx.thread; i < items_per_block; i += ctx.threads) {
      const int64_t idx = base + i;
      if (idx >= n) return;
      const float x = static_cast<float>(idx % 1024) * 1e-3f;
      float y = 1.0f;
#pragma unroll 16
      for (int k = 0; k < kIterations; ++k) y = fmaf(y, 0.999f, x);
      ctx.store(out + idx, y);
    }
  }
};

// stream_triad: a = b + s * c on float4s (memory-bound, 12 bytes per element).
struct StreamTriadBody {
  static constexpr const char* kName = "StreamTriadBody";  // its name in the fusion compiler's source
  float4* a;
  const float4* b;
  const float4* c;
  int64_t n4;  // float4 count
  int vec_per_block;
  float s;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t base = ctx.block * vec_per_block;
    for (int i = ctx.thread; i < vec_per_block; i += ctx.threads) {
      const int64_t idx = base + i;
      if (idx >= n4) return;
      const float4 x = ctx.load(b + idx);
      const float4 y = ctx.load(c + idx);
      ctx.store(a + idx, make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w));
    }
  }
};

// vector_add: c = a + b on float4s.
struct VectorAddBody {
  static constexpr const char* kName = "VectorAddBody";  // its name in the fusion compiler's source
  const float4* a;
  const float4* b;
  float4* c;
  int64_t n4;
  int vec_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t base = ctx.block * vec_per_block;
    for (int i = ctx.thread; i < vec_per_block; i += ctx.threads) {
      const int64_t idx = base + i;
      if (idx >= n4) return;
      const float4 x = ctx.load(a + idx);
      const float4 y = ctx.load(b + idx);
      ctx.store(c + idx, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
    }
  }
};

// hotspot: one step of the Rodinia thermal stencil on an n x n grid (row-major chunks).
struct HotspotBody {
  static constexpr const char* kName = "HotspotBody";  // its name in the fusion compiler's source
  const float* temp;
  const float* power;
  float* out;
  int n;
  int items_per_block;
  float cap, rx, ry, rz, amb;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t base = ctx.block * items_per_block;
    const int64_t total = static_cast<int64_t>(n) * n;
    for (int i = ctx.thread; i < items_per_block; i += ctx.threads) {
      const int64_t idx = base + i;
      if (idx >= total) return;
      const int r = static_cast<int>(idx / n), c = static_cast<int>(idx % n);
      const float t = ctx.load(temp + idx);
      const float north = r > 0 ? ctx.load(temp + idx - n) : t;
      const float south = r < n - 1 ? ctx.load(temp + idx + n) : t;
      const float west = c > 0 ? ctx.load(temp + idx - 1) : t;
      const float east = c < n - 1 ? ctx.load(temp + idx + 1) : t;
      const float delta = cap * (ctx.load(power + idx) + (south + north - 2.0f * t) * ry + (east + west - 2.0f * t) * rx +
                                 (amb - t) * rz);
      ctx.store(out + idx, t + delta);
    }
  }
};

// matmul: FP32 C = A * B (n x n), one tile x tile output tile per logical block (tile^2 = threads),
// staged through shared memory.
struct MatmulBody {
  static constexpr const char* kName = "MatmulBody";  // its name in the fusion compiler's source
  const float* a;
  const float* b;
  float* c;
  int n;
  int tile;  // sqrt(threads); tiles per row = ceil(n / tile)
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    float* sa = ctx.template shared_as<float>();
    float* sb = sa + tile * tile;
    const int tiles_per_row = (n + tile - 1) / tile;
    const int row0 = static_cast<int>(ctx.block / tiles_per_row) * tile;
    const int col0 = static_cast<int>(ctx.block % tiles_per_row) * tile;
    const int ty = ctx.thread / tile, tx = ctx.thread % tile;
    const int row = row0 + ty, col = col0 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += tile) {
      sa[ty * tile + tx] = (row < n && k0 + tx < n) ? ctx.load(a + static_cast<int64_t>(row) * n + k0 + tx) : 0.0f;
      sb[ty * tile + tx] = (k0 + ty < n && col < n) ? ctx.load(b + static_cast<int64_t>(k0 + ty) * n + col) : 0.0f;
      ctx.sync();
      for (int k = 0; k < tile; ++k) acc = fmaf(sa[ty * tile + k], sb[k * tile + tx], acc);
      ctx.sync();
    }
    if (row < n && col < n) ctx.store(c + static_cast<int64_t>(row) * n + col, acc);
  }
};

// kmeans: nearest of k centroids for each point (features stored feature-major, as Rodinia does).
struct KmeansBody {
  static constexpr const char* kName = "KmeansBody";  // its name in the fusion compiler's source
  static constexpr int kFeatures = 34;
  static constexpr int kClusters = 5;
  const float* features;   // [kFeatures][points]
  const float* centroids;  // [kClusters][kFeatures]
  float* membership;       // nearest cluster index, as float
  int64_t points;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t base = ctx.block * items_per_block;
    for (int i = ctx.thread; i < items_per_block; i += ctx.threads) {
      const int64_t p = base + i;
      if (p >= points) return;
      int best = 0;
      float best_d = 3.4e38f;
      for (int c = 0; c < kClusters; ++c) {
        float d = 0.0f;
        for (int f = 0; f < kFeatures; ++f) {
          const float diff = ctx.load(features + f * points + p) - ctx.load(centroids + c * kFeatures + f);
          d = fmaf(diff, diff, d);
        }
        if (d < best_d) {
          best_d = d;
          best = c;
        }
      }
      ctx.store(membership + p, static_cast<float>(best));
    }
  }
};

// tc_gemm: FP16 C = A * B with FP32 accumulation on tensor cores (WMMA 16x16x16). Each warp of
// a part computes one 32 x 32 output tile; a logical block is threads/32 consecutive tiles.
struct TcGemmBody {
  static constexpr const char* kName = "TcGemmBody";  // its name in the fusion compiler's source
  const __half* a;  // row-major n x n
  const __half* b;  // column-major n x n
  float* c;         // row-major n x n
  int n;            // multiple of 32
  int tiles_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    using namespace nvcuda;
    const int warp = ctx.thread / 32;
    const int warps = ctx.threads / 32;
    const int tiles_per_row = n / 32;
    const int64_t total_tiles = static_cast<int64_t>(tiles_per_row) * tiles_per_row;
    for (int w = warp; w < tiles_per_block; w += warps) {
      const int64_t t = ctx.block * tiles_per_block + w;
      if (t >= total_tiles) return;
      const int row0 = static_cast<int>(t / tiles_per_row) * 32;
      const int col0 = static_cast<int>(t % tiles_per_row) * 32;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
      for (auto& r : acc) {
        for (auto& f : r) wmma::fill_fragment(f, 0.0f);
      }
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[2];
      for (int k = 0; k < n; k += 16) {
        for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], a + static_cast<int64_t>(row0 + 16 * i) * n + k, n);
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], b + static_cast<int64_t>(col0 + 16 * j) * n + k, n);
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
      }
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          wmma::store_matrix_sync(c + static_cast<int64_t>(row0 + 16 * i) * n + col0 + 16 * j, acc[i][j], n,
                                  wmma::mem_row_major);
        }
      }
    }
  }
};


// conv_im2col: a 3x3 convolution (stride 1, zero padding 1; channels -> filters) as im2col + GEMM
// on tensor cores (WMMA 16x16x16, FP16 operands, FP32 accumulation): out[f][p] = sum over k of
// weight[f][k] * im2col[k][p] (kernels/conv_reference.h). A logical block covers threads/2
// consecutive pixels; warp w of a part owns pixels [16w, 16w + 16) of it and all `filters` (16
// per accumulator). The part stages im2col rows kChunk at a time in its shared memory (pixel-major,
// the B operand's column-major layout), gathering FP32 activations and rounding them to FP16.
struct ConvIm2colBody {
  static constexpr const char* kName = "ConvIm2colBody";  // its name in the fusion compiler's source
  static constexpr int kFilters = 64;   // 4 accumulators of 16 filters per warp
  static constexpr int kChunk = 64;     // im2col rows staged at once
  const float* input;    // [channels][side][side]
  const __half* weight;  // [kFilters][channels * 9] row-major
  float* out;            // [kFilters][side * side] row-major
  int channels;
  int side;              // side * side is a multiple of 16
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    using namespace nvcuda;
    // WMMA needs 256-bit aligned shared pointers; the part's slice carries 32 bytes of slack.
    __half* staged = reinterpret_cast<__half*>((reinterpret_cast<uintptr_t>(ctx.shared) + 31) & ~uintptr_t{31});
    const int block_pixels = ctx.threads / 2;
    const int64_t pixels = static_cast<int64_t>(side) * side;
    const int64_t first = ctx.block * block_pixels;
    const int reduction = channels * 9;
    const int warp = ctx.thread / 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFilters / 16];
    for (auto& f : acc) wmma::fill_fragment(f, 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    for (int k0 = 0; k0 < reduction; k0 += kChunk) {
      // Neighbouring threads take neighbouring pixels of one im2col row: their loads coalesce.
      for (int i = ctx.thread; i < kChunk * block_pixels; i += ctx.threads) {
        const int kk = i / block_pixels, n = i % block_pixels;
        const int k = k0 + kk;
        const int64_t p = first + n;
        float v = 0.0f;
        if (k < reduction && p < pixels) {
          const int c = k / 9, tap = k % 9;
          const int y = static_cast<int>(p / side) + tap / 3 - 1, x = static_cast<int>(p % side) + tap % 3 - 1;
          if (y >= 0 && y < side && x >= 0 && x < side) v = ctx.load(input + (static_cast<int64_t>(c) * side + y) * side + x);
        }
        staged[n * kChunk + kk] = __float2half(v);
      }
      ctx.sync();
      if (first + 16 * warp < pixels) {
        for (int ks = 0; ks < kChunk && k0 + ks < reduction; ks += 16) {
          wmma::load_matrix_sync(fb, staged + 16 * warp * kChunk + ks, kChunk);
          for (int f = 0; f < kFilters / 16; ++f) {
            wmma::load_matrix_sync(fa, weight + static_cast<int64_t>(16 * f) * reduction + k0 + ks, reduction);
            wmma::mma_sync(acc[f], fa, fb, acc[f]);
          }
        }
      }
      ctx.sync();  // the next chunk overwrites the staged rows
    }
    if (first + 16 * warp >= pixels) return;
    for (int f = 0; f < kFilters / 16; ++f) {
      wmma::store_matrix_sync(out + static_cast<int64_t>(16 * f) * pixels + first + 16 * warp, acc[f], static_cast<unsigned>(pixels),
                              wmma::mem_row_major);
    }
  }
};

}  // namespace concord::kernels
