// The rest of the suite's elastic bodies: RAISE Table IV's remaining tasks and Aker's kernels.
// Same contract as bodies.cuh: one logical block through a PartContext, any thread count.
#pragma once

#include <cstdint>

#include "concord/device/context.cuh"

namespace concord::kernels {

// srad: diffusion coefficient of speckle-reducing anisotropic diffusion (Rodinia kernel 1).
struct SradBody {
  static constexpr const char* kName = "SradBody";  // its name in the fusion compiler's source
  const float* image;
  float* coeff;
  int n;
  int items_per_block;
  float q0sqr;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t total = static_cast<int64_t>(n) * n;
    for (int i = ctx.thread; i < items_per_block; i += ctx.threads) {
      const int64_t idx = ctx.block * items_per_block + i;
      if (idx >= total) return;
      const int r = static_cast<int>(idx / n), c = static_cast<int>(idx % n);
      const float j = ctx.load(image + idx);
      const float dn = (r > 0 ? ctx.load(image + idx - n) : j) - j;
      const float ds = (r < n - 1 ? ctx.load(image + idx + n) : j) - j;
      const float dw = (c > 0 ? ctx.load(image + idx - 1) : j) - j;
      const float de = (c < n - 1 ? ctx.load(image + idx + 1) : j) - j;
      const float g2 = (dn * dn + ds * ds + dw * dw + de * de) / (j * j);
      const float l = (dn + ds + dw + de) / j;
      const float num = 0.5f * g2 - (1.0f / 16.0f) * (l * l);
      const float den = 1.0f + 0.25f * l;
      const float qsqr = num / (den * den);
      float cval = 1.0f / (1.0f + (qsqr - q0sqr) / (q0sqr * (1.0f + q0sqr)));
      cval = cval < 0.0f ? 0.0f : (cval > 1.0f ? 1.0f : cval);
      ctx.store(coeff + idx, cval);
    }
  }
};

// cfd_flux: Euler flux of each cell against four neighbours (Rodinia cfd, simplified).
struct CfdFluxBody {
  static constexpr const char* kName = "CfdFluxBody";  // its name in the fusion compiler's source
  static constexpr int kNeighbours = 4;
  const float* vars;      // 5 arrays of n: density, momentum x/y/z, energy
  const int* neighbours;  // kNeighbours arrays of n
  float* flux;            // 5 arrays of n
  int64_t n;
  int items_per_block;
  __device__ static float pressure(float d, float mx, float my, float mz, float e) {
    return 0.4f * (e - 0.5f * (mx * mx + my * my + mz * mz) / d);
  }
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t i = ctx.block * items_per_block + t;
      if (i >= n) return;
      const float d = ctx.load(vars + i), mx = ctx.load(vars + n + i), my = ctx.load(vars + 2 * n + i),
                  mz = ctx.load(vars + 3 * n + i), e = ctx.load(vars + 4 * n + i);
      const float p = pressure(d, mx, my, mz, e);
      float f[5] = {0, 0, 0, 0, 0};
      for (int k = 0; k < kNeighbours; ++k) {
        const int64_t j = ctx.load(neighbours + k * n + i);
        const float dj = ctx.load(vars + j), mxj = ctx.load(vars + n + j), myj = ctx.load(vars + 2 * n + j),
                    mzj = ctx.load(vars + 3 * n + j), ej = ctx.load(vars + 4 * n + j);
        const float pj = pressure(dj, mxj, myj, mzj, ej);
        const float vx = 0.5f * (mx / d + mxj / dj), vy = 0.5f * (my / d + myj / dj), vz = 0.5f * (mz / d + mzj / dj);
        const float nx = k == 0 ? 1.0f : (k == 1 ? -1.0f : 0.0f), ny = k == 2 ? 1.0f : (k == 3 ? -1.0f : 0.0f);
        const float vn = vx * nx + vy * ny;
        const float pm = 0.5f * (p + pj);
        f[0] += vn * 0.5f * (d + dj);
        f[1] += vn * 0.5f * (mx + mxj) + pm * nx;
        f[2] += vn * 0.5f * (my + myj) + pm * ny;
        f[3] += vn * 0.5f * (mz + mzj) + 0.0f * vz;
        f[4] += vn * (0.5f * (e + ej) + pm);
      }
      for (int v = 0; v < 5; ++v) ctx.store(flux + v * n + i, f[v]);
    }
  }
};

