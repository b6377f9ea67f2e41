#include "intercept/green_sets.h"

#include <span>
#include <string>
#include <utility>

#include "intercept/green_context.h"
#include "intercept/probe_ptx.h"

namespace concord::intercept {

Result<std::unique_ptr<GreenSets>> GreenSets::create(const RealDriver& driver, CUdevice device) {
  if (!driver.has_green_contexts()) return Status::unsupported("green contexts: this driver lacks the green-context API");
  std::unique_ptr<GreenSets> sets(new GreenSets(driver, device));
  CUdevResource all{};
  CONCORD_INTERCEPT_CU(driver.device_get_dev_resource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
  unsigned count = 0;
  CONCORD_INTERCEPT_CU(driver.dev_sm_resource_split_by_count(nullptr, &count, &all, nullptr,
                                                             CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 2));
  std::vector<CUdevResource> groups(count);
  CUdevResource rest{};
  CONCORD_INTERCEPT_CU(driver.dev_sm_resource_split_by_count(groups.data(), &count, &all, &rest,
                                                             CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 2));
  groups.resize(count);
  if (rest.sm.smCount > 0) groups.push_back(rest);
  sets->resources_ = groups;

  CUlibrary raw_library = nullptr;
  CONCORD_INTERCEPT_CU(driver.library_load_data(&raw_library, kSmProbePtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  OwnedLibrary library(&driver, raw_library);
  CUkernel kernel = nullptr;
  CONCORD_INTERCEPT_CU(driver.library_get_kernel(&kernel, library.get(), kSmProbeKernel));
  for (size_t g = 0; g < groups.size(); ++g) {
    Result<OwnedGreenCtx> ctx = make_green_context(driver, device, std::span(&sets->resources_[g], 1));
    if (!ctx) return ctx.status();
    CUstream raw_stream = nullptr;
    CONCORD_INTERCEPT_CU(driver.green_ctx_stream_create(&raw_stream, ctx->get(), CU_STREAM_NON_BLOCKING, 0));
    OwnedStream stream(&driver, raw_stream);
    auto seen = sets->probe(stream.get(), kernel);
    if (!seen) return seen.status();
    if (seen->count() != static_cast<int>(groups[g].sm.smCount)) {
      return Status::device_error("green-context group " + std::to_string(g) + " has " +
                                  std::to_string(groups[g].sm.smCount) + " SMs but the probe saw " + seen->to_string());
    }
    // Under MPS a client's green contexts confine a kernel to as many SMs as the group has, but
    // not to the group's own SMs (measured on an H200 with driver 580: the groups' probes saw the
    // same few SMs), so placement by SM is not possible there.
    for (size_t h = 0; h < sets->group_sms_.size(); ++h) {
      if (sets->group_sms_[h].intersects(*seen)) {
        return Status::unsupported("green-context groups " + std::to_string(h) + " and " + std::to_string(g) +
                                   " ran on the same SMs (" + (sets->group_sms_[h] & *seen).to_string() +
                                   "): green contexts do not place work by SM here (under MPS?)");
      }
    }
    sets->group_sms_.push_back(*seen);
  }
  return sets;
}

Result<SmSet> GreenSets::probe(CUstream stream, CUkernel kernel) {
  constexpr size_t kWords = kMaxSms / 32;
  CUdeviceptr raw = 0;
  CONCORD_INTERCEPT_CU(driver_.get<PFN_cuMemAlloc_v3020>(Entry::MemAlloc_v2)(&raw, kWords * sizeof(unsigned)));
  OwnedDeviceMemory seen(&driver_, raw);
  // Everything on the probe's own non-blocking stream: a legacy-stream copy or memset would order
  // itself against the application's blocking streams, and break a capture in progress on one.
  CONCORD_INTERCEPT_CU(driver_.memset_d32_async(seen.get(), 0, kWords, stream));
  CUdeviceptr seen_arg = seen.get();
  long long spin = 20000;
  void* params[] = {&seen_arg, &spin};
  CONCORD_INTERCEPT_CU(driver_.get<PFN_cuLaunchKernel_v4000>(Entry::LaunchKernel)(
      reinterpret_cast<CUfunction>(kernel), 64, 1, 1, 128, 1, 1, 0, stream, params, nullptr));
  unsigned host[kWords] = {};
  CONCORD_INTERCEPT_CU(driver_.memcpy_dtoh_async(host, seen.get(), sizeof(host), stream));
  CONCORD_INTERCEPT_CU(driver_.get<PFN_cuStreamSynchronize_v2000>(Entry::StreamSynchronize)(stream));
  SmSet out;
  for (int sm = 0; sm < kMaxSms; ++sm) {
    if (host[static_cast<size_t>(sm / 32)] & (1u << (sm % 32))) out.add(sm);
  }
  return out;
}

SmSet GreenSets::cover(const SmSet& sms) const {
  SmSet out;
  for (const SmSet& g : group_sms_) {
    if (g.intersects(sms)) out = out | g;
  }
  return out;
}

Status GreenSets::prepare(uint32_t handle, const SmSet& sms) {
  if (handle == 0) return Status::invalid_argument("green context: SM-set handle 0 is the whole GPU and needs none");
  if (sms.empty()) return Status::invalid_argument("green context: SM set " + std::to_string(handle) + " is empty");
  SmSet device_sms;
  for (const SmSet& g : group_sms_) device_sms = device_sms | g;
  if (!sms.is_subset_of(device_sms)) {
    return Status::invalid_argument("green context: SM set " + std::to_string(handle) + " (" + sms.to_string() +
                                    ") names SMs the device lacks: " + sms.minus(device_sms).to_string());
  }
  const SmSet c = cover(sms);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(c.words());
  if (it == contexts_.end()) {
    std::vector<CUdevResource> parts;
    for (size_t g = 0; g < group_sms_.size(); ++g) {
      if (group_sms_[g].is_subset_of(c)) parts.push_back(resources_[g]);
    }
    Result<OwnedGreenCtx> made = make_green_context(driver_, device_, parts);
    if (!made) return made.status();
    it = contexts_.emplace(c.words(), std::make_shared<OwnedGreenCtx>(std::move(*made))).first;
  }
  handles_[handle] = Prepared{c, it->second};
  return Status::ok();
}

Result<CUstream> GreenSets::stream(uint32_t handle, uint64_t owner, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  auto h = handles_.find(handle);
  if (h == handles_.end()) return Status::not_found("SM set " + std::to_string(handle) + " was not announced");
  const auto key = std::make_tuple(h->second.cover.words(), owner, priority);
  if (auto it = streams_.find(key); it != streams_.end()) return it->second.get();
  CUstream raw = nullptr;
  CONCORD_INTERCEPT_CU(driver_.green_ctx_stream_create(&raw, h->second.context->get(), CU_STREAM_NON_BLOCKING, priority));
  return streams_.emplace(key, OwnedStream(&driver_, raw)).first->second.get();
}

SmSet GreenSets::cover_of(uint32_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(handle);
  return it == handles_.end() ? SmSet() : it->second.cover;
}

}  // namespace concord::intercept
