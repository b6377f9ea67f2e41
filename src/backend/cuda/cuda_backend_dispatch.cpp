// The CUDA backend's dispatch path: control blocks, streams and launches, and the resizes, TLP
// changes, preemptions and progress reads of running dispatches.
#include "backend/cuda/cuda_backend.h"

#include "cuda/driver_api.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "backend/cuda/gpc_probe.h"
#include "kernels/device/fusion_compiler.h"

namespace concord::cuda {
namespace {

void set_bitmap(uint64_t (&bits)[device::kMaxControlSms / 64], const SmSet& sms) {
  const auto words = sms.words();
  for (size_t i = 0; i < std::size(bits); ++i) bits[i] = words[i];
}

void set_allowed(device::ElasticControl& c, const SmSet& sms) { set_bitmap(c.allowed, sms); }

}  // namespace

Result<int> CudaBackend::take_control(const BlockRange& range, const SmSet& sms, int tlp, const SmSet& tight_sms, int tight_tlp,
                                      int chunk, cudaStream_t stream) {
  if (free_controls_.empty()) return Status::failed_precondition("cuda: all " + std::to_string(kControlPool) + " control blocks in use");
  const int i = free_controls_.back();
  free_controls_.pop_back();
  device::ElasticControl* image = images_.get() + i;
  std::memset(image, 0, sizeof(*image));
  set_allowed(*image, sms);
  image->tlp = tlp;
  if (tight_tlp > 0) {
    set_bitmap(image->tight, tight_sms);
    image->tight_tlp = tight_tlp;
  }
  image->chunk = chunk;
  image->range_begin = range.begin;
  image->range_end = range.end;
  CONCORD_CUDA(cudaMemcpyAsync(controls_.get() + i, image, sizeof(*image), cudaMemcpyHostToDevice, stream));
  return i;
}

Status CudaBackend::write_control_field(int control, size_t offset, const void* data, size_t bytes, const Event& after) {
  // The control's upload runs on the dispatch's stream: order this write after it.
  CONCORD_CUDA(cudaStreamWaitEvent(control_stream_.get(), after.get(), 0));
  auto* base = reinterpret_cast<char*>(staging_.get());
  std::memcpy(base + offset, data, bytes);
  auto* dst = reinterpret_cast<char*>(controls_.get() + control) + offset;
  CONCORD_CUDA(cudaMemcpyAsync(dst, base + offset, bytes, cudaMemcpyHostToDevice, control_stream_.get()));
  // The staging buffer is reused by the next write: wait, bounded, for this one to land.
  return wait_stream(control_stream_.get(), options_.control_wait_s, "writing control block " + std::to_string(control));
}

Result<device::ElasticControl> CudaBackend::read_control(int control, const Event& after) const {
  CONCORD_CUDA(cudaStreamWaitEvent(control_stream_.get(), after.get(), 0));  // after the control's upload
  CONCORD_CUDA(cudaMemcpyAsync(staging_.get(), controls_.get() + control, sizeof(device::ElasticControl), cudaMemcpyDeviceToHost,
                               control_stream_.get()));
  CONCORD_RETURN_IF_ERROR(wait_stream(control_stream_.get(), options_.control_wait_s, "reading control block " + std::to_string(control)));
  return *staging_.get();
}

Result<cudaStream_t> CudaBackend::stream_for(const Running& r) {
  if (r.placement.form == LaunchForm::native && r.placement.sms.count() < spec_.sm_count) {
    if (!green_) return Status::unsupported("cuda: a native launch on part of the GPU needs green contexts, unavailable here (MPS?)");
    return green_->stream_for(r.placement.sms, r.tenant, cuda_priority(r.placement.priority));
  }
  return tenant_stream(r.tenant, r.placement.priority);
}

int CudaBackend::cuda_priority(int placement_priority) const {
  return placement_priority > kNormalStreamPriority ? greatest_priority_ : least_priority_;
}

Result<cudaStream_t> CudaBackend::tenant_stream(int tenant, int placement_priority) {
  const bool high = placement_priority > kNormalStreamPriority;
  const int key = tenant * 2 + (high ? 1 : 0);
  auto it = tenant_streams_.find(key);
  if (it == tenant_streams_.end()) {
    Stream s;
    CONCORD_RETURN_IF_ERROR(s.create(cuda_priority(placement_priority)));
    ranges_.name_tenant_stream(tenant, s.get(), high);
    it = tenant_streams_.emplace(key, std::move(s)).first;
  }
  return it->second.get();
}

Result<cudaStream_t> CudaBackend::helper_stream() {
  // A grow's grid stays resident for as long as its dispatch runs, so a helper stream that still
  // holds one would delay the next launch queued on it until that dispatch ends: take an idle
  // stream (round robin from the last one taken), and make a new one when all are busy.
  const size_t n = helper_streams_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (next_helper_ + i) % n;
    const cudaError_t q = cudaStreamQuery(helper_streams_[k].get());
    if (q == cudaSuccess) {
      next_helper_ = k + 1;
      return helper_streams_[k].get();
    }
    if (q != cudaErrorNotReady) CONCORD_CUDA(q);
  }
  Stream s;
  CONCORD_RETURN_IF_ERROR(s.create());
  helper_streams_.push_back(std::move(s));
  next_helper_ = 0;
  return helper_streams_.back().get();
}