// gaussian: the Fan2 update of gaussian elimination for pivot row 0, out of place.
struct GaussianBody {
  static constexpr const char* kName = "GaussianBody";  // its name in the fusion compiler's source
  const float* a;
  float* out;
  int n;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t total = static_cast<int64_t>(n) * n;
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t idx = ctx.block * items_per_block + t;
      if (idx >= total) return;
      const int r = static_cast<int>(idx / n), c = static_cast<int>(idx % n);
      const float v = ctx.load(a + idx);
      if (r == 0) {
        ctx.store(out + idx, v);
        continue;
      }
      const float m = ctx.load(a + static_cast<int64_t>(r) * n) / ctx.load(a);
      ctx.store(out + idx, v - m * ctx.load(a + c));
    }
  }
};

// hotspot3d: 7-point thermal stencil on n x n x 8 (Rodinia hotspot3D).
struct Hotspot3dBody {
  static constexpr const char* kName = "Hotspot3dBody";  // its name in the fusion compiler's source
  static constexpr int kLayers = 8;
  const float* temp;
  const float* power;
  float* out;
  int n;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t layer = static_cast<int64_t>(n) * n;
    const int64_t total = layer * kLayers;
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t idx = ctx.block * items_per_block + t;
      if (idx >= total) return;
      const int z = static_cast<int>(idx / layer);
      const int64_t in_layer = idx % layer;
      const int r = static_cast<int>(in_layer / n), c = static_cast<int>(in_layer % n);
      const float tc = ctx.load(temp + idx);
      const float tn = r > 0 ? ctx.load(temp + idx - n) : tc, ts = r < n - 1 ? ctx.load(temp + idx + n) : tc;
      const float tw = c > 0 ? ctx.load(temp + idx - 1) : tc, te = c < n - 1 ? ctx.load(temp + idx + 1) : tc;
      const float tb = z > 0 ? ctx.load(temp + idx - layer) : tc, tt = z < kLayers - 1 ? ctx.load(temp + idx + layer) : tc;
      const float v = 0.4f * tc + 0.1f * (tn + ts + tw + te) + 0.1f * (tb + tt) + 0.05f * ctx.load(power + idx) + 0.2f * 80.0f;
      ctx.store(out + idx, v);
    }
  }
};

// bfs: one level of breadth-first search, pulled: an unvisited node joins the next frontier when
// any neighbour is in the current one. Degree is fixed at kDegree (random neighbours).
struct BfsBody {
  static constexpr const char* kName = "BfsBody";  // its name in the fusion compiler's source
  static constexpr int kDegree = 6;
  const int* edges;       // kDegree per node
  const int* frontier;    // 0/1 per node
  const int* visited;     // 0/1 per node
  float* next_cost;       // level + 1 for nodes reached, -1 otherwise
  int64_t n;
  int items_per_block;
  int level;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t i = ctx.block * items_per_block + t;
      if (i >= n) return;
      float cost = -1.0f;
      if (!ctx.load(visited + i)) {
        for (int k = 0; k < kDegree; ++k) {
          if (ctx.load(frontier + ctx.load(edges + i * kDegree + k))) {
            cost = static_cast<float>(level + 1);
            break;
          }
        }
      }
      ctx.store(next_cost + i, cost);
    }
  }
};

// fft_stage: one radix-2 decimation-in-time stage with half-span `span` over n complex points.
struct FftStageBody {
  static constexpr const char* kName = "FftStageBody";  // its name in the fusion compiler's source
  const float2* in;
  float2* out;
  int64_t n;        // points
  int64_t span;     // butterfly half-span (a power of two below n)
  int items_per_block;  // points per logical block (pairs = items / 2)
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int pairs = items_per_block / 2;
    for (int t = ctx.thread; t < pairs; t += ctx.threads) {
      const int64_t p = ctx.block * pairs + t;
      if (p >= n / 2) return;
      const int64_t k = p % span;
      const int64_t i = (p / span) * 2 * span + k, j = i + span;
      float s, c;
      sincosf(-3.14159265358979f * static_cast<float>(k) / static_cast<float>(span), &s, &c);
      const float2 a = ctx.load(in + i), b = ctx.load(in + j);
      const float2 wb = make_float2(c * b.x - s * b.y, c * b.y + s * b.x);
      ctx.store(out + i, make_float2(a.x + wb.x, a.y + wb.y));
      ctx.store(out + j, make_float2(a.x - wb.x, a.y - wb.y));
    }
  }
};

