// Shared pieces of the suite's device instances: seeded inputs, poisoning, reference checks and
// the BodyKernel template that launches a body in each form. Internal to src/kernels/device.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/check.h"
#include "cuda/handles.h"
#include "concord/device/launch.cuh"
#include "kernels/device/bodies.cuh"
#include "kernels/device/device_kernel.h"

namespace concord::kernels {

using Factory = std::function<std::unique_ptr<DeviceKernel>(const KernelSpec&)>;
// The instances defined in suite_device_raise_aker.cu and library_kernels.cu.
const std::vector<std::pair<std::string, Factory>>& more_factories();
const std::vector<std::pair<std::string, Factory>>& library_factories();

template <typename K>
Factory factory() {
  return [](const KernelSpec& s) { return std::unique_ptr<DeviceKernel>(std::make_unique<K>(s)); };
}

namespace {  // each translation unit gets its own copies of these kernels and helpers

using cuda::DeviceBuffer;
using device::CacheOp;



// Inputs are a hash of (seed, index): the device fills them and the CPU reference recomputes them.
__host__ __device__ inline float hash_uniform(uint64_t seed, uint64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + i + 1;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

__global__ void fill_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = lo + (hi - lo) * hash_uniform(seed, static_cast<uint64_t>(i));
  }
}

__global__ void fill_half_kernel(__half* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = __float2half(hash_uniform(seed, static_cast<uint64_t>(i)) - 0.5f);
  }
}

__global__ void fill_int_kernel(int* p, int64_t n, uint64_t seed, int modulo) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = static_cast<int>(hash_uniform(seed, static_cast<uint64_t>(i)) * static_cast<float>(modulo)) % modulo;
  }
}

__global__ void poison_kernel(float* p, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = __int_as_float(0x7fc00000);
  }
}

Status fill(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  fill_kernel<<<1024, 256>>>(p, n, seed, lo, hi);
  CONCORD_CUDA_LAUNCHED();
  return Status::ok();
}

// Host mirror of fill_int_kernel.
inline int hash_int(uint64_t seed, uint64_t i, int modulo) {
  return static_cast<int>(hash_uniform(seed, i) * static_cast<float>(modulo)) % modulo;
}

Status fill_int(int* p, int64_t n, uint64_t seed, int modulo) {
  fill_int_kernel<<<1024, 256>>>(p, n, seed, modulo);
  CONCORD_CUDA_LAUNCHED();
  return Status::ok();
}

Status poison(float* p, int64_t n, cudaStream_t s) {
  poison_kernel<<<1024, 256, 0, s>>>(p, n);
  CONCORD_CUDA_LAUNCHED();
  return Status::ok();
}

// Calls f(std::integral_constant<CacheOp, Op>{}) for the runtime cache policy.
template <typename F>
void with_cache_op(CachePolicy p, F&& f) {
  switch (p) {
    case CachePolicy::normal: f(std::integral_constant<CacheOp, CacheOp::normal>{}); break;
    case CachePolicy::l1_bypass: f(std::integral_constant<CacheOp, CacheOp::l1_bypass>{}); break;
    case CachePolicy::l2_evict_first: f(std::integral_constant<CacheOp, CacheOp::l2_evict_first>{}); break;
    case CachePolicy::both: f(std::integral_constant<CacheOp, CacheOp::both>{}); break;
  }
}

