#include "test_kernels.h"

#include "concord/suite.h"
#include "kernels/device/instance.cuh"

namespace concord::testing {
namespace {

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins each logical block for `ns` nanoseconds of the global timer.
struct SpinBody {
  static constexpr const char* kName = "SpinBody";
  unsigned long long ns;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    (void)ctx;
    const unsigned long long until = global_ns() + ns;
    while (global_ns() < until) __nanosleep(1000);
  }
};

// Logical block 0 stores through an unmapped address once it spun `ns` nanoseconds.
struct FaultBody {
  static constexpr const char* kName = "FaultBody";
  unsigned long long ns;
  int* unmapped;
  template <class Ctx>
  __device__ void operator()(const Ctx& ctx) const {
    if (ctx.block != 0 || ctx.thread != 0) return;
    const unsigned long long until = global_ns() + ns;
    while (global_ns() < until) __nanosleep(1000);
    *reinterpret_cast<volatile int*>(unmapped) = 1;
  }
};

__global__ void hang_forever(int armed) {
  if (!armed) return;
  while (true) __nanosleep(100000);
}

class SpinKernel final : public kernels::BodyKernel<SpinBody> {
 public:
  using BodyKernel::BodyKernel;
  Status prepare(uint64_t) override { return Status::ok(); }
  Status poison_output(cudaStream_t) override { return Status::ok(); }
  SpinBody body(int) const override { return {20'000}; }
  Result<double> check(uint64_t) const override { return 0.0; }
};

class FaultKernel final : public kernels::BodyKernel<FaultBody> {
 public:
  using BodyKernel::BodyKernel;
  Status prepare(uint64_t) override { return Status::ok(); }
  Status poison_output(cudaStream_t) override { return Status::ok(); }
  // Just above address 0, which nothing ever maps (an arbitrary high address may lie inside the
  // process's unified address space).
  FaultBody body(int) const override { return {1'000'000, reinterpret_cast<int*>(uintptr_t{64})}; }
  Result<double> check(uint64_t) const override { return 0.0; }
};

class HangKernel final : public kernels::DeviceKernel {
 public:
  using DeviceKernel::DeviceKernel;
  Status prepare(uint64_t) override { return Status::ok(); }
  Status poison_output(cudaStream_t) override { return Status::ok(); }
  Status launch_standalone(int, BlockRange, CachePolicy, cudaStream_t stream) override {
    hang_forever<<<1, 32, 0, stream>>>(launches_++ > 0 ? 1 : 0);
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }
  Status launch_elastic(int, CachePolicy, device::ElasticControl*, int, cudaStream_t) override {
    return Status::unsupported("test_hang is opaque: native form only");
  }
  Result<int> elastic_occupancy(int) const override { return Status::unsupported("test_hang is opaque"); }
  Result<int> standalone_occupancy(int) const override { return 1; }
  Result<double> check(uint64_t) const override { return 0.0; }

 private:
  int launches_ = 0;
};

KernelSpec spec(const std::string& name, bool elastic, int64_t logical_blocks, double flops_per_block) {
  KernelSpec k;
  k.name = name;
  k.size = logical_blocks;
  k.elastic = elastic;
  KernelVariant v;
  v.name = "mid";
  v.threads_per_block = elastic ? 128 : 32;
  v.registers_per_thread = 32;
  v.logical_blocks = logical_blocks;
  v.flops_per_block = flops_per_block;
  v.bytes_per_block = 0;
  k.variants = {v};
  return k;
}

}  // namespace

// Flops that a roofline prices near the blocks' real time (20 us, 1 ms), so the backend's chunks
// stay small and a preemption lands within a few blocks.
KernelSpec spin_kernel() { return spec("test_spin", true, kMaxLogicalBlocks, 2e6); }
KernelSpec hang_kernel() { return spec("test_hang", false, 1, 1e12); }
KernelSpec fault_kernel() { return spec("test_fault", true, 1, 1e8); }

Status register_test_kernels() {
  // A function-local static: registered once, whichever test asks first.
  static const Status registered = [] {
    CONCORD_RETURN_IF_ERROR(kernels::register_device_kernel("test_spin", kernels::factory<SpinKernel>()));
    CONCORD_RETURN_IF_ERROR(kernels::register_device_kernel("test_hang", kernels::factory<HangKernel>()));
    return kernels::register_device_kernel("test_fault", kernels::factory<FaultKernel>());
  }();
  return registered;
}

}  // namespace concord::testing
