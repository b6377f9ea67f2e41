// Device instances of RAISE Table IV's remaining tasks and Aker's kernels, with CPU references.
#include "kernels/device/bodies_raise_aker.cuh"
#include "kernels/device/instance.cuh"

namespace concord::kernels {
namespace {

// A kernel whose single output array is checked against `reference(i)`.
template <typename Body>
class OneOutput : public BodyKernel<Body> {
 public:
  using BodyKernel<Body>::BodyKernel;
  Status poison_output(cudaStream_t s) override { return poison(out_.get(), static_cast<int64_t>(out_.size()), s); }
  Result<double> check(uint64_t seed) const override {
    return relative_error(out_.get(), static_cast<int64_t>(out_.size()), seed, [this](int64_t i) { return reference(i); });
  }

 protected:
  virtual double reference(int64_t i) const = 0;
  uint64_t seed_ = 0;
  DeviceBuffer<float> out_;
};

int items(const KernelSpec& s, int v) { return s.variant(v).items_per_block; }

// ---- srad
class SradKernel final : public OneOutput<SradBody> {
 public:
  using OneOutput::OneOutput;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(image_.allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(cells())));
    return fill(image_.get(), cells(), seed, 0.5f, 1.5f);
  }
  SradBody body(int v) const override { return {image_.get(), out_.get(), static_cast<int>(spec().size), items(spec(), v), kQ0}; }

 private:
  static constexpr float kQ0 = 0.05f;
  float pixel(int64_t i) const { return 0.5f + 1.0f * hash_uniform(seed_, i); }
  double reference(int64_t idx) const override {
    const int n = static_cast<int>(spec().size);
    const int r = static_cast<int>(idx / n), c = static_cast<int>(idx % n);
    const float j = pixel(idx);
    const float dn = (r > 0 ? pixel(idx - n) : j) - j, ds = (r < n - 1 ? pixel(idx + n) : j) - j;
    const float dw = (c > 0 ? pixel(idx - 1) : j) - j, de = (c < n - 1 ? pixel(idx + 1) : j) - j;
    const double g2 = (dn * dn + ds * ds + dw * dw + de * de) / (static_cast<double>(j) * j);
    const double l = (dn + ds + dw + de) / static_cast<double>(j);
    const double num = 0.5 * g2 - (1.0 / 16.0) * l * l, den = 1.0 + 0.25 * l;
    const double qsqr = num / (den * den);
    const double cval = 1.0 / (1.0 + (qsqr - kQ0) / (kQ0 * (1.0 + kQ0)));
    return cval < 0 ? 0 : (cval > 1 ? 1 : cval);
  }
  DeviceBuffer<float> image_;
};