Status CudaBackend::set_persist_window(cudaStream_t stream, const kernels::DeviceKernel* kernel) {
  cudaStreamAttrValue attr{};
  if (kernel != nullptr) {
    const auto it = spans_.find(kernel);
    if (it == spans_.end() || it->second.end <= it->second.begin) return Status::ok();  // no buffers of its own
    if (persisting_l2_bytes_ == 0) {
      int most = 0;
      CONCORD_CUDA(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device_));
      if (most <= 0) return Status::unsupported("cuda: l2_persist: this GPU has no persisting L2 carve-out");
      // The whole carve-out the device allows (an H100: 75% of L2). Under MPS the limit is the
      // server's (CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT) and this call fails.
      if (const cudaError_t e = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, static_cast<size_t>(most)); e != cudaSuccess) {
        return Status::unsupported(std::string("cuda: l2_persist: cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize): ") +
                                   cudaGetErrorName(e) + " (under MPS the server sets the carve-out)");
      }
      persisting_l2_bytes_ = static_cast<size_t>(most);
      int max_window = 0;
      CONCORD_CUDA(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device_));
      max_window_bytes_ = static_cast<size_t>(std::max(0, max_window));
    }
    const size_t bytes = std::min<size_t>(it->second.end - it->second.begin, max_window_bytes_);
    if (bytes == 0) return Status::ok();
    attr.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(it->second.begin);
    attr.accessPolicyWindow.num_bytes = bytes;
    // More bytes than the carve-out: a random share of them persists, so that they do not evict
    // each other (CUDA programming guide, L2 access management).
    attr.accessPolicyWindow.hitRatio = std::min(1.0f, static_cast<float>(persisting_l2_bytes_) / static_cast<float>(bytes));
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  }
  CONCORD_CUDA(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr));
  return Status::ok();
}

