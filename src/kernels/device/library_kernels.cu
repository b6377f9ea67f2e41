// Opaque library tenants: cuBLAS GEMM and cuFFT, loaded with dlopen so that nothing links the
// libraries and binaries start on machines without them. They run only in the native form; an
// SM set comes from the stream (green context), L2 evict-first from an access-policy window.
#include <cublas_v2.h>
#include <cufft.h>
#include <dlfcn.h>

#include "kernels/device/instance.cuh"

namespace concord::kernels {
namespace {

void* open_library(std::initializer_list<const char*> names, std::string& tried) {
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += std::string(tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

template <typename F>
Status symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) return Status::not_found(std::string("symbol ") + name + " not found");
  return Status::ok();
}

// The stream's L2 access-policy window: streaming (evict-first) over `bytes` from `base`, or none.
Status set_window(cudaStream_t stream, void* base, size_t bytes, bool streaming) {
  cudaStreamAttrValue attr{};
  if (streaming) {
    int max_window = 0;
    CONCORD_CUDA(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0));
    attr.accessPolicyWindow.base_ptr = base;
    attr.accessPolicyWindow.num_bytes = std::min(bytes, static_cast<size_t>(max_window));
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  }
  CONCORD_CUDA(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr));
  return Status::ok();
}

class LibraryKernel : public DeviceKernel {
 public:
  using DeviceKernel::DeviceKernel;
  Status launch_elastic(int, CachePolicy, device::ElasticControl*, int, cudaStream_t) override {
    return Status::unsupported(spec().name + " is a library kernel: native form only");
  }
  Result<int> elastic_occupancy(int) const override {
    return Status::unsupported(spec().name + " is a library kernel: no elastic form");
  }
  Result<int> standalone_occupancy(int) const override {
    return Status::unsupported(spec().name + " is a library kernel: its launch shape is the library's");
  }
  Status launch_standalone(int, BlockRange range, CachePolicy cache, cudaStream_t stream) override {
    if (range.begin != 0 || range.size() != spec().variant(0).logical_blocks) {
      return Status::unsupported(spec().name + " is a library kernel: it runs whole");
    }
    if (bypasses_l1(cache)) return Status::unsupported(spec().name + " is a library kernel: no L1 bypass");
    // Evict-first only: otherwise the stream's window is the backend's (an l2_persist placement).
    const bool streaming = evicts_l2_first(cache);
    if (streaming) CONCORD_RETURN_IF_ERROR(set_window(stream, window_base(), window_bytes(), true));
    CONCORD_RETURN_IF_ERROR(run(stream));
    return streaming ? set_window(stream, nullptr, 0, false) : Status::ok();
  }

 protected:
  virtual Status run(cudaStream_t stream) = 0;
  virtual void* window_base() const = 0;
  virtual size_t window_bytes() const = 0;
};

__global__ void fill_half_uniform(__half* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = __float2half(hash_uniform(seed, static_cast<uint64_t>(i)) - 0.5f);
  }
}

// C = A * B with FP16 inputs and FP32 output and accumulation (column-major, as cuBLAS has it).
class CublasGemmKernel final : public LibraryKernel {
 public:
  using LibraryKernel::LibraryKernel;
  ~CublasGemmKernel() override {
    if (handle_ && destroy_) destroy_(handle_);
  }
  Status prepare(uint64_t seed) override {
    std::string tried;
    void* lib = open_library({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, tried);
    if (!lib) return Status::not_found("cublas_gemm: cannot load cuBLAS (tried " + tried + ")");
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cublasCreate_v2", create_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cublasDestroy_v2", destroy_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cublasSetStream_v2", set_stream_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cublasGemmEx", gemm_));
    if (create_(&handle_) != CUBLAS_STATUS_SUCCESS) return Status::device_error("cublasCreate failed");
    seed_ = seed;
    const int64_t n = spec().size;
    CONCORD_RETURN_IF_ERROR(ab_.allocate(static_cast<size_t>(2 * n * n)));
    CONCORD_RETURN_IF_ERROR(c_.allocate(static_cast<size_t>(n * n)));
    fill_half_uniform<<<1024, 256>>>(ab_.get(), 2 * n * n, seed);
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }
  Status poison_output(cudaStream_t s) override { return poison(c_.get(), spec().size * spec().size, s); }
  Result<double> check(uint64_t seed) const override {
    const int64_t n = spec().size;
    auto h = [this](int64_t i) { return static_cast<double>(__half2float(__float2half(hash_uniform(seed_, i) - 0.5f))); };
    return relative_error(c_.get(), n * n, seed, [&, n](int64_t idx) {
      const int64_t i = idx % n, j = idx / n;
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += h(i + k * n) * h(n * n + k + j * n);
      return acc;
    });
  }

 private:
  Status run(cudaStream_t stream) override {
    const int n = static_cast<int>(spec().size);
    const float alpha = 1.0f, beta = 0.0f;
    if (set_stream_(handle_, stream) != CUBLAS_STATUS_SUCCESS) return Status::device_error("cublasSetStream failed");
    const cublasStatus_t st = gemm_(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, ab_.get(), CUDA_R_16F, n,
                                    ab_.get() + static_cast<int64_t>(n) * n, CUDA_R_16F, n, &beta, c_.get(), CUDA_R_32F, n,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return Status::device_error("cublasGemmEx failed with status " + std::to_string(st));
    return Status::ok();
  }
  void* window_base() const override { return ab_.get(); }
  size_t window_bytes() const override { return ab_.bytes(); }

  decltype(&cublasCreate_v2) create_ = nullptr;
  decltype(&cublasDestroy_v2) destroy_ = nullptr;
  decltype(&cublasSetStream_v2) set_stream_ = nullptr;
  // cublasGemmEx is overloaded in C++: name the C signature the library exports.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  uint64_t seed_ = 0;
  DeviceBuffer<__half> ab_;
  DeviceBuffer<float> c_;
};