// ---- cfd_flux
class CfdFluxKernel final : public OneOutput<CfdFluxBody> {
 public:
  using OneOutput::OneOutput;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t n = spec().size;
    CONCORD_RETURN_IF_ERROR(vars_.allocate(static_cast<size_t>(5 * n)));
    CONCORD_RETURN_IF_ERROR(neighbours_.allocate(static_cast<size_t>(CfdFluxBody::kNeighbours * n)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(5 * n)));
    CONCORD_RETURN_IF_ERROR(fill(vars_.get(), 5 * n, seed, 1.0f, 2.0f));
    return fill_int(neighbours_.get(), CfdFluxBody::kNeighbours * n, seed + 1, static_cast<int>(n));
  }
  CfdFluxBody body(int v) const override { return {vars_.get(), neighbours_.get(), out_.get(), spec().size, items(spec(), v)}; }

 private:
  double reference(int64_t idx) const override {
    const int64_t n = spec().size;
    const int64_t i = idx % n;
    const int var = static_cast<int>(idx / n);
    auto value = [&](int v, int64_t cell) { return 1.0f + hash_uniform(seed_, v * n + cell); };
    auto pressure = [](float d, float mx, float my, float mz, float e) { return 0.4f * (e - 0.5f * (mx * mx + my * my + mz * mz) / d); };
    const float d = value(0, i), mx = value(1, i), my = value(2, i), mz = value(3, i), e = value(4, i);
    const float p = pressure(d, mx, my, mz, e);
    double f = 0;
    for (int k = 0; k < CfdFluxBody::kNeighbours; ++k) {
      const int64_t j = hash_int(seed_ + 1, k * n + i, static_cast<int>(n));
      const float dj = value(0, j), mxj = value(1, j), myj = value(2, j), mzj = value(3, j), ej = value(4, j);
      const float pj = pressure(dj, mxj, myj, mzj, ej);
      const float vx = 0.5f * (mx / d + mxj / dj), vy = 0.5f * (my / d + myj / dj);
      const float nx = k == 0 ? 1.0f : (k == 1 ? -1.0f : 0.0f), ny = k == 2 ? 1.0f : (k == 3 ? -1.0f : 0.0f);
      const float vn = vx * nx + vy * ny, pm = 0.5f * (p + pj);
      switch (var) {
        case 0: f += vn * 0.5f * (d + dj); break;
        case 1: f += vn * 0.5f * (mx + mxj) + pm * nx; break;
        case 2: f += vn * 0.5f * (my + myj) + pm * ny; break;
        case 3: f += vn * 0.5f * (mz + mzj); break;
        default: f += vn * (0.5f * (e + ej) + pm); break;
      }
    }
    return f;
  }
  DeviceBuffer<float> vars_;
  DeviceBuffer<int> neighbours_;
};

// ---- gaussian
class GaussianKernel final : public OneOutput<GaussianBody> {
 public:
  using OneOutput::OneOutput;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(a_.allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(cells())));
    return fill(a_.get(), cells(), seed, 1.0f, 2.0f);
  }
  GaussianBody body(int v) const override { return {a_.get(), out_.get(), static_cast<int>(spec().size), items(spec(), v)}; }

 private:
  float at(int64_t i) const { return 1.0f + hash_uniform(seed_, i); }
  double reference(int64_t idx) const override {
    const int64_t n = spec().size;
    const int64_t r = idx / n, c = idx % n;
    if (r == 0) return at(idx);
    const double m = static_cast<double>(at(r * n)) / at(0);
    return at(idx) - m * at(c);
  }
  DeviceBuffer<float> a_;
};

