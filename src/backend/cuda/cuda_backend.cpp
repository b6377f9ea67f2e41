#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unordered_set>


namespace concord::cuda {

namespace {

constexpr int kControlPool = 1024;
constexpr int kHelperStreams = 8;
// A non-negative integer from the environment, or `fallback` (a bad value is reported).
int env_int(const char* name, int fallback, int max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > max) {
    std::fprintf(stderr, "concord: %s='%s' is not an integer in 0..%d; using %d\n", name, v, max, fallback);
    return fallback;
  }
  return static_cast<int>(n);
}

void set_bitmap(uint64_t (&bits)[device::kMaxControlSms / 64], const SmSet& sms) {
  const auto words = sms.words();
  for (size_t i = 0; i < std::size(bits); ++i) bits[i] = words[i];
}

void set_allowed(device::ElasticControl& c, const SmSet& sms) { set_bitmap(c.allowed, sms); }

}  // namespace

CudaBackendOptions CudaBackendOptions::from_env() {
  CudaBackendOptions o;
  o.sweep_pause_us = env_int("CONCORD_CUDA_SWEEP_PAUSE_US", o.sweep_pause_us, 100000);
  return o;
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device, uint64_t seed, CudaBackendOptions options) {
  // Load every kernel at start so the first launch of each is not charged for module loading.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->seed_ = seed;
  b->options_ = options;
  int count = 0;
  CONCORD_CUDA(cudaGetDeviceCount(&count));
  if (device >= count) return Status::not_found("no CUDA device " + std::to_string(device));
  CONCORD_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CONCORD_CUDA(cudaGetDeviceProperties(&prop, device));
  const std::string name = prop.name;
  // Peaks (bandwidth, FLOP/s) from the built-in spec of the model; limits and topology measured.
  b->spec_ = name.find("H200") != std::string::npos ? h200_spec() : h100_sxm_spec();
  b->spec_.name = name;
  b->spec_.sm_count = prop.multiProcessorCount;
  b->spec_.l2_bytes = prop.l2CacheSize;
  b->spec_.sm.max_threads = prop.maxThreadsPerMultiProcessor;
  b->spec_.sm.max_registers = prop.regsPerMultiprocessor;
  b->spec_.sm.max_shared_bytes = static_cast<int>(prop.sharedMemPerMultiprocessor);
  b->spec_.sm.max_blocks = prop.maxBlocksPerMultiProcessor;
  // Green contexts give native launches their SM sets and tell the topology (SM -> TPC). An MPS
  // client cannot split the GPU into green contexts (the probe sees another SM numbering); it runs
  // without them: whole-GPU native launches and %smid-filtered persistent launches still work.
  auto probe = [&]() -> Status {
    auto pool = GreenContextPool::shared(device);
    if (!pool) return pool.status();
    b->green_ = *pool;
    b->spec_.tpc_of_sm.assign(static_cast<size_t>(b->spec_.sm_count), -1);
    b->spec_.gpc_of_sm.assign(static_cast<size_t>(b->spec_.sm_count), 0);
    const auto& groups = b->green_->groups();
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int sm : groups[g].ids()) {
        if (sm >= b->spec_.sm_count) continue;
        b->spec_.tpc_of_sm[static_cast<size_t>(sm)] = static_cast<int>(g);
        // GPCs are not visible through green contexts: nominal, 8 GPCs over the groups in order.
        b->spec_.gpc_of_sm[static_cast<size_t>(sm)] = static_cast<int>(g * 8 / groups.size());
      }
    }
    for (int sm = 0; sm < b->spec_.sm_count; ++sm) {
      if (b->spec_.tpc_of_sm[static_cast<size_t>(sm)] < 0) {
        return Status::device_error("topology probe: SM " + std::to_string(sm) + " is in no green-context group");
      }
    }
    return Status::ok();
  };
  if (Status s = probe(); !s) {
    const char* mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    std::fprintf(stderr, "concord: cuda: no green contexts (%s)%s; native launches run on the whole GPU only\n",
                 s.message().c_str(), mps ? " under MPS" : "");
    b->green_.reset();
    const int tpcs = (b->spec_.sm_count + 1) / 2;
    b->spec_.tpc_of_sm.resize(static_cast<size_t>(b->spec_.sm_count));
    b->spec_.gpc_of_sm.resize(static_cast<size_t>(b->spec_.sm_count));
    for (int sm = 0; sm < b->spec_.sm_count; ++sm) {
      b->spec_.tpc_of_sm[static_cast<size_t>(sm)] = sm / 2;
      b->spec_.gpc_of_sm[static_cast<size_t>(sm)] = (sm / 2) * 8 / tpcs;
    }
  }
  CONCORD_RETURN_IF_ERROR(b->spec_.validate());
  CONCORD_RETURN_IF_ERROR(b->control_stream_.create());
  CONCORD_RETURN_IF_ERROR(b->controls_.allocate(kControlPool));
  for (int i = kControlPool - 1; i >= 0; --i) b->free_controls_.push_back(i);
  CONCORD_RETURN_IF_ERROR(b->staging_.allocate(1));
  // One pinned host image per control block: a launch uploads its control on its own stream,
  // ordered before the kernel, with no host wait; the image is not reused until the control is
  // free again (after the dispatch completed).
  CONCORD_RETURN_IF_ERROR(b->images_.allocate(kControlPool));
  for (int i = 0; i < kHelperStreams; ++i) {
    Stream s;
    CONCORD_RETURN_IF_ERROR(s.create());
    b->helper_streams_.push_back(std::move(s));
  }
  CONCORD_RETURN_IF_ERROR(b->origin_.create());
  CONCORD_CUDA(cudaEventRecord(b->origin_.get(), b->control_stream_.get()));
  CONCORD_CUDA(cudaEventSynchronize(b->origin_.get()));
  b->wall_origin_ = std::chrono::steady_clock::now();
  b->device_ = device;
  CONCORD_RETURN_IF_ERROR(b->completer_stream_.create());
  CONCORD_RETURN_IF_ERROR(b->completer_done_.allocate(1));
  b->completer_ = std::thread([p = b.get()] { p->completion_loop(); });
  return b;
}