// pathfinder: kRows rows of the dynamic-programming pyramid over a chunk of columns, with a halo
// of kRows columns each side staged in shared memory (Rodinia pathfinder).
struct PathfinderBody {
  static constexpr const char* kName = "PathfinderBody";  // its name in the fusion compiler's source
  static constexpr int kRows = 20;
  const int* wall;  // kRows x cols
  const int* src;   // cols
  float* dst;       // cols
  int cols;
  int items_per_block;  // columns per logical block (= threads of the variant)
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    int* prev = ctx.template shared_as<int>();
    int* next = prev + items_per_block + 2 * kRows;
    const int width = items_per_block + 2 * kRows;
    const int64_t first = ctx.block * items_per_block - kRows;
    for (int x = ctx.thread; x < width; x += ctx.threads) {
      int64_t c = first + x;
      c = c < 0 ? 0 : (c >= cols ? cols - 1 : c);
      prev[x] = ctx.load(src + c);
    }
    ctx.sync();
    for (int r = 0; r < kRows; ++r) {
      for (int x = ctx.thread; x < width; x += ctx.threads) {
        int64_t c = first + x;
        c = c < 0 ? 0 : (c >= cols ? cols - 1 : c);
        const int left = prev[x > 0 ? x - 1 : x], right = prev[x < width - 1 ? x + 1 : x];
        int best = prev[x];
        best = left < best ? left : best;
        best = right < best ? right : best;
        next[x] = ctx.load(wall + static_cast<int64_t>(r) * cols + c) + best;
      }
      ctx.sync();
      int* tmp = prev;
      prev = next;
      next = tmp;
    }
    for (int x = ctx.thread; x < items_per_block; x += ctx.threads) {
      const int64_t c = ctx.block * items_per_block + x;
      if (c < cols) ctx.store(dst + c, static_cast<float>(prev[x + kRows]));
    }
    ctx.sync();  // shared memory is reused by the next logical block
  }
};

// backprop: layer-forward partial sums: each logical block sums input[i] * w[i][h] over its inputs
// for the kHidden hidden units (Rodinia backprop; the host adds the partials).
struct BackpropBody {
  static constexpr const char* kName = "BackpropBody";  // its name in the fusion compiler's source
  static constexpr int kHidden = 16;
  const float* input;
  const float* weights;  // inputs x kHidden
  float* partial;        // logical blocks x kHidden
  int64_t n;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    float* sums = ctx.template shared_as<float>();  // kHidden floats
    for (int h = ctx.thread; h < kHidden; h += ctx.threads) sums[h] = 0.0f;
    ctx.sync();
    float acc[kHidden];
    for (int h = 0; h < kHidden; ++h) acc[h] = 0.0f;
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t i = ctx.block * items_per_block + t;
      if (i >= n) break;
      const float x = ctx.load(input + i);
      for (int h = 0; h < kHidden; ++h) acc[h] = fmaf(x, ctx.load(weights + i * kHidden + h), acc[h]);
    }
    for (int h = 0; h < kHidden; ++h) {
      float v = acc[h];
      for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
      if ((ctx.thread & 31) == 0) atomicAdd(&sums[h], v);
    }
    ctx.sync();
    for (int h = ctx.thread; h < kHidden; h += ctx.threads) ctx.store(partial + ctx.block * kHidden + h, sums[h]);
    ctx.sync();
  }
};

// sgemm: FP32 C = A * B (n x n), register-tiled: a logical block is a 32 x (threads/8) tile and each
// thread computes 4 rows of one column, staging 16-wide slabs of A and B in shared memory.
struct SgemmBody {
  static constexpr const char* kName = "SgemmBody";  // its name in the fusion compiler's source
  static constexpr int kTileM = 32;
  static constexpr int kTileK = 16;
  const float* a;
  const float* b;
  float* c;
  int n;
  int tile_n;  // threads / 8
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    float* sa = ctx.template shared_as<float>();  // kTileM x kTileK
    float* sb = sa + kTileM * kTileK;              // kTileK x tile_n
    const int tiles_n = n / tile_n;
    const int row0 = static_cast<int>(ctx.block / tiles_n) * kTileM;
    const int col0 = static_cast<int>(ctx.block % tiles_n) * tile_n;
    const int col = ctx.thread % tile_n, rgroup = ctx.thread / tile_n;  // rgroup in [0, 8)
    float acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < n; k0 += kTileK) {
      for (int x = ctx.thread; x < kTileM * kTileK; x += ctx.threads) {
        sa[x] = ctx.load(a + static_cast<int64_t>(row0 + x / kTileK) * n + k0 + x % kTileK);
      }
      for (int x = ctx.thread; x < kTileK * tile_n; x += ctx.threads) {
        sb[x] = ctx.load(b + static_cast<int64_t>(k0 + x / tile_n) * n + col0 + x % tile_n);
      }
      ctx.sync();
      for (int k = 0; k < kTileK; ++k) {
        const float bv = sb[k * tile_n + col];
        for (int q = 0; q < 4; ++q) acc[q] = fmaf(sa[(rgroup * 4 + q) * kTileK + k], bv, acc[q]);
      }
      ctx.sync();
    }
    for (int q = 0; q < 4; ++q) ctx.store(c + static_cast<int64_t>(row0 + rgroup * 4 + q) * n + col0 + col, acc[q]);
  }
};

