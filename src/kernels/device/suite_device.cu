// Device instances of the suite's kernels: buffers, seeded inputs, launches in every form, and
// CPU references.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <type_traits>

#include "kernels/conv_reference.h"
#include "kernels/device/bodies.cuh"
#include "kernels/device/instance.cuh"

namespace concord::kernels {
namespace {

using cuda::DeviceBuffer;
using device::CacheOp;

// ---- fma_loop
class FmaLoopKernel final : public BodyKernel<FmaLoopBody> {
 public:
  using BodyKernel::BodyKernel;
  Status prepare(uint64_t) override { return out_.allocate(static_cast<size_t>(spec().size)); }
  Status poison_output(cudaStream_t s) override { return poison(out_.get(), spec().size, s); }
  FmaLoopBody body(int variant) const override {
    return {out_.get(), spec().size, spec().variant(variant).items_per_block};
  }
  Result<double> check(uint64_t seed) const override {
    return relative_error(out_.get(), spec().size, seed, [](int64_t i) {
      const float x = static_cast<float>(i % 1024) * 1e-3f;
      float y = 1.0f;
      for (int k = 0; k < FmaLoopBody::kIterations; ++k) y = std::fmaf(y, 0.999f, x);
      return static_cast<double>(y);
    });
  }

 private:
  DeviceBuffer<float> out_;
};

// ---- stream_triad and vector_add: out = x + scale * y over float4 arrays, inputs in [-1, 1).
template <typename Body>
class Float4Axpy : public BodyKernel<Body> {
 public:
  Float4Axpy(const KernelSpec& spec, float scale) : BodyKernel<Body>(spec), scale_(scale) {}
  int64_t n4() const { return (this->spec().size + 3) / 4; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    for (auto* b : {&x_, &y_, &out_}) CONCORD_RETURN_IF_ERROR(b->allocate(static_cast<size_t>(n4())));
    CONCORD_RETURN_IF_ERROR(fill(reinterpret_cast<float*>(x_.get()), 4 * n4(), seed, -1, 1));
    return fill(reinterpret_cast<float*>(y_.get()), 4 * n4(), seed + 1, -1, 1);
  }
  Status poison_output(cudaStream_t s) override { return poison(reinterpret_cast<float*>(out_.get()), 4 * n4(), s); }
  Result<double> check(uint64_t seed) const override {
    return relative_error(reinterpret_cast<const float*>(out_.get()), 4 * n4(), seed, [this](int64_t i) {
      return static_cast<double>(hash_uniform(seed_, i) * 2 - 1) + scale_ * (hash_uniform(seed_ + 1, i) * 2 - 1);
    });
  }

 protected:
  int vec_per_block(int variant) const { return this->spec().variant(variant).items_per_block / 4; }
  float scale_;
  uint64_t seed_ = 0;
  DeviceBuffer<float4> x_, y_, out_;
};

class StreamTriadKernel final : public Float4Axpy<StreamTriadBody> {
 public:
  explicit StreamTriadKernel(const KernelSpec& spec) : Float4Axpy(spec, 3.0f) {}
  StreamTriadBody body(int v) const override { return {out_.get(), x_.get(), y_.get(), n4(), vec_per_block(v), scale_}; }
};

class VectorAddKernel final : public Float4Axpy<VectorAddBody> {
 public:
  explicit VectorAddKernel(const KernelSpec& spec) : Float4Axpy(spec, 1.0f) {}
  VectorAddBody body(int v) const override { return {x_.get(), y_.get(), out_.get(), n4(), vec_per_block(v)}; }
};

// ---- hotspot
class HotspotKernel final : public BodyKernel<HotspotBody> {
 public:
  using BodyKernel::BodyKernel;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    for (auto* b : {&temp_, &power_, &out_}) CONCORD_RETURN_IF_ERROR(b->allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(fill(temp_.get(), cells(), seed, 300, 340));
    return fill(power_.get(), cells(), seed + 1, 0, 0.5f);
  }
  Status poison_output(cudaStream_t s) override { return poison(out_.get(), cells(), s); }
  HotspotBody body(int variant) const override {
    return {temp_.get(), power_.get(), out_.get(), static_cast<int>(spec().size), spec().variant(variant).items_per_block,
            kCap, kRx, kRy, kRz, kAmb};
  }
  Result<double> check(uint64_t seed) const override {
    const int n = static_cast<int>(spec().size);
    auto temp = [this](int64_t i) { return 300.0f + 40.0f * hash_uniform(seed_, i); };
    return relative_error(out_.get(), cells(), seed, [&, n](int64_t idx) {
      const int r = static_cast<int>(idx / n), c = static_cast<int>(idx % n);
      const float t = temp(idx);
      const float north = r > 0 ? temp(idx - n) : t, south = r < n - 1 ? temp(idx + n) : t;
      const float west = c > 0 ? temp(idx - 1) : t, east = c < n - 1 ? temp(idx + 1) : t;
      const float p = 0.5f * hash_uniform(seed_ + 1, idx);
      return static_cast<double>(t) +
             kCap * (p + (south + north - 2.0 * t) * kRy + (east + west - 2.0 * t) * kRx + (kAmb - t) * kRz);
    });
  }

