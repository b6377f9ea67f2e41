// A suite kernel bound to the device: its buffers, its bodies, and launches in each form.
// The CUDA backend and the GPU tests use this; nothing here runs without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/handles.h"
#include "concord/device/control.h"
#include "concord/kernel.h"
#include "concord/placement.h"
#include "concord/status.h"

namespace concord::kernels {

// One side of a fused kernel (DeviceKernel::fusion_operand).
struct FusionOperand {
  std::string body_type;             // "concord::kernels::FmaLoopBody"
  std::vector<unsigned char> bytes;  // the body object, passed by value to the fused kernel
  int threads = 0;                   // threads of one part
  int shared_bytes = 0;              // shared memory of one part
};

// The environment variable that turns one elastic kernel's body into a no-op in every launch
// form (the wrappers still hand out, count and report its logical blocks): how the GPU tests show
// that they notice a kernel that does no work (scripts/gpu_stub_check.sh). Never set in a run
// whose results count; a kernel so stubbed says so on stderr when it is made.
inline constexpr const char* kStubKernelEnv = "CONCORD_TEST_STUB_KERNEL";

class DeviceKernel {
 public:
  explicit DeviceKernel(KernelSpec spec);
  virtual ~DeviceKernel() = default;
  DeviceKernel(const DeviceKernel&) = delete;
  DeviceKernel& operator=(const DeviceKernel&) = delete;

  const KernelSpec& spec() const { return spec_; }
  // Allocates inputs and outputs and fills the inputs with seeded random values.
  virtual Status prepare(uint64_t seed) = 0;
  // Fills the output with NaN so a check catches elements nobody wrote.
  virtual Status poison_output(cudaStream_t stream) = 0;
  // One CUDA block per logical block of `range`.
  virtual Status launch_standalone(int variant, BlockRange range, CachePolicy cache, cudaStream_t stream) = 0;
  // `grid` persistent blocks on the control block `control` (device memory).
  virtual Status launch_elastic(int variant, CachePolicy cache, device::ElasticControl* control, int grid,
                                cudaStream_t stream) = 0;
  // Resident blocks per SM of the elastic and of the standalone form (occupancy API).
  virtual Result<int> elastic_occupancy(int variant) const = 0;
  virtual Result<int> standalone_occupancy(int variant) const = 0;
  virtual int shared_bytes(int variant) const { return spec_.variant(variant).shared_bytes_per_block; }
  // Registers per thread of the elastic form, as compiled (0 when unknown: library kernels).
  virtual int registers_per_thread(int variant) const {
    (void)variant;
    return 0;
  }
  // The body of `variant` as the fusion compiler needs it: its type's name in the device source
  // and its bytes (the fused kernel's parameter). unsupported for kernels without a body.
  virtual Result<FusionOperand> fusion_operand(int variant) const {
    (void)variant;
    return Status::unsupported("kernel '" + spec_.name + "' has no elastic body to fuse");
  }
  // The kernel functions this kernel's launches may run (every launch form and cache policy), as
  // host symbols: the backend loads them before a run (CUDA loads functions lazily, at their first
  // launch; a first launch behind a running kernel waits for it, and a preempt flag written
  // meanwhile can land after the launch starts). Empty for library kernels.
  virtual std::vector<const void*> device_functions() const { return {}; }
  // Compares the device output with the CPU reference on every element (small outputs) or a
  // seeded sample; returns the relative error ||out - ref|| / ||ref|| (NaN fails).
  virtual Result<double> check(uint64_t sample_seed) const = 0;

  // For tests: from now on every launch of this elastic kernel, in any form, records per logical
  // block how many times its body ran and on which SM (device::BlockAudit), zeroed here.
  // unsupported for library kernels (no logical blocks of their own).
  Status audit_block_runs();
  struct BlockRuns {
    std::vector<uint32_t> runs;  // per logical block id, up to the largest variant's grid
    std::vector<uint32_t> sm;    // the SM of its last run (meaningful where runs > 0)
  };
  // What the audit recorded so far (after the launches finished: the caller synchronizes).
  Result<BlockRuns> block_runs() const;
  // The audit every launch of this kernel passes to the device: null pointers unless
  // audit_block_runs() was called.
  device::BlockAudit audit() const { return {audit_runs_.get(), audit_sm_.get()}; }
  // True when kStubKernelEnv names this kernel: its body does nothing.
  bool stubbed() const { return stubbed_; }

 private:
  KernelSpec spec_;
  bool stubbed_ = false;
  cuda::DeviceBuffer<uint32_t> audit_runs_, audit_sm_;
};

// The device kernel for a suite spec (or one registered below); not_found when the kernel has no
// device body yet.
Result<std::unique_ptr<DeviceKernel>> make_device_kernel(const KernelSpec& spec);
// Suite kernels that have a device body.
std::vector<std::string> device_kernel_names();
// Whether make_device_kernel knows `name` (a suite kernel with a body, or a registered one).
bool has_device_kernel(const std::string& name);

// Device kernels beyond the suite, found by make_device_kernel after the suite's own: the GPU
// tests' kernels that fault or never end (tests/gpu/test_kernels.h), which no spec can name.
// already_exists when the name is taken by the suite or an earlier registration.
using DeviceKernelFactory = std::function<std::unique_ptr<DeviceKernel>(const KernelSpec&)>;
Status register_device_kernel(const std::string& name, DeviceKernelFactory factory);

// Launches a fused block of `parts_a` parts of `a` and `parts_b` parts of `b`, any two elastic
// bodies: the kernel comes from the fusion compiler (compiled on first use, then cached).
Status launch_fused(DeviceKernel& a, int variant_a, int parts_a, device::ElasticControl* control_a, DeviceKernel& b,
                    int variant_b, int parts_b, device::ElasticControl* control_b, CachePolicy cache, int grid,
                    cudaStream_t stream);
// Fused blocks of this shape resident per SM (0: none fits).
Result<int> fused_occupancy(const DeviceKernel& a, int variant_a, int parts_a, const DeviceKernel& b, int variant_b,
                            int parts_b, CachePolicy cache = CachePolicy::normal);
// The compiled fused kernel's footprint as text, for diagnostics: threads, registers per thread
// (and the cap it was compiled under), shared and local bytes, and the other attributes that bear
// on its occupancy (max threads, carveout, cluster shape).
Result<std::string> fused_footprint(const DeviceKernel& a, int variant_a, int parts_a, const DeviceKernel& b,
                                    int variant_b, int parts_b, CachePolicy cache = CachePolicy::normal);
// Compiles and loads the fused kernel of this pair and cache policy now (dispatch does it on demand).
Status prepare_fused(const DeviceKernel& a, int variant_a, int parts_a, const DeviceKernel& b, int variant_b, int parts_b,
                     CachePolicy cache);

}  // namespace concord::kernels