// ---- hotspot3d
class Hotspot3dKernel final : public OneOutput<Hotspot3dBody> {
 public:
  using OneOutput::OneOutput;
  int64_t cells() const { return spec().size * spec().size * Hotspot3dBody::kLayers; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    for (auto* b : {&temp_, &power_, &out_}) CONCORD_RETURN_IF_ERROR(b->allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(fill(temp_.get(), cells(), seed, 300, 340));
    return fill(power_.get(), cells(), seed + 1, 0, 1);
  }
  Hotspot3dBody body(int v) const override {
    return {temp_.get(), power_.get(), out_.get(), static_cast<int>(spec().size), items(spec(), v)};
  }

 private:
  double reference(int64_t idx) const override {
    const int64_t n = spec().size, layer = n * n;
    auto t = [&](int64_t i) { return 300.0f + 40.0f * hash_uniform(seed_, i); };
    const int64_t z = idx / layer, r = (idx % layer) / n, c = idx % n;
    const float tc = t(idx);
    const double tn = r > 0 ? t(idx - n) : tc, ts = r < n - 1 ? t(idx + n) : tc;
    const double tw = c > 0 ? t(idx - 1) : tc, te = c < n - 1 ? t(idx + 1) : tc;
    const double tb = z > 0 ? t(idx - layer) : tc, tt = z < Hotspot3dBody::kLayers - 1 ? t(idx + layer) : tc;
    return 0.4 * tc + 0.1 * (tn + ts + tw + te) + 0.1 * (tb + tt) + 0.05 * hash_uniform(seed_ + 1, idx) + 16.0;
  }
  DeviceBuffer<float> temp_, power_;
};

// ---- bfs
class BfsKernel final : public OneOutput<BfsBody> {
 public:
  using OneOutput::OneOutput;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t n = spec().size;
    CONCORD_RETURN_IF_ERROR(edges_.allocate(static_cast<size_t>(n * BfsBody::kDegree)));
    CONCORD_RETURN_IF_ERROR(frontier_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(visited_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(fill_int(edges_.get(), n * BfsBody::kDegree, seed, static_cast<int>(n)));
    CONCORD_RETURN_IF_ERROR(fill_int(frontier_.get(), n, seed + 1, 20));  // nonzero: 95% in the frontier
    return fill_int(visited_.get(), n, seed + 2, 2);
  }
  BfsBody body(int v) const override {
    return {edges_.get(), frontier_.get(), visited_.get(), out_.get(), spec().size, items(spec(), v), kLevel};
  }

 private:
  static constexpr int kLevel = 3;
  double reference(int64_t i) const override {
    const int64_t n = spec().size;
    if (hash_int(seed_ + 2, i, 2)) return -1.0;
    for (int k = 0; k < BfsBody::kDegree; ++k) {
      const int64_t j = hash_int(seed_, i * BfsBody::kDegree + k, static_cast<int>(n));
      if (hash_int(seed_ + 1, j, 20)) return kLevel + 1.0;
    }
    return -1.0;
  }
  DeviceBuffer<int> edges_, frontier_, visited_;
};

// ---- fft_stage
class FftStageKernel final : public BodyKernel<FftStageBody> {
 public:
  using BodyKernel::BodyKernel;
  int64_t points() const { return spec().size; }
  Status prepare(uint64_t seed) override {
    const int64_t n = points();
    if (n < 4 || (n & (n - 1)) != 0) return Status::invalid_argument("fft_stage: size must be a power of two >= 4");
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(in_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(n)));
    return fill(reinterpret_cast<float*>(in_.get()), 2 * n, seed, -1, 1);
  }
  Status poison_output(cudaStream_t s) override { return poison(reinterpret_cast<float*>(out_.get()), 2 * points(), s); }
  FftStageBody body(int v) const override { return {in_.get(), out_.get(), points(), span(), items(spec(), v)}; }
  Result<double> check(uint64_t seed) const override {
    const int64_t n = points(), s = span();
    return relative_error(reinterpret_cast<const float*>(out_.get()), 2 * n, seed, [&, n, s](int64_t f) {
      const int64_t point = f / 2;
      const int64_t k = point % (2 * s) % s;
      const int64_t i = point / (2 * s) * 2 * s + k, j = i + s;
      const bool upper = point % (2 * s) >= s;
      auto in = [&](int64_t p, int comp) { return static_cast<double>(-1.0f + 2.0f * hash_uniform(seed_, 2 * p + comp)); };
      const double ang = -3.14159265358979 * static_cast<double>(k) / static_cast<double>(s);
      const double wr = std::cos(ang) * in(j, 0) - std::sin(ang) * in(j, 1);
      const double wi = std::cos(ang) * in(j, 1) + std::sin(ang) * in(j, 0);
      const double re = upper ? in(i, 0) - wr : in(i, 0) + wr, im = upper ? in(i, 1) - wi : in(i, 1) + wi;
      return f % 2 == 0 ? re : im;
    });
  }

 private:
  int64_t span() const { return points() / 4; }  // a middle stage: strided, not contiguous
  uint64_t seed_ = 0;
  DeviceBuffer<float2> in_, out_;
};

// ---- pathfinder
class PathfinderKernel final : public OneOutput<PathfinderBody> {
 public:
  using OneOutput::OneOutput;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t cols = spec().size;
    CONCORD_RETURN_IF_ERROR(wall_.allocate(static_cast<size_t>(PathfinderBody::kRows * cols)));
    CONCORD_RETURN_IF_ERROR(src_.allocate(static_cast<size_t>(cols)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(cols)));
    CONCORD_RETURN_IF_ERROR(fill_int(wall_.get(), PathfinderBody::kRows * cols, seed, 10));
    return fill_int(src_.get(), cols, seed + 1, 10);
  }
  int shared_bytes(int v) const override {
    return 2 * (spec().variant(v).items_per_block + 2 * PathfinderBody::kRows) * static_cast<int>(sizeof(int));
  }
  PathfinderBody body(int v) const override {
    checked_variant_ = v;
    return {wall_.get(), src_.get(), out_.get(), static_cast<int>(spec().size), items(spec(), v)};
  }