 private:
  static constexpr float kCap = 0.5f, kRx = 0.1f, kRy = 0.1f, kRz = 0.05f, kAmb = 80.0f;
  uint64_t seed_ = 0;
  DeviceBuffer<float> temp_, power_, out_;
};

// ---- matmul
class MatmulKernel final : public BodyKernel<MatmulBody> {
 public:
  using BodyKernel::BodyKernel;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    // Tiles of every variant (8, 16, 32) must divide n, so the logical grid is n^2 / threads.
    if (spec().size % 32 != 0) return Status::invalid_argument("matmul: size must be a multiple of 32");
    seed_ = seed;
    for (auto* b : {&a_, &b_, &c_}) CONCORD_RETURN_IF_ERROR(b->allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(fill(a_.get(), cells(), seed, -1, 1));
    return fill(b_.get(), cells(), seed + 1, -1, 1);
  }
  Status poison_output(cudaStream_t s) override { return poison(c_.get(), cells(), s); }
  int shared_bytes(int variant) const override { return 2 * spec().variant(variant).threads_per_block * 4; }
  MatmulBody body(int variant) const override {
    const int threads = spec().variant(variant).threads_per_block;
    return {a_.get(), b_.get(), c_.get(), static_cast<int>(spec().size), static_cast<int>(std::lround(std::sqrt(threads)))};
  }
  Result<double> check(uint64_t seed) const override {
    const int64_t n = spec().size;
    return relative_error(c_.get(), cells(), seed, [&, n](int64_t idx) {
      const int64_t r = idx / n, c = idx % n;
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        acc += static_cast<double>(hash_uniform(seed_, r * n + k) * 2 - 1) * (hash_uniform(seed_ + 1, k * n + c) * 2 - 1);
      }
      return acc;
    });
  }

 private:
  uint64_t seed_ = 0;
  DeviceBuffer<float> a_, b_, c_;
};

// ---- kmeans
class KmeansKernel final : public BodyKernel<KmeansBody> {
 public:
  using BodyKernel::BodyKernel;
  Status prepare(uint64_t seed) override {
    seed_ = seed;
    const int64_t points = spec().size;
    CONCORD_RETURN_IF_ERROR(features_.allocate(static_cast<size_t>(points * KmeansBody::kFeatures)));
    CONCORD_RETURN_IF_ERROR(centroids_.allocate(KmeansBody::kClusters * KmeansBody::kFeatures));
    CONCORD_RETURN_IF_ERROR(membership_.allocate(static_cast<size_t>(points)));
    CONCORD_RETURN_IF_ERROR(fill(features_.get(), points * KmeansBody::kFeatures, seed, 0, 1));
    return fill(centroids_.get(), KmeansBody::kClusters * KmeansBody::kFeatures, seed + 1, 0, 1);
  }
  Status poison_output(cudaStream_t s) override { return poison(membership_.get(), spec().size, s); }
  KmeansBody body(int variant) const override {
    return {features_.get(), centroids_.get(), membership_.get(), spec().size, spec().variant(variant).items_per_block};
  }
  // Memberships are labels: the error is the share of points whose label differs from the CPU's.
  Result<double> check(uint64_t seed) const override { return check_exact(seed); }