Status CudaBackend::launch(Running& r, cudaStream_t stream) {
  const TenantRanges::Scope range(ranges_, r.tenant, r.range_name);
  auto taken = take_event();
  if (!taken) return taken.status();
  Event end = std::move(*taken);
  const Part& a = r.parts[0];
  // The window is the stream's: set for this launch, cleared after it (a launch takes the
  // stream's attributes as they are when it is made).
  if (r.placement.l2_persist) CONCORD_RETURN_IF_ERROR(set_persist_window(stream, a.kernel));
  if (r.placement.form == LaunchForm::native) {
    CONCORD_RETURN_IF_ERROR(a.kernel->launch_standalone(a.variant, a.range, r.placement.cache, stream));
  } else if (r.parts.size() == 1) {
    CONCORD_RETURN_IF_ERROR(a.kernel->launch_elastic(a.variant, r.placement.cache, controls_.get() + a.control, r.grid, stream));
  } else {
    const Part& b = r.parts[1];
    CONCORD_RETURN_IF_ERROR(kernels::launch_fused(*a.kernel, a.variant, a.parts_per_block, controls_.get() + a.control,
                                                  *b.kernel, b.variant, b.parts_per_block, controls_.get() + b.control,
                                                  r.placement.cache, r.grid, stream));
  }
  if (r.placement.l2_persist) CONCORD_RETURN_IF_ERROR(set_persist_window(stream, nullptr));
  CONCORD_CUDA(cudaEventRecord(end.get(), stream));
  r.ends.push_back(std::move(end));
  return Status::ok();
}

Status CudaBackend::dispatch(const DispatchRequest& req) {
  if (req.parts.empty() || req.parts.size() > 2) return Status::invalid_argument("cuda: a dispatch has one or two parts");
  Running r;
  r.id = req.id;
  r.placement = req.placement;
  r.tenant = static_cast<int>(req.parts[0].tenant.value);
  r.label = "tenant " + std::to_string(req.parts[0].tenant.value) + " kernel '" + req.parts[0].kernel->name + "'";
  if (req.parts.size() == 2) {
    r.label += " fused with tenant " + std::to_string(req.parts[1].tenant.value) + " kernel '" + req.parts[1].kernel->name + "'";
  }
  r.label += " dispatch " + std::to_string(req.id.value);
  for (const auto& p : req.parts) {
    r.range_name += (r.range_name.empty() ? "" : " + ") + std::string("tenant ") + std::to_string(p.tenant.value) + ": " +
                    p.kernel->name;
  }
  for (const auto& p : req.parts) {
    auto k = kernel_for(*p.kernel, static_cast<int>(p.tenant.value));
    if (!k) return Status(k.status().code(), "cuda: " + r.label + ": " + k.status().message());
    r.parts.push_back(Part{*k, p.variant, p.range, p.parts_per_block, -1});
  }
  // Control blocks taken below go back to the pool on every error path.
  struct GiveBack {
    CudaBackend* b;
    Running* r;
    ~GiveBack() {
      if (!r) return;
      for (Part& p : r->parts) {
        if (p.control >= 0) b->free_controls_.push_back(std::exchange(p.control, -1));
      }
    }
  } give_back{this, &r};
  if (r.placement.form == LaunchForm::persistent) {
    Result<int> occupancy = r.parts.size() == 1
                                ? r.parts[0].kernel->elastic_occupancy(r.parts[0].variant)
                                : kernels::fused_occupancy(*r.parts[0].kernel, r.parts[0].variant, r.parts[0].parts_per_block,
                                                           *r.parts[1].kernel, r.parts[1].variant, r.parts[1].parts_per_block,
                                                           r.placement.cache);
    if (!occupancy) return Status(occupancy.status().code(), "cuda: " + r.label + ": " + occupancy.status().message());
    if (*occupancy == 0) return Status::unsupported("cuda: " + r.label + ": one block does not fit on an SM");
    const int tlp = r.placement.tlp > 0 ? std::min(r.placement.tlp, *occupancy) : *occupancy;
    // Enough blocks that every SM can reach its TLP wherever the hardware puts them; the rest
    // exit at once.
    r.grid = *occupancy * spec_.sm_count;
    r.tlp = tlp;
    if (r.placement.tight_tlp > 0) {
      r.tight_sms = r.placement.tight_sms;
      r.tight_tlp = std::min(r.placement.tight_tlp, *occupancy);
    }
  }
  auto stream = stream_for(r);
  if (!stream) return stream.status();
  if (r.placement.form == LaunchForm::persistent) {
    // Slots: TLP on every SM of the set, the tight limit on its tight SMs.
    const int tight_n = r.tight_tlp > 0 ? (r.tight_sms & r.placement.sms).count() : 0;
    const int64_t slots = static_cast<int64_t>(r.tlp) * (r.placement.sms.count() - tight_n) +
                          static_cast<int64_t>(r.tight_tlp) * tight_n;
    const int mean_tlp = static_cast<int>(std::max<int64_t>(1, slots / std::max(1, r.placement.sms.count())));
    for (Part& p : r.parts) {
      const double block_s = slot_block_seconds(p.kernel->spec(), p.variant, spec_, mean_tlp);
      auto c = take_control(p.range, r.placement.sms, r.tlp, r.tight_sms, r.tight_tlp,
                            chunk_for(p.range.size(), slots, mean_tlp, block_s), *stream);
      if (!c) return c.status();
      p.control = *c;
    }
  }
  if (req.after.valid()) {
    // Stream order behind another dispatch: wait on the GPU for its last end event (a no-op in
    // effect when it ran on this stream). Entries leave running_ only in advance(), on this thread.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& x) { return x.id == req.after; });
    if (it != running_.end() && !it->completing && !it->ends.empty()) {
      // On the predecessor's own stream (and no grow elsewhere) the stream already orders them;
      // else wait for every launch of it.
      if (it->stream != *stream || it->ends.size() != 1) {
        for (const Event& e : it->ends) CONCORD_CUDA(cudaStreamWaitEvent(*stream, e.get(), 0));
      }
      r.after = req.after;
    }
  }
  auto start = take_event();
  if (!start) return start.status();
  r.start = std::move(*start);
  r.stream = *stream;
  CONCORD_CUDA(cudaEventRecord(r.start.get(), *stream));
  r.range = ranges_.start(r.tenant, r.range_name);
  if (Status launched = launch(r, *stream); !launched) {
    ranges_.end(r.range);
    return Status(launched.code(), "cuda: " + r.label + ": " + launched.message());
  }
  give_back.r = nullptr;  // the controls now belong to the running dispatch (freed in advance())
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.push_back(std::move(r));
    ++active_;
    changes_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_one();
  return Status::ok();
}

