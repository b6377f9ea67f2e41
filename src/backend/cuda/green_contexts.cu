#include "backend/cuda/green_contexts.h"

#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/driver_api.h"
#include "cuda/handles.h"

namespace concord::cuda {
namespace {

__global__ void probe_kernel(unsigned* seen) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0 && sm < kMaxSms) atomicOr(&seen[sm / 32], 1u << (sm % 32));
  // Stay resident a little so the blocks spread over every SM the stream may use.
  const long long until = clock64() + 20000;
  while (clock64() < until) {
  }
}

}  // namespace

Result<SmSet> probe_sms(cudaStream_t stream, int blocks) {
  DeviceBuffer<unsigned> seen;
  CONCORD_RETURN_IF_ERROR(seen.allocate(kMaxSms / 32));
  CONCORD_CUDA(cudaMemsetAsync(seen.get(), 0, seen.bytes(), stream));
  probe_kernel<<<blocks, 128, 0, stream>>>(seen.get());
  CONCORD_CUDA_LAUNCHED();
  std::vector<unsigned> host(kMaxSms / 32);
  CONCORD_CUDA(cudaMemcpyAsync(host.data(), seen.get(), seen.bytes(), cudaMemcpyDeviceToHost, stream));
  CONCORD_CUDA(cudaStreamSynchronize(stream));
  SmSet out;
  for (int sm = 0; sm < kMaxSms; ++sm) {
    if (host[static_cast<size_t>(sm / 32)] & (1u << (sm % 32))) out.add(sm);
  }
  return out;
}

GreenContextPool::~GreenContextPool() {
  for (auto& [key, s] : streams_) api_->stream_destroy(s);
  for (auto& [key, g] : contexts_) api_->green_ctx_destroy(g);
}

Result<std::shared_ptr<GreenContextPool>> GreenContextPool::shared(int device) {
  // Never destroyed: at exit the driver may already be gone, and the process's end frees it all.
  static std::mutex mu;
  static auto* pools = new std::map<int, std::shared_ptr<GreenContextPool>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = pools->find(device); it != pools->end()) return it->second;
  auto pool = create(device);
  if (!pool) return pool.status();
  std::shared_ptr<GreenContextPool> p = std::move(*pool);
  (*pools)[device] = p;
  return p;
}

int GreenContextPool::contexts_created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(contexts_.size());
}

Result<std::unique_ptr<GreenContextPool>> GreenContextPool::create(int device) {
  std::unique_ptr<GreenContextPool> pool(new GreenContextPool());
  auto api = driver_api();
  if (!api) return api.status();
  pool->api_ = *api;
  const DriverApi& cu = **api;
  CONCORD_CUDA(cudaSetDevice(device));
  CONCORD_CUDA(cudaFree(nullptr));  // the primary context first: green contexts retain it
  CONCORD_CU(cu.device_get(&pool->device_, device));
  CUdevResource all{};
  CONCORD_CU(cu.device_get_dev_resource(pool->device_, &all, CU_DEV_RESOURCE_TYPE_SM));
  unsigned count = 0;
  CONCORD_CU(cu.dev_sm_resource_split_by_count(nullptr, &count, &all, nullptr, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 2));
  std::vector<CUdevResource> groups(count);
  CUdevResource rest{};
  CONCORD_CU(cu.dev_sm_resource_split_by_count(groups.data(), &count, &all, &rest, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 2));
  groups.resize(count);
  if (rest.sm.smCount > 0) groups.push_back(rest);
  pool->resources_ = groups;
  // Probe each group alone.
  for (size_t g = 0; g < groups.size(); ++g) {
    Result<CUgreenCtx> made = pool->make_context({pool->resources_[g]});
    if (!made) return made.status();
    const CUgreenCtx ctx = *made;
    CUstream stream;
    Status st = driver_status(cu.green_ctx_stream_create(&stream, ctx, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate",
                              __FILE__, __LINE__);
    Result<SmSet> seen = st ? probe_sms(stream, 64) : Result<SmSet>(st);
    if (st) cu.stream_destroy(stream);
    cu.green_ctx_destroy(ctx);
    if (!seen) return seen.status();
    if (seen->count() != static_cast<int>(groups[g].sm.smCount)) {
      return Status::device_error("green-context group " + std::to_string(g) + " has " +
                                  std::to_string(groups[g].sm.smCount) + " SMs but the probe saw " + seen->to_string());
    }
    pool->group_sms_.push_back(*seen);
  }
  return std::move(pool);
}

SmSet GreenContextPool::cover(const SmSet& sms) const {
  SmSet out;
  for (const SmSet& g : group_sms_) {
    if (g.intersects(sms)) out = out | g;
  }
  return out;
}

Result<CUgreenCtx> GreenContextPool::context_for(const SmSet& cover_set) {
  const auto key = cover_set.words();
  if (auto it = contexts_.find(key); it != contexts_.end()) return it->second;
  std::vector<CUdevResource> parts;
  for (size_t g = 0; g < group_sms_.size(); ++g) {
    if (group_sms_[g].is_subset_of(cover_set)) parts.push_back(resources_[g]);
  }
  Result<CUgreenCtx> ctx = make_context(std::move(parts));
  if (!ctx) return ctx.status();
  contexts_[key] = *ctx;
  return *ctx;
}

Result<CUgreenCtx> GreenContextPool::make_context(std::vector<CUdevResource> parts) const {
  if (parts.empty()) return Status::invalid_argument("green context: empty SM set");
  CUdevResourceDesc desc;
  CONCORD_CU(api_->dev_resource_generate_desc(&desc, parts.data(), static_cast<unsigned>(parts.size())));
  CUgreenCtx ctx;
  CONCORD_CU(api_->green_ctx_create(&ctx, desc, device_, CU_GREEN_CTX_DEFAULT_STREAM));
  return ctx;
}

Result<cudaStream_t> GreenContextPool::stream_for(const SmSet& sms, int owner, int priority) {
  const SmSet c = cover(sms);
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_tuple(c.words(), owner, priority);
  if (auto it = streams_.find(key); it != streams_.end()) return static_cast<cudaStream_t>(it->second);
  auto ctx = context_for(c);
  if (!ctx) return ctx.status();
  CUstream stream;
  CONCORD_CU(api_->green_ctx_stream_create(&stream, *ctx, CU_STREAM_NON_BLOCKING, priority));
  streams_[key] = stream;
  return static_cast<cudaStream_t>(stream);
}

}  // namespace concord::cuda