 private:
  // The pyramid over the chunk's columns with a kRows halo, as the body computes it.
  double reference(int64_t col) const override {
    const int64_t cols = spec().size;
    const int ipb = spec().variant(checked_variant_).items_per_block;
    const int64_t first = col / ipb * ipb - PathfinderBody::kRows;
    const int width = ipb + 2 * PathfinderBody::kRows;
    auto clampc = [&](int64_t c) { return c < 0 ? 0 : (c >= cols ? cols - 1 : c); };
    std::vector<int> prev(static_cast<size_t>(width)), next(static_cast<size_t>(width));
    for (int x = 0; x < width; ++x) prev[static_cast<size_t>(x)] = hash_int(seed_ + 1, clampc(first + x), 10);
    for (int r = 0; r < PathfinderBody::kRows; ++r) {
      for (int x = 0; x < width; ++x) {
        const int left = prev[static_cast<size_t>(x > 0 ? x - 1 : x)], right = prev[static_cast<size_t>(x < width - 1 ? x + 1 : x)];
        const int best = std::min({left, prev[static_cast<size_t>(x)], right});
        next[static_cast<size_t>(x)] = hash_int(seed_, r * cols + clampc(first + x), 10) + best;
      }
      std::swap(prev, next);
    }
    return prev[static_cast<size_t>(col - first)];
  }
  // Chunk edges near the grid's borders depend on the chunk width: the launched variant's.
  mutable int checked_variant_ = 0;
  DeviceBuffer<int> wall_, src_;
};

// ---- backprop
class BackpropKernel final : public OneOutput<BackpropBody> {
 public:
  using OneOutput::OneOutput;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t n = spec().size;
    CONCORD_RETURN_IF_ERROR(input_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(weights_.allocate(static_cast<size_t>(n * BackpropBody::kHidden)));
    // Partial sums per logical block of the smallest variant (the most blocks).
    int64_t most = 0;
    for (const auto& v : spec().variants) most = std::max(most, v.logical_blocks);
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(most * BackpropBody::kHidden)));
    CONCORD_RETURN_IF_ERROR(fill(input_.get(), n, seed, 0, 1));
    return fill(weights_.get(), n * BackpropBody::kHidden, seed + 1, -1, 1);
  }
  int shared_bytes(int) const override { return BackpropBody::kHidden * static_cast<int>(sizeof(float)); }
  BackpropBody body(int v) const override {
    checked_variant_ = v;
    return {input_.get(), weights_.get(), out_.get(), spec().size, items(spec(), v)};
  }
  Result<double> check(uint64_t seed) const override {
    const int64_t used = spec().variant(checked_variant_).logical_blocks * BackpropBody::kHidden;
    return relative_error(out_.get(), used, seed, [this](int64_t i) { return reference(i); });
  }

 private:
  double reference(int64_t idx) const override {
    const int ipb = spec().variant(checked_variant_).items_per_block;
    const int64_t block = idx / BackpropBody::kHidden, h = idx % BackpropBody::kHidden;
    double acc = 0;
    for (int64_t i = block * ipb; i < std::min<int64_t>((block + 1) * ipb, spec().size); ++i) {
      acc += static_cast<double>(hash_uniform(seed_, i)) * (-1.0 + 2.0 * hash_uniform(seed_ + 1, i * BackpropBody::kHidden + h));
    }
    return acc;
  }
  mutable int checked_variant_ = 0;  // the variant last launched: its grid defines the partials
  DeviceBuffer<float> input_, weights_;
};