CudaBackend::~CudaBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
  cudaDeviceSynchronize();  // nothing may still write into the pinned buffers freed next
}

Capabilities CudaBackend::capabilities(const KernelSpec& kernel) const {
  Capabilities c;
  c.l2_evict_first = true;  // elastic: evict-first loads; opaque: a streaming access-policy window
  if (!kernel.elastic) return c;
  c.persistent_form = c.exact_sm_sets = c.tlp = c.split_range = c.resize = c.preempt = true;
  c.fusion = true;  // for instantiated pairs; dispatch refuses others
  c.l1_bypass = true;
  c.block_variants = true;
  return c;
}

Result<kernels::DeviceKernel*> CudaBackend::kernel_for(const KernelSpec& spec) {
  const std::string key = std::to_string(reinterpret_cast<uintptr_t>(&spec));
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second.get();
  auto k = kernels::make_device_kernel(spec);
  if (!k) return k.status();
  CONCORD_RETURN_IF_ERROR((*k)->prepare(seed_ + kernels_.size()));
  CONCORD_CUDA(cudaDeviceSynchronize());
  auto* raw = k->get();
  kernels_[key] = std::move(*k);
  return raw;
}

Status CudaBackend::prepare_tenant(TenantId tenant, const std::vector<const KernelSpec*>& kernels) {
  // The tenant's stream now: created at its first dispatch (every task's, in bench/raise), it held
  // that dispatch back; on the H200 a second task started in one scheduling call went from
  // 50-116 us after the first to 11-20 us (docs/cuda_backend.md).
  auto stream = tenant_stream(static_cast<int>(tenant.value), 0);
  if (!stream) return stream.status();
  for (const KernelSpec* spec : kernels) {
    auto k = kernel_for(*spec);
    if (!k) return k.status();
    // A library's first call loads its kernels (cuBLAS: about 0.1 s): pay that now, not mid-run.
    if (!spec->elastic) {
      const BlockRange whole{0, spec->variant(0).logical_blocks};
      CONCORD_RETURN_IF_ERROR((*k)->launch_standalone(0, whole, CachePolicy::normal, control_stream_.get()));
    }
  }
  CONCORD_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

Status CudaBackend::prepare_sm_set(const SmSet& sms, TenantId tenant) {
  if (sms.count() >= spec_.sm_count) return Status::ok();  // the whole GPU needs no context
  if (!green_) return Status::unsupported("cuda: SM partitions for native launches need green contexts, unavailable here (MPS?)");
  auto stream = green_->stream_for(sms, static_cast<int>(tenant.value), 0);
  if (!stream) return stream.status();
  // One launch of each prepared kernel loads its module into the new context now, not mid-run:
  // one logical block of an elastic kernel, the whole call of a library kernel.
  for (auto& [key, k] : kernels_) {
    const KernelVariant& v = k->spec().variant(k->spec().default_variant);
    const BlockRange warm{0, k->spec().elastic ? 1 : v.logical_blocks};
    CONCORD_RETURN_IF_ERROR(k->launch_standalone(k->spec().default_variant, warm, CachePolicy::normal, *stream));
  }
  CONCORD_CUDA(cudaStreamSynchronize(*stream));
  return Status::ok();
}

Status CudaBackend::start_clock() {
  CONCORD_CUDA(cudaDeviceSynchronize());
  CONCORD_CUDA(cudaEventRecord(origin_.get(), control_stream_.get()));
  CONCORD_CUDA(cudaEventSynchronize(origin_.get()));
  wall_origin_ = std::chrono::steady_clock::now();
  return Status::ok();
}

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
  CONCORD_CUDA(cudaStreamSynchronize(control_stream_.get()));
  return Status::ok();
}

