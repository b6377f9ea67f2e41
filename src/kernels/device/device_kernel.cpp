// What every device kernel shares: the stub switch and the test audit of logical blocks.
#include "kernels/device/device_kernel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace concord::kernels {

DeviceKernel::DeviceKernel(KernelSpec spec) : spec_(std::move(spec)) {
  const char* stub = std::getenv(kStubKernelEnv);
  stubbed_ = stub && spec_.elastic && spec_.name == stub;
  if (stubbed_) {
    std::fprintf(stderr, "concord: %s=%s: kernel '%s' runs a body that does nothing (a test of the tests)\n", kStubKernelEnv,
                 stub, spec_.name.c_str());
  }
}

Status DeviceKernel::audit_block_runs() {
  if (!spec_.elastic) return Status::unsupported("kernel '" + spec_.name + "': a library kernel has no logical blocks to audit");
  int64_t blocks = 0;
  for (const KernelVariant& v : spec_.variants) blocks = std::max(blocks, v.logical_blocks);
  CONCORD_RETURN_IF_ERROR(audit_runs_.allocate(static_cast<size_t>(blocks)));
  CONCORD_RETURN_IF_ERROR(audit_sm_.allocate(static_cast<size_t>(blocks)));
  CONCORD_CUDA(cudaMemset(audit_runs_.get(), 0, audit_runs_.bytes()));
  CONCORD_CUDA(cudaMemset(audit_sm_.get(), 0xff, audit_sm_.bytes()));
  CONCORD_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

Result<DeviceKernel::BlockRuns> DeviceKernel::block_runs() const {
  if (!audit_runs_.get()) return Status::failed_precondition("kernel '" + spec_.name + "': audit_block_runs() was not called");
  BlockRuns out;
  out.runs.resize(audit_runs_.size());
  out.sm.resize(audit_sm_.size());
  CONCORD_CUDA(cudaMemcpy(out.runs.data(), audit_runs_.get(), audit_runs_.bytes(), cudaMemcpyDeviceToHost));
  CONCORD_CUDA(cudaMemcpy(out.sm.data(), audit_sm_.get(), audit_sm_.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace concord::kernels