// Forward complex-to-complex FFT of n points.
class CufftKernel final : public LibraryKernel {
 public:
  using LibraryKernel::LibraryKernel;
  ~CufftKernel() override {
    if (plan_ && destroy_) destroy_(plan_);
  }
  Status prepare(uint64_t seed) override {
    std::string tried;
    void* lib = open_library({"libcufft.so.12", "libcufft.so.11", "libcufft.so"}, tried);
    if (!lib) return Status::not_found("cufft: cannot load cuFFT (tried " + tried + ")");
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cufftPlan1d", plan1d_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cufftDestroy", destroy_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cufftSetStream", set_stream_));
    CONCORD_RETURN_IF_ERROR(symbol(lib, "cufftExecC2C", exec_));
    const int64_t n = spec().size;
    if (plan1d_(&plan_, static_cast<int>(n), CUFFT_C2C, 1) != CUFFT_SUCCESS) return Status::device_error("cufftPlan1d failed");
    seed_ = seed;
    CONCORD_RETURN_IF_ERROR(in_.allocate(static_cast<size_t>(n)));
    CONCORD_RETURN_IF_ERROR(out_.allocate(static_cast<size_t>(n)));
    return fill(reinterpret_cast<float*>(in_.get()), 2 * n, seed, -1, 1);
  }
  Status poison_output(cudaStream_t s) override { return poison(reinterpret_cast<float*>(out_.get()), 2 * spec().size, s); }
  Result<double> check(uint64_t seed) const override {
    // A direct DFT costs O(n) an output: check 64 sampled outputs.
    const int64_t n = spec().size;
    std::vector<float2> host(static_cast<size_t>(n));
    CONCORD_CUDA(cudaMemcpy(host.data(), out_.get(), host.size() * sizeof(float2), cudaMemcpyDeviceToHost));
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    double err = 0, norm = 0;
    for (int s = 0; s < 64; ++s) {
      const int64_t k = pick(gen);
      double re = 0, im = 0;
      for (int64_t t = 0; t < n; ++t) {
        const double xr = -1.0 + 2.0 * hash_uniform(seed_, 2 * t), xi = -1.0 + 2.0 * hash_uniform(seed_, 2 * t + 1);
        const double ang = -2.0 * 3.14159265358979323846 * static_cast<double>((k * t) % n) / static_cast<double>(n);
        re += xr * std::cos(ang) - xi * std::sin(ang);
        im += xr * std::sin(ang) + xi * std::cos(ang);
      }
      const float2 v = host[static_cast<size_t>(k)];
      if (std::isnan(v.x) || std::isnan(v.y)) return std::numeric_limits<double>::infinity();
      err += (v.x - re) * (v.x - re) + (v.y - im) * (v.y - im);
      norm += re * re + im * im;
    }
    return std::sqrt(err / norm);
  }

 private:
  Status run(cudaStream_t stream) override {
    if (set_stream_(plan_, stream) != CUFFT_SUCCESS) return Status::device_error("cufftSetStream failed");
    if (exec_(plan_, reinterpret_cast<cufftComplex*>(in_.get()), reinterpret_cast<cufftComplex*>(out_.get()), CUFFT_FORWARD) !=
        CUFFT_SUCCESS) {
      return Status::device_error("cufftExecC2C failed");
    }
    return Status::ok();
  }
  void* window_base() const override { return in_.get(); }
  size_t window_bytes() const override { return in_.bytes(); }

  decltype(&cufftPlan1d) plan1d_ = nullptr;
  decltype(&cufftDestroy) destroy_ = nullptr;
  decltype(&cufftSetStream) set_stream_ = nullptr;
  decltype(&cufftExecC2C) exec_ = nullptr;
  cufftHandle plan_ = 0;
  uint64_t seed_ = 0;
  DeviceBuffer<float2> in_, out_;
};

}  // namespace

const std::vector<std::pair<std::string, Factory>>& library_factories() {
  static const std::vector<std::pair<std::string, Factory>> f = {
      {"cublas_gemm", factory<CublasGemmKernel>()},
      {"cufft", factory<CufftKernel>()},
  };
  return f;
}

}  // namespace concord::kernels