Result<device::ElasticControl> CudaBackend::read_control(int control, const Event& after) const {
  CONCORD_CUDA(cudaStreamWaitEvent(control_stream_.get(), after.get(), 0));  // after the control's upload
  CONCORD_CUDA(cudaMemcpyAsync(staging_.get(), controls_.get() + control, sizeof(device::ElasticControl), cudaMemcpyDeviceToHost,
                               control_stream_.get()));
  CONCORD_CUDA(cudaStreamSynchronize(control_stream_.get()));
  return *staging_.get();
}

Result<cudaStream_t> CudaBackend::stream_for(const Running& r) {
  const int priority = r.placement.priority > 0 ? -5 : 0;  // lower number = higher CUDA priority
  if (r.placement.form == LaunchForm::native && r.placement.sms.count() < spec_.sm_count) {
    if (!green_) return Status::unsupported("cuda: a native launch on part of the GPU needs green contexts, unavailable here (MPS?)");
    return green_->stream_for(r.placement.sms, r.tenant, priority);
  }
  return tenant_stream(r.tenant, priority);
}

Result<cudaStream_t> CudaBackend::tenant_stream(int tenant, int priority) {
  const int key = tenant * 2 + (priority < 0 ? 1 : 0);
  auto it = tenant_streams_.find(key);
  if (it == tenant_streams_.end()) {
    Stream s;
    CONCORD_RETURN_IF_ERROR(s.create(priority));
    it = tenant_streams_.emplace(key, std::move(s)).first;
  }
  return it->second.get();
}

Result<cudaStream_t> CudaBackend::helper_stream() {
  cudaStream_t s = helper_streams_[next_helper_ % helper_streams_.size()].get();
  ++next_helper_;
  return s;
}