// set_sm_set, set_tlp, preempt and progress run on the engine's thread, as advance() does (the
// only place entries leave running_), so the entry found stays put while they write its control
// blocks without the lock: the completion thread is never held up by a control-stream wait.

Status CudaBackend::set_sm_set(DispatchId id, const SmSet& sms) {
  auto found = find_running(id, "set_sm_set");
  if (!found) return found.status();
  Running& r = **found;
  if (r.placement.form != LaunchForm::persistent) return Status::unsupported("cuda: " + r.label + ": only persistent dispatches resize");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.completing) return Status::ok();  // already finished; its completion is on its way
  }
  device::ElasticControl words{};
  set_allowed(words, sms);
  for (const Part& p : r.parts) {
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, allowed), words.allowed,
                                                sizeof(words.allowed), r.start));
  }
  const bool grows = !sms.is_subset_of(r.placement.sms);
  std::lock_guard<std::mutex> lock(mu_);
  r.placement.sms = sms;
  if (grows && !r.completing) {
    // New SMs need new blocks: launch the same kernel again on the same control blocks.
    auto stream = helper_stream();
    if (!stream) return stream.status();
    CONCORD_CUDA(cudaStreamWaitEvent(*stream, r.start.get(), 0));  // after the control's upload
    CONCORD_RETURN_IF_ERROR(launch(r, *stream));
    changes_.fetch_add(1, std::memory_order_release);
  }
  return Status::ok();
}