// ---- sgemm
class SgemmKernel final : public OneOutput<SgemmBody> {
 public:
  using OneOutput::OneOutput;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    if (spec().size % 128 != 0) return Status::invalid_argument("sgemm: size must be a multiple of 128");
    seed_ = seed;
    for (auto* b : {&a_, &b_, &out_}) CONCORD_RETURN_IF_ERROR(b->allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(fill(a_.get(), cells(), seed, -1, 1));
    return fill(b_.get(), cells(), seed + 1, -1, 1);
  }
  int shared_bytes(int v) const override {
    return (SgemmBody::kTileM * SgemmBody::kTileK + SgemmBody::kTileK * spec().variant(v).threads_per_block / 8) * 4;
  }
  SgemmBody body(int v) const override {
    return {a_.get(), b_.get(), out_.get(), static_cast<int>(spec().size), spec().variant(v).threads_per_block / 8};
  }

 private:
  double reference(int64_t idx) const override {
    const int64_t n = spec().size, r = idx / n, c = idx % n;
    double acc = 0;
    for (int64_t k = 0; k < n; ++k) {
      acc += static_cast<double>(hash_uniform(seed_, r * n + k) * 2 - 1) * (hash_uniform(seed_ + 1, k * n + c) * 2 - 1);
    }
    return acc;
  }
  DeviceBuffer<float> a_, b_;
};

// ---- stencil
class StencilKernel final : public OneOutput<StencilBody> {
 public:
  using OneOutput::OneOutput;
  int64_t cells() const { return spec().size * spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(in_.allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(cells())));
    return fill(in_.get(), cells(), seed, 0, 1);
  }
  StencilBody body(int v) const override { return {in_.get(), out_.get(), static_cast<int>(spec().size), items(spec(), v)}; }

 private:
  double reference(int64_t idx) const override {
    const int64_t n = spec().size, plane = n * n;
    auto in = [&](int64_t i) { return static_cast<double>(hash_uniform(seed_, i)); };
    const int64_t z = idx / plane, y = idx / n % n, x = idx % n;
    if (x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1) return in(idx);
    return 0.5 * in(idx) + (in(idx - 1) + in(idx + 1) + in(idx - n) + in(idx + n) + in(idx - plane) + in(idx + plane)) / 12.0;
  }
  DeviceBuffer<float> in_;
};

// ---- lbm
class LbmKernel final : public OneOutput<LbmBody> {
 public:
  using OneOutput::OneOutput;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t n = spec().size;
    CONCORD_RETURN_IF_ERROR(in_.allocate(static_cast<size_t>(LbmBody::kQ * n)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(LbmBody::kQ * n)));
    return fill(in_.get(), LbmBody::kQ * n, seed, 0.02f, 0.08f);
  }
  LbmBody body(int v) const override { return {in_.get(), out_.get(), spec().size, items(spec(), v), kOmega}; }

 private:
  static constexpr float kOmega = 1.2f;
  // Output (q, dst) comes from cell src = dst - offset(q).
  double reference(int64_t idx) const override {
    static const int cx[LbmBody::kQ] = {0, 1, -1, 0, 0, 0, 0, 1, -1, 1, -1, 1, -1, 1, -1, 0, 0, 0, 0};
    static const int cy[LbmBody::kQ] = {0, 0, 0, 1, -1, 0, 0, 1, 1, -1, -1, 0, 0, 0, 0, 1, -1, 1, -1};
    static const int cz[LbmBody::kQ] = {0, 0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 1, 1, -1, -1, 1, 1, -1, -1};
    const int64_t n = spec().size;
    const int q = static_cast<int>(idx / n);
    const int64_t dst = idx % n;
    const int64_t shift = cx[q] + 64 * cy[q] + 4096 * cz[q];
    const int64_t i = ((dst - shift) % n + n) % n;
    double f[LbmBody::kQ], rho = 0, ux = 0, uy = 0, uz = 0;
    for (int k = 0; k < LbmBody::kQ; ++k) {
      f[k] = 0.02f + 0.06f * hash_uniform(seed_, k * n + i);
      rho += f[k];
      ux += cx[k] * f[k];
      uy += cy[k] * f[k];
      uz += cz[k] * f[k];
    }
    ux /= rho;
    uy /= rho;
    uz /= rho;
    const double usq = 1.5 * (ux * ux + uy * uy + uz * uz);
    const double w = q == 0 ? 1.0 / 3.0 : (q < 7 ? 1.0 / 18.0 : 1.0 / 36.0);
    const double cu = 3.0 * (cx[q] * ux + cy[q] * uy + cz[q] * uz);
    const double feq = w * rho * (1.0 + cu + 0.5 * cu * cu - usq);
    return f[q] + kOmega * (feq - f[q]);
  }
  DeviceBuffer<float> in_;
};