Status CudaBackend::launch(Running& r, cudaStream_t stream) {
  auto taken = take_event();
  if (!taken) return taken.status();
  Event end = std::move(*taken);
  const Part& a = r.parts[0];
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
  for (const auto& p : req.parts) {
    auto k = kernel_for(*p.kernel);
    if (!k) return k.status();
    r.parts.push_back(Part{*k, p.variant, p.range, p.parts_per_block, -1});
  }
  if (r.placement.form == LaunchForm::persistent) {
    Result<int> occupancy = r.parts.size() == 1
                                ? r.parts[0].kernel->elastic_occupancy(r.parts[0].variant)
                                : kernels::fused_occupancy(*r.parts[0].kernel, r.parts[0].variant, r.parts[0].parts_per_block,
                                                           *r.parts[1].kernel, r.parts[1].variant, r.parts[1].parts_per_block);
    if (!occupancy) return occupancy.status();
    if (*occupancy == 0) return Status::unsupported("cuda: a block of this dispatch does not fit on an SM");
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
  CONCORD_RETURN_IF_ERROR(launch(r, *stream));
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.push_back(std::move(r));
    ++active_;
    changes_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_one();
  return Status::ok();
}

Status CudaBackend::set_sm_set(DispatchId id, const SmSet& sms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("cuda: no running dispatch " + std::to_string(id.value));
  if (it->placement.form != LaunchForm::persistent) return Status::unsupported("cuda: only persistent dispatches resize");
  if (it->completing) return Status::ok();  // already finished; its completion is on its way
  device::ElasticControl words{};
  set_allowed(words, sms);
  for (const Part& p : it->parts) {
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, allowed), words.allowed,
                                                sizeof(words.allowed), it->start));
  }
  const bool grows = !sms.is_subset_of(it->placement.sms);
  it->placement.sms = sms;
  if (grows) {
    // New SMs need new blocks: launch the same kernel again on the same control blocks.
    auto stream = helper_stream();
    if (!stream) return stream.status();
    CONCORD_CUDA(cudaStreamWaitEvent(*stream, it->start.get(), 0));  // after the control's upload
    CONCORD_RETURN_IF_ERROR(launch(*it, *stream));
    changes_.fetch_add(1, std::memory_order_release);
  }
  return Status::ok();
}

Status CudaBackend::set_tlp(DispatchId id, int tlp, const SmSet& tight_sms, int tight_tlp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("cuda: no running dispatch " + std::to_string(id.value));
  if (it->placement.form != LaunchForm::persistent) return Status::unsupported("cuda: only persistent dispatches change their TLP");
  if (tlp < 0 || tight_tlp < 0) return Status::invalid_argument("cuda: TLP limits must be >= 0 (0: none)");
  if (it->completing) return Status::ok();  // already finished; its completion is on its way
  // The launch's grid holds occupancy x SMs blocks: no limit above that can be reached.
  const int occupancy = it->grid / std::max(1, spec_.sm_count);
  const int limit = tlp > 0 ? std::min(tlp, occupancy) : occupancy;
  const int tight = tight_tlp > 0 ? std::min(tight_tlp, occupancy) : 0;
  // Grows where some SM may now hold more than before: a higher limit, or SMs leaving the tight set.
  const bool grows = limit > it->tlp || (it->tight_tlp > 0 && (tight == 0 || tight > it->tight_tlp ||
                                                                !it->tight_sms.is_subset_of(tight_sms)));
  device::ElasticControl words{};
  set_bitmap(words.tight, tight > 0 ? tight_sms : SmSet());
  words.tlp = limit;
  words.tight_tlp = tight;
  for (const Part& p : it->parts) {
    // Three small copies (bitmap, then the limits): a block admitted between them sees some old
    // and some new values, each of which was a valid limit.
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tight), words.tight,
                                                sizeof(words.tight), it->start));
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tlp), &words.tlp,
                                                sizeof(words.tlp), it->start));
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, tight_tlp), &words.tight_tlp,
                                                sizeof(words.tight_tlp), it->start));
  }
  it->tlp = limit;
  it->tight_sms = tight > 0 ? tight_sms : SmSet();
  it->tight_tlp = tight;
  it->placement.tlp = limit;
  it->placement.tight_sms = it->tight_sms;
  it->placement.tight_tlp = tight;
  if (grows) {
    // Blocks of the first grid that found their SM full have exited: new slots need new blocks,
    // launched on the same control blocks (admission counts them against the new limit).
    auto stream = helper_stream();
    if (!stream) return stream.status();
    CONCORD_CUDA(cudaStreamWaitEvent(*stream, it->start.get(), 0));
    CONCORD_RETURN_IF_ERROR(launch(*it, *stream));
    changes_.fetch_add(1, std::memory_order_release);
  }
  return Status::ok();
}