// stencil: 3D 7-point Jacobi step on an n^3 cube (Parboil stencil, as Aker uses it).
struct StencilBody {
  static constexpr const char* kName = "StencilBody";  // its name in the fusion compiler's source
  const float* in;
  float* out;
  int n;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    const int64_t plane = static_cast<int64_t>(n) * n;
    const int64_t total = plane * n;
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t idx = ctx.block * items_per_block + t;
      if (idx >= total) return;
      const int z = static_cast<int>(idx / plane), y = static_cast<int>((idx / n) % n), x = static_cast<int>(idx % n);
      const float v = ctx.load(in + idx);
      if (x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1) {
        ctx.store(out + idx, v);
        continue;
      }
      const float sum = ctx.load(in + idx - 1) + ctx.load(in + idx + 1) + ctx.load(in + idx - n) + ctx.load(in + idx + n) +
                        ctx.load(in + idx - plane) + ctx.load(in + idx + plane);
      ctx.store(out + idx, 0.5f * v + (1.0f / 12.0f) * sum);
    }
  }
};

// lbm: D3Q19 BGK collision of each cell, written to the cell's streaming destinations (Parboil
// lbm, simplified: periodic in one index).
struct LbmBody {
  static constexpr const char* kName = "LbmBody";  // its name in the fusion compiler's source
  static constexpr int kQ = 19;
  const float* f_in;  // kQ arrays of n
  float* f_out;       // kQ arrays of n
  int64_t n;
  int items_per_block;
  float omega;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    // Lattice directions (x, y, z) and weights of D3Q19.
    const int cx[kQ] = {0, 1, -1, 0, 0, 0, 0, 1, -1, 1, -1, 1, -1, 1, -1, 0, 0, 0, 0};
    const int cy[kQ] = {0, 0, 0, 1, -1, 0, 0, 1, 1, -1, -1, 0, 0, 0, 0, 1, -1, 1, -1};
    const int cz[kQ] = {0, 0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 1, 1, -1, -1, 1, 1, -1, -1};
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t i = ctx.block * items_per_block + t;
      if (i >= n) return;
      float f[kQ];
      float rho = 0, ux = 0, uy = 0, uz = 0;
#pragma unroll
      for (int q = 0; q < kQ; ++q) {
        f[q] = ctx.load(f_in + q * n + i);
        rho += f[q];
        ux += cx[q] * f[q];
        uy += cy[q] * f[q];
        uz += cz[q] * f[q];
      }
      ux /= rho;
      uy /= rho;
      uz /= rho;
      const float usq = 1.5f * (ux * ux + uy * uy + uz * uz);
#pragma unroll
      for (int q = 0; q < kQ; ++q) {
        const float w = q == 0 ? 1.0f / 3.0f : (q < 7 ? 1.0f / 18.0f : 1.0f / 36.0f);
        const float cu = 3.0f * (cx[q] * ux + cy[q] * uy + cz[q] * uz);
        const float feq = w * rho * (1.0f + cu + 0.5f * cu * cu - usq);
        const int64_t dst = (i + cx[q] + 64 * cy[q] + 4096 * cz[q] + n) % n;
        ctx.store(f_out + q * n + dst, f[q] + omega * (feq - f[q]));
      }
    }
  }
};

// mri_q: Q(x) = sum over k-samples of phi(k) * exp(i 2 pi k . x) (Parboil mri-q).
struct MriQBody {
  static constexpr const char* kName = "MriQBody";  // its name in the fusion compiler's source
  static constexpr int kSamples = 2048;
  const float4* ksamples;  // kx, ky, kz, |phi|^2
  const float* x;          // 3 arrays of voxels
  float* qr;
  float* qi;
  int64_t voxels;
  int items_per_block;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    for (int t = ctx.thread; t < items_per_block; t += ctx.threads) {
      const int64_t v = ctx.block * items_per_block + t;
      if (v >= voxels) return;
      const float px = ctx.load(x + v), py = ctx.load(x + voxels + v), pz = ctx.load(x + 2 * voxels + v);
      float re = 0, im = 0;
      for (int k = 0; k < kSamples; ++k) {
        const float4 s = ksamples[k];
        const float arg = 6.2831853f * (s.x * px + s.y * py + s.z * pz);
        float sn, cs;
        sincosf(arg, &sn, &cs);
        re = fmaf(s.w, cs, re);
        im = fmaf(s.w, sn, im);
      }
      ctx.store(qr + v, re);
      ctx.store(qi + v, im);
    }
  }
};

}  // namespace concord::kernels