Status CudaBackend::set_tlp(DispatchId id, int tlp, const SmSet& tight_sms, int tight_tlp) {
  auto found = find_running(id, "set_tlp");
  if (!found) return found.status();
  Running& r = **found;
  if (r.placement.form != LaunchForm::persistent) {
    return Status::unsupported("cuda: " + r.label + ": only persistent dispatches change their TLP");
  }
  if (r.placement.fusion) {
    // A fused kernel applies its limit at admission only (its parts do not leave between chunks).
    return Status::unsupported("cuda: " + r.label + ": a fused dispatch keeps the TLP it was launched with");
  }
  if (tlp < 0 || tight_tlp < 0) return Status::invalid_argument("cuda: TLP limits must be >= 0 (0: none)");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.completing) return Status::ok();  // already finished; its completion is on its way
  }
  // The launch's grid holds occupancy x SMs blocks: no limit above that can be reached.
  const int occupancy = r.grid / std::max(1, spec_.sm_count);
  const int limit = tlp > 0 ? std::min(tlp, occupancy) : occupancy;
  const int tight = tight_tlp > 0 ? std::min(tight_tlp, occupancy) : 0;
  // Grows where some SM may now hold more than before: a higher limit, or SMs leaving the tight set.
  const bool grows = limit > r.tlp || (r.tight_tlp > 0 && (tight == 0 || tight > r.tight_tlp ||
                                                            !r.tight_sms.is_subset_of(tight_sms)));
  device::ElasticControl words{};
  set_bitmap(words.tight, tight > 0 ? tight_sms : SmSet());
  words.tlp = limit;
  words.tight_tlp = tight;
  for (const Part& p : r.parts) {
    // Three small copies (bitmap, then the limits): a block admitted between them sees some old
    // and some new values, each of which was a valid limit.
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tight), words.tight,
                                                sizeof(words.tight), r.start));
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tlp), &words.tlp,
                                                sizeof(words.tlp), r.start));
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tight_tlp), &words.tight_tlp,
                                                sizeof(words.tight_tlp), r.start));
  }
  std::lock_guard<std::mutex> lock(mu_);
  r.tlp = limit;
  r.tight_sms = tight > 0 ? tight_sms : SmSet();
  r.tight_tlp = tight;
  r.placement.tlp = limit;
  r.placement.tight_sms = r.tight_sms;
  r.placement.tight_tlp = tight;
  if (grows && !r.completing) {
    // Blocks of the first grid that found their SM full have exited: new slots need new blocks,
    // launched on the same control blocks (admission counts them against the new limit).
    auto stream = helper_stream();
    if (!stream) return stream.status();
    CONCORD_CUDA(cudaStreamWaitEvent(*stream, r.start.get(), 0));
    CONCORD_RETURN_IF_ERROR(launch(r, *stream));
    changes_.fetch_add(1, std::memory_order_release);
  }
  return Status::ok();
}

Status CudaBackend::preempt(DispatchId id) {
  auto found = find_running(id, "preempt");
  if (!found) return found.status();
  Running& r = **found;
  if (r.placement.form != LaunchForm::persistent) return Status::unsupported("cuda: " + r.label + ": only persistent dispatches preempt");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.completing) return Status::ok();  // already finished
  }
  const int32_t one = 1;
  for (const Part& p : r.parts) {
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, preempt), &one, sizeof(one), r.start));
  }
  return Status::ok();
}

Result<std::vector<int64_t>> CudaBackend::progress(DispatchId id) const {
  const Running* r = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& x) { return x.id == id; });
    if (it == running_.end()) return Status::not_found("cuda: progress: no running dispatch " + std::to_string(id.value));
    if (it->result) return std::vector<int64_t>(it->result->blocks_done.begin(), it->result->blocks_done.end());
    r = &*it;
  }
  std::vector<int64_t> out;
  for (const Part& p : r->parts) {
    if (p.control < 0) {
      out.push_back(0);  // native launches have no progress counter
      continue;
    }
    auto c = read_control(p.control, r->start);
    if (!c) return c.status();
    out.push_back(static_cast<int64_t>(c->done));
  }
  return out;
}

}  // namespace concord::cuda