Status CudaBackend::preempt(DispatchId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("cuda: no running dispatch " + std::to_string(id.value));
  if (it->placement.form != LaunchForm::persistent) return Status::unsupported("cuda: only persistent dispatches preempt");
  if (it->completing) return Status::ok();  // already finished
  const int32_t one = 1;
  for (const Part& p : it->parts) {
    CONCORD_RETURN_IF_ERROR(write_control_field(p.control, offsetof(device::ElasticControl, preempt), &one, sizeof(one), it->start));
  }
  return Status::ok();
}

Result<std::vector<int64_t>> CudaBackend::progress(DispatchId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("cuda: no running dispatch " + std::to_string(id.value));
  if (it->result) return it->result->blocks_done;
  std::vector<int64_t> out;
  for (const Part& p : it->parts) {
    if (p.control < 0) {
      out.push_back(0);  // native launches have no progress counter
      continue;
    }
    auto c = read_control(p.control, it->start);
    if (!c) return c.status();
    out.push_back(static_cast<int64_t>(c->done));
  }
  return out;
}

Seconds CudaBackend::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_origin_).count();
}

Result<Event> CudaBackend::take_event() {
  if (!event_pool_.empty()) {
    Event e = std::move(event_pool_.back());
    event_pool_.pop_back();
    return e;
  }
  Event e;
  CONCORD_RETURN_IF_ERROR(e.create());
  return e;
}

void CudaBackend::recycle(Running& r) {
  // Delivered: its events have completed and nothing reads them any more.
  if (r.start.get()) event_pool_.push_back(std::move(r.start));
  for (Event& e : r.ends) event_pool_.push_back(std::move(e));
  r.ends.clear();
}

Seconds CudaBackend::event_time(const Event& e) const {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, origin_.get(), e.get()) != cudaSuccess) return now();
  return ms * 1e-3;
}

Result<Completion> CudaBackend::build_completion(const Running& r) {
  Completion c;
  c.dispatch = r.id;
  c.start = event_time(r.start);
  c.end = c.start;
  for (const Event& e : r.ends) c.end = std::max(c.end, event_time(e));
  for (const Part& p : r.parts) {
    int64_t finished = p.range.size();
    if (p.control >= 0) {
      // The kernels are done (their end events completed): read the final counter.
      CONCORD_CUDA(cudaMemcpyAsync(completer_done_.get(), &(controls_.get() + p.control)->done, sizeof(uint64_t),
                                   cudaMemcpyDeviceToHost, completer_stream_.get()));
      CONCORD_CUDA(cudaStreamSynchronize(completer_stream_.get()));
      finished = std::min<int64_t>(static_cast<int64_t>(*completer_done_.get()), p.range.size());
    }
    if (finished < p.range.size()) c.preempted = true;
    c.blocks_done.push_back(finished);
  }
  return c;
}

