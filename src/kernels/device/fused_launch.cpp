// Fused launches of any two elastic bodies through the fusion compiler (fusion_compiler.h).
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#include "concord/backend.h"
#include "concord/placement_rule.h"
#include "kernels/device/device_kernel.h"
#include "kernels/device/fusion_compiler.h"

namespace concord::kernels {
namespace {

struct FusedShape {
  FusionOperand a, b;
  int threads = 0;
  int shared = 0;
  int register_cap = 0;
  int parts = 0;  // a + b per block
};

Result<FusedShape> shape_of(const DeviceKernel& a, int va, int pa, const DeviceKernel& b, int vb, int pb) {
  auto oa = a.fusion_operand(va);
  if (!oa) return oa.status();
  auto ob = b.fusion_operand(vb);
  if (!ob) return ob.status();
  FusedShape s{std::move(*oa), std::move(*ob)};
  s.parts = pa + pb;
  const std::string who = "fusing '" + a.spec().name + "' with '" + b.spec().name + "' at " + std::to_string(pa) + ":" +
                          std::to_string(pb);
  if (pa < 1 || pb < 1 || pa + pb > kMaxFusedParts) {
    return Status::invalid_argument(who + ": parts per block must be >= 1 and at most " + std::to_string(kMaxFusedParts) +
                                    " in all");
  }
  if (s.a.threads % 32 != 0 || s.b.threads % 32 != 0) {
    return Status::unsupported(who + ": a fused part must be a whole number of warps");
  }
  s.threads = pa * s.a.threads + pb * s.b.threads;
  s.shared = pa * s.a.shared_bytes + pb * s.b.shared_bytes;
  int device = 0, max_threads = 0, regs_block = 0, regs_sm = 0, sm_threads = 0, sm_shared = 0, sm_blocks = 0;
  CONCORD_CUDA(cudaGetDevice(&device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&regs_block, cudaDevAttrMaxRegistersPerBlock, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&regs_sm, cudaDevAttrMaxRegistersPerMultiprocessor, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&sm_threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&sm_shared, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&sm_blocks, cudaDevAttrMaxBlocksPerMultiprocessor, device));
  if (s.threads > max_threads) {
    return Status::unsupported(who + ": " + std::to_string(s.threads) + " threads exceed a block's " +
                               std::to_string(max_threads));
  }
  // The cap keeps as many fused blocks per SM as the kernels' declared registers allow (the
  // occupancy the rule and the policies predicted), within what one block may use.
  DeviceSpec limits;
  limits.sm.max_registers = std::min(regs_block, regs_sm);
  limits.sm.max_threads = sm_threads;
  limits.sm.max_shared_bytes = sm_shared;
  limits.sm.max_blocks = sm_blocks;
  s.register_cap = fused_block_register_cap(limits, a.spec().variant(va), pa, b.spec().variant(vb), pb);
  return s;
}

Result<const void*> kernel_for(const FusedShape& s, CachePolicy cache) {
  auto k = FusionCompiler::shared().kernel({s.a.body_type, s.b.body_type, cache, s.register_cap, s.parts});
  if (!k) return k.status();
  // Above 48 KiB of dynamic shared memory a kernel must opt in.
  if (s.shared > 48 * 1024) {
    CONCORD_CUDA(cudaFuncSetAttribute(*k, cudaFuncAttributeMaxDynamicSharedMemorySize, s.shared));
  }
  return *k;
}

}  // namespace

Status prepare_fused(const DeviceKernel& a, int va, int pa, const DeviceKernel& b, int vb, int pb, CachePolicy cache) {
  auto s = shape_of(a, va, pa, b, vb, pb);
  if (!s) return s.status();
  auto k = kernel_for(*s, cache);
  return k.status();
}

Status launch_fused(DeviceKernel& a, int va, int pa, device::ElasticControl* ca, DeviceKernel& b, int vb, int pb,
                    device::ElasticControl* cb, CachePolicy cache, int grid, cudaStream_t stream) {
  auto s = shape_of(a, va, pa, b, vb, pb);
  if (!s) return s.status();
  auto k = kernel_for(*s, cache);
  if (!k) return k.status();
  int ta = s->a.threads, tb = s->b.threads, sa = s->a.shared_bytes, sb = s->b.shared_bytes;
  device::BlockAudit audit_a = a.audit(), audit_b = b.audit();
  // The fused kernel's parameters, in order: body_a, body_b, ctl_a, ctl_b, parts_a, parts_b,
  // threads_a, threads_b, shared_a, shared_b, audit_a, audit_b (device::fused_kernel).
  void* args[] = {s->a.bytes.data(), s->b.bytes.data(), &ca, &cb, &pa, &pb, &ta, &tb, &sa, &sb, &audit_a, &audit_b};
  CONCORD_CUDA(cudaLaunchKernel(*k, dim3(static_cast<unsigned>(grid)), dim3(static_cast<unsigned>(s->threads)), args,
                                static_cast<size_t>(s->shared), stream));
  return Status::ok();
}

Result<int> fused_occupancy(const DeviceKernel& a, int va, int pa, const DeviceKernel& b, int vb, int pb,
                            CachePolicy cache) {
  auto s = shape_of(a, va, pa, b, vb, pb);
  if (!s) return s.status();
  auto k = kernel_for(*s, cache);
  if (!k) return k.status();
  int blocks = 0;
  CONCORD_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, *k, s->threads, static_cast<size_t>(s->shared)));
  return blocks;
}

Result<std::string> fused_footprint(const DeviceKernel& a, int va, int pa, const DeviceKernel& b, int vb, int pb,
                                    CachePolicy cache) {
  auto s = shape_of(a, va, pa, b, vb, pb);
  if (!s) return s.status();
  auto k = kernel_for(*s, cache);
  if (!k) return k.status();
  cudaFuncAttributes attr{};
  CONCORD_CUDA(cudaFuncGetAttributes(&attr, *k));
  return std::to_string(s->threads) + " threads, " + std::to_string(attr.numRegs) + " registers per thread (cap " +
         std::to_string(s->register_cap) + "), " + std::to_string(attr.sharedSizeBytes) + " B static and " +
         std::to_string(s->shared) + " B dynamic shared, " + std::to_string(attr.localSizeBytes) + " B local, " +
         "max threads " + std::to_string(attr.maxThreadsPerBlock) + ", carveout " + std::to_string(attr.preferredShmemCarveout) +
         ", max dynamic shared " + std::to_string(attr.maxDynamicSharedSizeBytes) + ", cluster " +
         std::to_string(attr.requiredClusterWidth) + "x" + std::to_string(attr.requiredClusterHeight) + "x" +
         std::to_string(attr.requiredClusterDepth) + (attr.clusterDimMustBeSet ? " (must be set)" : "") + ", ptx " +
         std::to_string(attr.ptxVersion) + ", binary " + std::to_string(attr.binaryVersion);
}

}  // namespace concord::kernels
