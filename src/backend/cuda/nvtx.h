// NVTX ranges per tenant, so that Nsight Systems shows the story the Chrome trace tells: a range
// from each dispatch to its completion ("tenant 2: hotspot", category "tenant 2", one colour per
// tenant) and, around each launch call, a pushed range that Nsight Systems projects onto the
// kernels launched inside it; tenants' streams carry their names. NVTX 3 is header-only (from the
// CUDA toolkit) and costs a pointer test per call when no tool is attached.
#pragma once

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <array>
#include <cstdint>
#include <string>

namespace concord::cuda {

class TenantRanges {
 public:
  using RangeId = nvtxRangeId_t;

  // One domain, "concord", for the process (backends come and go; the domain stays).
  TenantRanges() : domain_(process_domain()) {}

  // Names `tenant`'s category and `stream` after the tenant.
  void name_tenant_stream(int tenant, cudaStream_t stream, bool high_priority) {
    const std::string name = "tenant " + std::to_string(tenant);
    nvtxDomainNameCategoryA(domain_, category(tenant), name.c_str());
    nvtxNameCudaStreamA(stream, (name + (high_priority ? " (high priority)" : "")).c_str());
  }
  // A range that may end on another thread (a dispatch: from its launch to its completion).
  RangeId start(int tenant, const std::string& message) {
    const nvtxEventAttributes_t a = attributes(tenant, message);
    return nvtxDomainRangeStartEx(domain_, &a);
  }
  void end(RangeId id) { nvtxDomainRangeEnd(domain_, id); }

  // A range pushed for the current scope on this thread (a launch call).
  class Scope {
   public:
    Scope(TenantRanges& ranges, int tenant, const std::string& message) : domain_(ranges.domain_) {
      const nvtxEventAttributes_t a = attributes(tenant, message);
      nvtxDomainRangePushEx(domain_, &a);
    }
    ~Scope() { nvtxDomainRangePop(domain_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    nvtxDomainHandle_t domain_;
  };

 private:
  static nvtxDomainHandle_t process_domain() {
    static const nvtxDomainHandle_t domain = nvtxDomainCreateA("concord");
    return domain;
  }
  // Category 0 means none: tenant t is category t + 1.
  static uint32_t category(int tenant) { return static_cast<uint32_t>(tenant) + 1; }
  static nvtxEventAttributes_t attributes(int tenant, const std::string& message) {
    // Eight distinguishable colours (ARGB), repeating beyond eight tenants.
    static constexpr std::array<uint32_t, 8> kColours = {0xff1f77b4, 0xffff7f0e, 0xff2ca02c, 0xffd62728,
                                                         0xff9467bd, 0xff8c564b, 0xffe377c2, 0xff17becf};
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = category(tenant);
    a.colorType = NVTX_COLOR_ARGB;
    a.color = kColours[static_cast<size_t>(tenant) % kColours.size()];
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message.c_str();
    return a;
  }

  nvtxDomainHandle_t domain_;
};

}  // namespace concord::cuda