void CudaBackend::completion_loop() {
  if (cudaSetDevice(device_) != cudaSuccess) return;  // create() already set this device up
  // What a sweep looks at: a pending dispatch and its end events, as of the last snapshot. The
  // snapshot is taken again only when dispatches came or grew (changes_) or this thread found
  // some finished, so a sweep that finds nothing takes no lock.
  struct Watch {
    Running* r;
    std::vector<cudaEvent_t> ends;
  };
  std::vector<Watch> watch;
  std::unordered_set<int64_t> pending;  // per snapshot: dispatches not found finished yet (reused)
  std::vector<std::pair<Watch*, Status>> finished;
  bool stale = true;
  uint64_t snapshot_changes = 0;
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (stale || changes_.load(std::memory_order_acquire) != snapshot_changes) {
      // Snapshot the pending dispatches under the lock, query them without it, so the engine's
      // dispatch, resize and preempt never wait for a sweep.
      lock.lock();
      snapshot_changes = changes_.load(std::memory_order_acquire);
      watch.clear();
      pending.clear();
      for (Running& r : running_) {
        if (r.completing) continue;
        pending.insert(r.id.value);
        // Queued behind a dispatch still pending: it cannot have finished, so its events are not
        // queried (a task's whole chain would otherwise be polled on every sweep).
        if (r.after.valid() && pending.count(r.after.value)) continue;
        Watch w{&r, {}};
        for (const Event& e : r.ends) w.ends.push_back(e.get());
        watch.push_back(std::move(w));
      }
      if (watch.empty()) {
        work_cv_.wait(lock, [&] {
          return stop_.load() || std::any_of(running_.begin(), running_.end(), [](const Running& x) { return !x.completing; });
        });
        lock.unlock();
        continue;  // stale stays true: snapshot again
      }
      lock.unlock();
      stale = false;
    }
    finished.clear();
    for (Watch& w : watch) {
      Status failed;
      bool done = true;
      for (cudaEvent_t e : w.ends) {
        const cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) {
          done = false;
          break;
        }
        if (q != cudaSuccess) {
          failed = Status::device_error(std::string("cuda: dispatch ") + std::to_string(w.r->id.value) +
                                        " failed: " + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) + ")");
          break;
        }
      }
      if (done || !failed.is_ok()) finished.emplace_back(&w, failed);
    }
    if (finished.empty()) {
      // Nothing finished: pause a few microseconds before the next sweep. Back-to-back event
      // queries contend with the engine thread's launches for the driver (measured: 15-54 us a
      // dispatch on the H200 while this loop spun on yield() over queued chains).
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.sweep_pause_us);
      while (std::chrono::steady_clock::now() < until && !stop_.load(std::memory_order_relaxed)) std::this_thread::yield();
      continue;
    }
    stale = true;
    lock.lock();
    for (auto& [w, failed] : finished) {
      // A grow launched after the snapshot adds an end event: not finished yet.
      if (w->r->ends.size() != w->ends.size()) continue;
      // A queued dispatch completes after the one it waited for (whose end event may have turned
      // ready only after this sweep queried it): never before it. In list order, a predecessor
      // found finished in this sweep is marked first.
      if (w->r->after.valid() && failed.is_ok()) {
        const DispatchId before = w->r->after;
        auto p = std::find_if(running_.begin(), running_.end(), [&](const Running& x) { return x.id == before; });
        if (p != running_.end() && !p->completing) continue;
      }
      w->r->completing = true;
    }
    lock.unlock();
    for (auto& [w, failed] : finished) {
      if (!w->r->completing) continue;
      // Only advance() erases entries, and only those with a result: the entry stays put.
      Result<Completion> c = failed.is_ok() ? build_completion(*w->r) : Result<Completion>(failed);
      lock.lock();
      if (c) {
        w->r->result = std::move(*c);
      } else {
        w->r->error = c.status();
      }
      ++completed_;
      lock.unlock();
    }
  }
}

Result<std::vector<Completion>> CudaBackend::advance(Seconds until) {
  std::vector<Completion> out;
  while (true) {
    if (completed_.load() > 0) {
      Status failed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = running_.begin(); it != running_.end();) {
          if (!it->result && it->error.is_ok()) {
            ++it;
            continue;
          }
          // Delivered after the dispatch it was queued behind (earlier in the list, so already
          // erased in this pass when its result is in): the engine sees completions in stream order.
          if (it->result && it->after.valid() &&
              std::any_of(running_.begin(), it, [&](const Running& x) { return x.id == it->after; })) {
            ++it;
            continue;
          }
          if (!it->error.is_ok() && failed.is_ok()) failed = it->error;
          if (it->result) out.push_back(std::move(*it->result));
          for (const Part& p : it->parts) {
            if (p.control >= 0) free_controls_.push_back(p.control);
          }
          recycle(*it);
          it = running_.erase(it);
          --completed_;
          --active_;
        }
      }
      if (!failed.is_ok()) return failed;
      std::sort(out.begin(), out.end(), [](const Completion& a, const Completion& b) { return a.end < b.end; });
      if (!out.empty()) return out;
    }
    const bool idle = active_.load() == 0;
    if (now() >= until || (idle && !std::isfinite(until))) return out;
    if (idle) {
      // Nothing to wait for but time (the next arrival).
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(until - now(), 1e-3)));
      continue;
    }
    std::this_thread::yield();
  }
}

}  // namespace concord::cuda

namespace concord::cuda {

void register_backend() {
  register_cuda_backend_factory([](const BackendConfig& config) -> Result<std::unique_ptr<Backend>> {
    auto b = CudaBackend::create(0, config.seed);
    if (!b) return b.status();
    return std::unique_ptr<Backend>(std::move(*b));
  });
}

}  // namespace concord::cuda