 private:
  Result<double> check_exact(uint64_t seed) const {
    const int64_t points = spec().size;
    std::vector<float> host(static_cast<size_t>(points));
    CONCORD_CUDA(cudaMemcpy(host.data(), membership_.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    (void)seed;
    double mismatches = 0;
    for (int64_t p = 0; p < points; ++p) {
      int best = 0;
      float best_d = 3.4e38f;
      for (int c = 0; c < KmeansBody::kClusters; ++c) {
        float d = 0;
        for (int f = 0; f < KmeansBody::kFeatures; ++f) {
          const float diff = hash_uniform(seed_, f * points + p) - hash_uniform(seed_ + 1, c * KmeansBody::kFeatures + f);
          d = std::fmaf(diff, diff, d);
        }
        if (d < best_d) {
          best_d = d;
          best = c;
        }
      }
      const float v = host[static_cast<size_t>(p)];
      if (std::isnan(v)) return std::numeric_limits<double>::infinity();
      if (static_cast<int>(v) != best) ++mismatches;
    }
    return mismatches / static_cast<double>(points);
  }
  uint64_t seed_ = 0;
  DeviceBuffer<float> features_, centroids_, membership_;
};

// ---- tc_gemm
class TcGemmKernel final : public BodyKernel<TcGemmBody> {
 public:
  using BodyKernel::BodyKernel;
  int64_t cells() const { return spec().size * spec().size; }
  Status prepare(uint64_t seed) override {
    if (spec().size % 32 != 0) return Status::invalid_argument("tc_gemm: size must be a multiple of 32");
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(a_.allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(b_.allocate(static_cast<size_t>(cells())));
    CONCORD_RETURN_IF_ERROR(c_.allocate(static_cast<size_t>(cells())));
    fill_half_kernel<<<1024, 256>>>(a_.get(), cells(), seed);
    CONCORD_CUDA_LAUNCHED();
    fill_half_kernel<<<1024, 256>>>(b_.get(), cells(), seed + 1);
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }
  Status poison_output(cudaStream_t s) override { return poison(c_.get(), cells(), s); }
  TcGemmBody body(int variant) const override {
    return {a_.get(), b_.get(), c_.get(), static_cast<int>(spec().size), spec().variant(variant).threads_per_block / 32};
  }
  Result<double> check(uint64_t seed) const override {
    const int64_t n = spec().size;
    auto h = [](uint64_t s, int64_t i) { return static_cast<double>(__half2float(__float2half(hash_uniform(s, i) - 0.5f))); };
    return relative_error(c_.get(), cells(), seed, [&, n](int64_t idx) {
      const int64_t r = idx / n, c = idx % n;
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += h(seed_, r * n + k) * h(seed_ + 1, c * n + k);  // B is column-major
      return acc;
    });
  }

 private:
  uint64_t seed_ = 0;
  DeviceBuffer<__half> a_, b_;
  DeviceBuffer<float> c_;
};

// ---- conv_im2col
class ConvIm2colKernel final : public BodyKernel<ConvIm2colBody> {
 public:
  using BodyKernel::BodyKernel;
  ConvIm2colShape shape() const { return {kConvChannels, ConvIm2colBody::kFilters, static_cast<int>(spec().size)}; }
  Status prepare(uint64_t seed) override {
    if (spec().size % 16 != 0) return Status::invalid_argument("conv_im2col: size must be a multiple of 16");
    seed_ = seed;
    const ConvIm2colShape s = shape();
    CONCORD_RETURN_IF_ERROR(input_.allocate(static_cast<size_t>(s.channels * s.pixels())));
    CONCORD_RETURN_IF_ERROR(weight_.allocate(static_cast<size_t>(s.filters) * s.reduction()));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(s.filters * s.pixels())));
    CONCORD_RETURN_IF_ERROR(fill(input_.get(), s.channels * s.pixels(), seed, 0, 1));
    fill_half_kernel<<<1024, 256>>>(weight_.get(), static_cast<int64_t>(s.filters) * s.reduction(), seed + 1);
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }
  Status poison_output(cudaStream_t st) override { return poison(out_.get(), shape().filters * shape().pixels(), st); }
  ConvIm2colBody body(int) const override {
    return {input_.get(), weight_.get(), out_.get(), kConvChannels, static_cast<int>(spec().size)};
  }
  Result<double> check(uint64_t seed) const override {
    const ConvIm2colShape s = shape();
    // The values the GPU multiplied: activations rounded to FP16 when staged, FP16 weights.
    const Values input = [this](int64_t i) {
      return static_cast<double>(__half2float(__float2half(hash_uniform(seed_, static_cast<uint64_t>(i)))));
    };
    const Values weight = [this](int64_t i) {
      return static_cast<double>(__half2float(__float2half(hash_uniform(seed_ + 1, static_cast<uint64_t>(i)) - 0.5f)));
    };
    return relative_error(out_.get(), s.filters * s.pixels(), seed,
                          [&](int64_t i) { return conv_im2col_reference(s, input, weight, i); });
  }

 private:
  uint64_t seed_ = 0;
  DeviceBuffer<float> input_;
  DeviceBuffer<__half> weight_;
  DeviceBuffer<float> out_;
};

const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> f = {
      {"fma_loop", factory<FmaLoopKernel>()},   {"stream_triad", factory<StreamTriadKernel>()},
      {"vector_add", factory<VectorAddKernel>()}, {"hotspot", factory<HotspotKernel>()},
      {"matmul", factory<MatmulKernel>()},       {"kmeans", factory<KmeansKernel>()},
      {"tc_gemm", factory<TcGemmKernel>()},     {"conv_im2col", factory<ConvIm2colKernel>()},
  };
  return f;
}

// Kernels registered from outside the suite (register_device_kernel), under their lock.
std::mutex& registered_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::pair<std::string, Factory>>& registered() {
  static std::vector<std::pair<std::string, Factory>> f;
  return f;
}

}  // namespace