// ---- mri_q
class MriQKernel final : public BodyKernel<MriQBody> {
 public:
  using BodyKernel::BodyKernel;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t v = spec().size;
    CONCORD_RETURN_IF_ERROR(k_.allocate(MriQBody::kSamples));
    CONCORD_RETURN_IF_ERROR(x_.allocate(static_cast<size_t>(3 * v)));
    CONCORD_RETURN_IF_ERROR(qr_.allocate(static_cast<size_t>(v)));
    CONCORD_RETURN_IF_ERROR(qi_.allocate(static_cast<size_t>(v)));
    CONCORD_RETURN_IF_ERROR(fill(reinterpret_cast<float*>(k_.get()), 4 * MriQBody::kSamples, seed, -0.5f, 0.5f));
    return fill(x_.get(), 3 * v, seed + 1, -0.5f, 0.5f);
  }
  Status poison_output(cudaStream_t s) override {
    CONCORD_RETURN_IF_ERROR(poison(qr_.get(), spec().size, s));
    return poison(qi_.get(), spec().size, s);
  }
  MriQBody body(int v) const override { return {k_.get(), x_.get(), qr_.get(), qi_.get(), spec().size, items(spec(), v)}; }
  Result<double> check(uint64_t seed) const override {
    auto ref = [this](int64_t v, bool imag) {
      const int64_t n = spec().size;
      const double px = -0.5 + hash_uniform(seed_ + 1, v), py = -0.5 + hash_uniform(seed_ + 1, n + v),
                   pz = -0.5 + hash_uniform(seed_ + 1, 2 * n + v);
      double re = 0, im = 0;
      for (int k = 0; k < MriQBody::kSamples; ++k) {
        auto s = [&](int c) { return -0.5 + static_cast<double>(hash_uniform(seed_, 4 * k + c)); };
        const double arg = 6.2831853 * (s(0) * px + s(1) * py + s(2) * pz);
        re += s(3) * std::cos(arg);
        im += s(3) * std::sin(arg);
      }
      return imag ? im : re;
    };
    auto er = relative_error(qr_.get(), spec().size, seed, [&](int64_t v) { return ref(v, false); });
    if (!er) return er;
    auto ei = relative_error(qi_.get(), spec().size, seed, [&](int64_t v) { return ref(v, true); });
    if (!ei) return ei;
    return std::max(*er, *ei);
  }

 private:
  uint64_t seed_ = 0;
  DeviceBuffer<float4> k_;
  DeviceBuffer<float> x_, qr_, qi_;
};

}  // namespace

const std::vector<std::pair<std::string, Factory>>& more_factories() {
  static const std::vector<std::pair<std::string, Factory>> f = {
      {"srad", factory<SradKernel>()},         {"cfd_flux", factory<CfdFluxKernel>()},
      {"gaussian", factory<GaussianKernel>()}, {"hotspot3d", factory<Hotspot3dKernel>()},
      {"bfs", factory<BfsKernel>()},           {"fft_stage", factory<FftStageKernel>()},
      {"pathfinder", factory<PathfinderKernel>()}, {"backprop", factory<BackpropKernel>()},
      {"sgemm", factory<SgemmKernel>()},       {"stencil", factory<StencilKernel>()},
      {"lbm", factory<LbmKernel>()},           {"mri_q", factory<MriQKernel>()},
  };
  return f;
}

}  // namespace concord::kernels