// Relative L2 error over the indices `idx` of device output `out` against reference `ref(i)`.
Result<double> relative_error(const float* device_out, int64_t n, uint64_t sample_seed,
                              const std::function<double(int64_t)>& ref) {
  std::vector<float> host(static_cast<size_t>(n));
  CONCORD_CUDA(cudaMemcpy(host.data(), device_out, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<int64_t> idx;
  constexpr int64_t kAll = 1 << 18;
  if (n <= kAll) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    std::mt19937_64 gen(sample_seed);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    for (int i = 0; i < 16384; ++i) idx.push_back(pick(gen));
    idx.push_back(0);
    idx.push_back(n - 1);
  }
  double err = 0, norm = 0;
  for (int64_t i : idx) {
    const double v = host[static_cast<size_t>(i)];
    if (std::isnan(v)) return std::numeric_limits<double>::infinity();
    const double r = ref(i);
    err += (v - r) * (v - r);
    norm += r * r;
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

template <typename Body>
class BodyKernel : public DeviceKernel {
 public:
  using DeviceKernel::DeviceKernel;
  virtual Body body(int variant) const = 0;

  Status launch_standalone(int variant, BlockRange range, CachePolicy cache, cudaStream_t stream) override {
    const int threads = spec().variant(variant).threads_per_block;
    const int smem = shared_bytes(variant);
    const auto grid = static_cast<unsigned>(range.size());
    with_cache_op(cache, [&](auto op) {
      if (stubbed()) {
        device::standalone_kernel<StubBody, decltype(op)::value><<<grid, threads, smem, stream>>>({}, range.begin, audit());
      } else {
        device::standalone_kernel<Body, decltype(op)::value><<<grid, threads, smem, stream>>>(body(variant), range.begin, audit());
      }
    });
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }

  Status launch_elastic(int variant, CachePolicy cache, device::ElasticControl* control, int grid,
                        cudaStream_t stream) override {
    const int threads = spec().variant(variant).threads_per_block;
    const int smem = shared_bytes(variant);
    with_cache_op(cache, [&](auto op) {
      if (stubbed()) {
        device::elastic_kernel<StubBody, decltype(op)::value><<<grid, threads, smem, stream>>>({}, control, audit());
      } else {
        device::elastic_kernel<Body, decltype(op)::value><<<grid, threads, smem, stream>>>(body(variant), control, audit());
      }
    });
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }

  std::vector<const void*> device_functions() const override {
    std::vector<const void*> f;
    for (CachePolicy cache : {CachePolicy::normal, CachePolicy::l1_bypass, CachePolicy::l2_evict_first, CachePolicy::both}) {
      with_cache_op(cache, [&](auto op) {
        if (stubbed()) {
          f.push_back(reinterpret_cast<const void*>(&device::standalone_kernel<StubBody, decltype(op)::value>));
          f.push_back(reinterpret_cast<const void*>(&device::elastic_kernel<StubBody, decltype(op)::value>));
        } else {
          f.push_back(reinterpret_cast<const void*>(&device::standalone_kernel<Body, decltype(op)::value>));
          f.push_back(reinterpret_cast<const void*>(&device::elastic_kernel<Body, decltype(op)::value>));
        }
      });
    }
    return f;
  }

  Result<int> standalone_occupancy(int variant) const override {
    int blocks = 0;
    CONCORD_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, device::standalone_kernel<Body, CacheOp::normal>, spec().variant(variant).threads_per_block,
        shared_bytes(variant)));
    return blocks;
  }

  int registers_per_thread(int) const override {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, device::elastic_kernel<Body, CacheOp::normal>) != cudaSuccess) return 0;
    return attr.numRegs;
  }

  Result<FusionOperand> fusion_operand(int variant) const override {
    static_assert(std::is_trivially_copyable_v<Body>, "a body is passed by value to the fused kernel");
    FusionOperand op;
    if (stubbed()) {
      const StubBody b{};
      op.body_type = std::string("concord::kernels::") + StubBody::kName;
      op.bytes.resize(sizeof(StubBody));
      std::memcpy(op.bytes.data(), &b, sizeof(StubBody));
    } else {
      const Body b = body(variant);
      op.body_type = std::string("concord::kernels::") + Body::kName;
      op.bytes.resize(sizeof(Body));
      std::memcpy(op.bytes.data(), &b, sizeof(Body));
    }
    op.threads = spec().variant(variant).threads_per_block;
    op.shared_bytes = shared_bytes(variant);
    return op;
  }

  Result<int> elastic_occupancy(int variant) const override {
    int blocks = 0;
    CONCORD_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, device::elastic_kernel<Body, CacheOp::normal>, spec().variant(variant).threads_per_block,
        shared_bytes(variant)));
    return blocks;
  }
};

}  // namespace
}  // namespace concord::kernels