Result<std::unique_ptr<DeviceKernel>> make_device_kernel(const KernelSpec& spec) {
  for (const auto* list : {&factories(), &more_factories(), &library_factories()}) {
    for (const auto& [name, make] : *list) {
      if (name == spec.name) return make(spec);
    }
  }
  std::lock_guard<std::mutex> lock(registered_mutex());
  for (const auto& [name, make] : registered()) {
    if (name == spec.name) return make(spec);
  }
  return Status::not_found("kernel '" + spec.name + "' has no device body yet");
}

bool has_device_kernel(const std::string& name) {
  for (const auto* list : {&factories(), &more_factories(), &library_factories()}) {
    for (const auto& entry : *list) {
      if (entry.first == name) return true;
    }
  }
  std::lock_guard<std::mutex> lock(registered_mutex());
  for (const auto& entry : registered()) {
    if (entry.first == name) return true;
  }
  return false;
}

Status register_device_kernel(const std::string& name, DeviceKernelFactory factory) {
  for (const std::string& taken : device_kernel_names()) {
    if (taken == name) return Status::already_exists("device kernel '" + name + "' is the suite's");
  }
  std::lock_guard<std::mutex> lock(registered_mutex());
  for (const auto& [taken, make] : registered()) {
    if (taken == name) return Status::already_exists("device kernel '" + name + "' is already registered");
  }
  registered().emplace_back(name, std::move(factory));
  return Status::ok();
}

std::vector<std::string> device_kernel_names() {
  std::vector<std::string> out;
  for (const auto* list : {&factories(), &more_factories(), &library_factories()}) {
    for (const auto& [name, make] : *list) out.push_back(name);
  }
  return out;
}

}  // namespace concord::kernels
