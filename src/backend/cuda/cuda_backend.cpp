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

// Forwards to a tenant's allocator (or cudaMalloc) and keeps the span of what it gave out.
class SpanRecorder final : public DeviceAllocator {
 public:
  explicit SpanRecorder(std::shared_ptr<DeviceAllocator> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_ ? inner_->name() : "cudaMalloc"; }
  Result<void*> allocate(size_t bytes) override {
    void* p = nullptr;
    if (inner_) {
      auto r = inner_->allocate(bytes);
      if (!r) return r.status();
      p = *r;
    } else {
      CONCORD_CUDA(cudaMalloc(&p, bytes));
    }
    const auto b = reinterpret_cast<uintptr_t>(p);
    span.begin = span.end == 0 ? b : std::min(span.begin, b);
    span.end = std::max(span.end, b + bytes);
    return p;
  }
  void release(void* p, size_t bytes) override {
    if (inner_) inner_->release(p, bytes);
    else (void)cudaFree(p);  // nothing to report to: the buffer is going away
  }
  CudaBackend::Span span;

 private:
  std::shared_ptr<DeviceAllocator> inner_;
};

// A CUDA version as cudaDriverGetVersion and cudaRuntimeGetVersion give it (1000 x major + 10 x
// minor) in the usual form, "13.0".
std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The NVIDIA driver's version, from the kernel module's own line ("NVRM version: NVIDIA UNIX ...
// Kernel Module  580.95.05  Release Build ..."): the first word of digits and dots with a dot in it.
// Empty where the file is not there (another OS, a container without it).
std::string nvidia_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    const bool version = w.find('.') != std::string::npos &&
                         std::all_of(w.begin(), w.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
    if (version) return w;
  }
  return "";
}

}  // namespace

Result<DeviceSpec> probe_device_spec(int device) {
  cudaDeviceProp prop{};
  CONCORD_CUDA(cudaGetDeviceProperties(&prop, device));
  DeviceAttributes a;
  a.name = prop.name;
  a.cc_major = prop.major;
  a.cc_minor = prop.minor;
  a.sm_count = prop.multiProcessorCount;
  a.l2_bytes = prop.l2CacheSize;
  a.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  a.max_registers_per_sm = prop.regsPerMultiprocessor;
  a.max_shared_bytes_per_sm = static_cast<int>(prop.sharedMemPerMultiprocessor);
  a.max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
  a.max_threads_per_block = prop.maxThreadsPerBlock;
  a.max_shared_bytes_per_block_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  CONCORD_CUDA(cudaDeviceGetAttribute(&a.clock_khz, cudaDevAttrClockRate, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&a.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&a.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  auto spec = spec_from_attributes(a);
  if (!spec) return spec.status();
  spec->sm.max_registers_per_thread = 255;
  int driver_api = 0, runtime = 0;
  CONCORD_CUDA(cudaDriverGetVersion(&driver_api));
  CONCORD_CUDA(cudaRuntimeGetVersion(&runtime));
  spec->cuda_driver_version = cuda_version_string(driver_api);
  spec->cuda_version = cuda_version_string(runtime);
  spec->driver_version = nvidia_driver_version();
  return spec;
}

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
  if (device < 0 || device >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return Status::not_found("no CUDA device " + std::to_string(device) + ": " + std::to_string(count) + " visible" +
                             (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string()));
  }
  CONCORD_CUDA(cudaSetDevice(device));
  b->device_ = device;
  b->opened_ = true;
  auto spec = probe_device_spec(device);
  if (!spec) return spec.status();
  b->spec_ = std::move(*spec);
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
  // GPCs measured with thread-block clusters; the nominal layout above when they cannot be.
  static std::atomic<bool> noted{false};  // said once a process
  if (Status s = b->use_measured_gpcs(); !s && !noted.exchange(true)) {
    std::fprintf(stderr, "concord: cuda: GPC topology nominal (8 groups of TPCs in order): %s\n", s.message().c_str());
  }
  CONCORD_RETURN_IF_ERROR(b->spec_.validate());
  // The device's stream priorities (a lower number is a greater priority): Placement::priority's
  // two levels use the two ends of the range.
  CONCORD_CUDA(cudaDeviceGetStreamPriorityRange(&b->least_priority_, &b->greatest_priority_));
  CONCORD_RETURN_IF_ERROR(b->control_stream_.create());
  CONCORD_RETURN_IF_ERROR(b->controls_.allocate(kControlPool));
  for (int i = kControlPool - 1; i >= 0; --i) b->free_controls_.push_back(i);
  CONCORD_RETURN_IF_ERROR(b->staging_.allocate(1));
  CONCORD_RETURN_IF_ERROR(b->preempt_one_.allocate(1));
  *b->preempt_one_.get() = 1;
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
  CONCORD_RETURN_IF_ERROR(b->completer_stream_.create());
  CONCORD_RETURN_IF_ERROR(b->completer_done_.allocate(1));
  b->completer_ = std::thread([p = b.get()] { p->completion_loop(); });
  return b;
}

Status CudaBackend::use_measured_gpcs() {
  auto probe = probe_gpcs(device_, spec_.sm_count);
  if (!probe) return probe.status();
  // Hopper has at most 8 GPCs: more groups are SMs that never shared a cluster though one GPC
  // holds them (an H100 gave 12, four of 2 SMs), so such a probe is not believed either.
  int cc_major = 0;
  CONCORD_CUDA(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device_));
  const int groups = probe->gpc_of_sm.empty() ? 0 : *std::max_element(probe->gpc_of_sm.begin(), probe->gpc_of_sm.end()) + 1;
  if (cc_major == 9 && groups > 8) {
    return Status::internal("the GPC probe found " + std::to_string(groups) + " groups, more than Hopper's 8 GPCs");
  }
  // The two SMs of a TPC are in one GPC: a probe that splits a TPC is not believed.
  std::map<int, int> gpc_of_tpc;
  for (int sm = 0; sm < spec_.sm_count; ++sm) {
    const int tpc = spec_.tpc_of_sm[static_cast<size_t>(sm)];
    const int gpc = probe->gpc_of_sm[static_cast<size_t>(sm)];
    const auto [it, fresh] = gpc_of_tpc.emplace(tpc, gpc);
    if (!fresh && it->second != gpc) {
      return Status::internal("the GPC probe puts the SMs of TPC " + std::to_string(tpc) + " in GPCs " +
                              std::to_string(it->second) + " and " + std::to_string(gpc));
    }
  }
  spec_.gpc_of_sm = probe->gpc_of_sm;
  return Status::ok();
}

CudaBackend::~CudaBackend() {
  // No device was ever opened (no GPU, no driver, an index that does not exist): nothing to drain,
  // and nothing to say beyond the error that ended create().
  if (!opened_) return;
  // Bounded teardown: stop persistent launches, wait a while for every stream, and if the device
  // is still busy (a hung opaque kernel) say so and leak rather than wait in cudaFree forever.
  const Status aborted = abort_all(options_.teardown_wait_s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
  bool idle = aborted.is_ok();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.teardown_wait_s);
  auto busy = [](cudaStream_t st) { return cudaStreamQuery(st) == cudaErrorNotReady; };
  while (idle) {
    bool any = busy(control_stream_.get()) || busy(completer_stream_.get());
    for (const auto& [key, st] : tenant_streams_) any = any || busy(st.get());
    for (const Stream& st : helper_streams_) any = any || busy(st.get());
    for (const Stream& st : abort_streams_) any = any || busy(st.get());
    if (!any) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      idle = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (idle) {
    // Only this process's own work could remain (green-context streams): nothing hangs here.
    if (cudaDeviceSynchronize() == cudaSuccess) return;
  }
  std::fprintf(stderr, "concord: cuda: the device did not drain within %.1f s at teardown (%s); leaking its buffers instead of waiting\n",
               options_.teardown_wait_s, aborted.is_ok() ? "a stream stayed busy" : aborted.message().c_str());
  // cudaFree and cudaFreeHost wait for the device: give the memory up without freeing it.
  controls_.abandon();
  staging_.abandon();
  images_.abandon();
  completer_done_.abandon();
  preempt_one_.abandon();
  new std::map<std::string, std::unique_ptr<kernels::DeviceKernel>>(std::move(kernels_));  // leaked on purpose
}

Capabilities CudaBackend::capabilities(const KernelSpec& kernel) const {
  Capabilities c;
  c.l2_evict_first = true;  // elastic: evict-first loads; opaque: a streaming access-policy window
  if (!kernel.elastic) return c;
  c.persistent_form = c.exact_sm_sets = c.tlp = c.split_range = c.resize = c.preempt = true;
  c.fusion = true;  // any pair that the shared rule accepts (can_implement)
  c.l1_bypass = true;
  c.block_variants = true;
  return c;
}

Status CudaBackend::can_implement(const DispatchRequest& request) const {
  CONCORD_RETURN_IF_ERROR(Backend::can_implement(request));
  for (const DispatchPart& p : request.parts) {
    if (!kernels::has_device_kernel(p.kernel->name)) {
      return Status::unsupported("dispatch " + std::to_string(request.id.value) + ": tenant " +
                                 std::to_string(p.tenant.value) + " kernel '" + p.kernel->name +
                                 "' has no device body");
    }
  }
  if (request.parts.size() == 2) {
    const Status compiler = kernels::FusionCompiler::shared().available();
    if (!compiler) {
      return Status::unsupported("dispatch " + std::to_string(request.id.value) + ": fusing '" +
                                 request.parts[0].kernel->name + "' with '" + request.parts[1].kernel->name +
                                 "': " + compiler.message());
    }
  }
  return Status::ok();
}

Status CudaBackend::set_allocator(TenantId tenant, std::shared_ptr<DeviceAllocator> allocator) {
  if (!tenant.valid()) return Status::invalid_argument("cuda: set_allocator: invalid tenant id");
  if (allocator) {
    allocators_[static_cast<int>(tenant.value)] = std::move(allocator);
  } else {
    allocators_.erase(static_cast<int>(tenant.value));
  }
  return Status::ok();
}

Status CudaBackend::prepare_dispatch(const DispatchRequest& request) {
  CONCORD_RETURN_IF_ERROR(can_implement(request));
  if (request.parts.size() != 2) return Status::ok();
  const DispatchPart& a = request.parts[0];
  const DispatchPart& b = request.parts[1];
  auto ka = kernel_for(*a.kernel, static_cast<int>(a.tenant.value));
  if (!ka) return ka.status();
  auto kb = kernel_for(*b.kernel, static_cast<int>(b.tenant.value));
  if (!kb) return kb.status();
  return kernels::prepare_fused(**ka, a.variant, a.parts_per_block, **kb, b.variant, b.parts_per_block,
                                request.placement.cache);
}

Result<kernels::DeviceKernel*> CudaBackend::prepared_kernel(const KernelSpec& spec) const {
  const auto it = kernels_.find(std::to_string(reinterpret_cast<uintptr_t>(&spec)));
  if (it == kernels_.end()) return Status::not_found("cuda: kernel '" + spec.name + "' has not been prepared on this backend");
  return it->second.get();
}

Result<kernels::DeviceKernel*> CudaBackend::kernel_for(const KernelSpec& spec, int tenant) {
  const std::string key = std::to_string(reinterpret_cast<uintptr_t>(&spec));
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second.get();
  auto k = kernels::make_device_kernel(spec);
  if (!k) return k.status();
  {
    // The tenant's buffers come from its allocator (none set: cudaMalloc), through a recorder of
    // their span.
    auto a = allocators_.find(tenant);
    auto recorder = std::make_shared<SpanRecorder>(a != allocators_.end() ? a->second : nullptr);
    AllocationScope scope(recorder);
    CONCORD_RETURN_IF_ERROR((*k)->prepare(seed_ + kernels_.size()));
    spans_[k->get()] = recorder->span;
  }
  CONCORD_CUDA(cudaDeviceSynchronize());
  auto* raw = k->get();
  kernels_[key] = std::move(*k);
  return raw;
}

Status CudaBackend::wait_stream(cudaStream_t stream, double seconds, const std::string& what) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return Status::ok();
    if (q != cudaErrorNotReady) {
      return Status::device_error("cuda: " + what + ": " + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) + ")");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::device_error("cuda: " + what + ": still waiting after " + std::to_string(seconds) +
                                  " s (a stream is stuck behind a kernel that does not end)");
    }
    std::this_thread::yield();
  }
}

Result<CudaBackend::Running*> CudaBackend::find_running(DispatchId id, const char* op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found(std::string("cuda: ") + op + ": no running dispatch " + std::to_string(id.value));
  return &*it;
}

Status CudaBackend::prepare_tenant(TenantId tenant, const std::vector<const KernelSpec*>& kernels) {
  // The tenant's stream now: created at its first dispatch (every task's, in bench/raise), it held
  // that dispatch back; on the H200 a second task started in one scheduling call went from
  // 50-116 us after the first to 11-20 us (docs/cuda_backend.md).
  auto stream = tenant_stream(static_cast<int>(tenant.value), kNormalStreamPriority);
  if (!stream) return stream.status();
  // Its high-priority stream too, for the policies that give some tenants priority.
  if (auto high = tenant_stream(static_cast<int>(tenant.value), kHighStreamPriority); !high) return high.status();
  for (const KernelSpec* spec : kernels) {
    auto k = kernel_for(*spec, static_cast<int>(tenant.value));
    if (!k) return k.status();
    CONCORD_RETURN_IF_ERROR(load_functions(**k));
    // A library's first call loads its kernels (cuBLAS: about 0.1 s): pay that now, not mid-run.
    if (!spec->elastic) {
      const BlockRange whole{0, spec->variant(0).logical_blocks};
      CONCORD_RETURN_IF_ERROR((*k)->launch_standalone(0, whole, CachePolicy::normal, control_stream_.get()));
    }
  }
  CONCORD_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

Status CudaBackend::load_functions(const kernels::DeviceKernel& kernel) {
  // CUDA loads a function at its first launch (lazy loading, the default since 12.2), and that
  // launch waits for the module load, which waits for kernels already running: a persistent
  // dispatch queued behind a long kernel then starts after a preempt flag written meanwhile
  // should have stopped it (the watchdog test saw every block run). Load every form now.
  auto api = driver_api();
  if (!api) return api.status();
  for (const void* symbol : kernel.device_functions()) {
    cudaFunction_t f = nullptr;
    CONCORD_CUDA(cudaGetFuncBySymbol(&f, symbol));
    CONCORD_CU((*api)->func_load(reinterpret_cast<CUfunction>(f)));
  }
  return Status::ok();
}

Status CudaBackend::prepare_sm_set(const SmSet& sms, TenantId tenant) {
  if (sms.count() >= spec_.sm_count) return Status::ok();  // the whole GPU needs no context
  if (!green_) return Status::unsupported("cuda: SM partitions for native launches need green contexts, unavailable here (MPS?)");
  auto stream = green_->stream_for(sms, static_cast<int>(tenant.value), cuda_priority(kNormalStreamPriority));
  if (!stream) return stream.status();
  // Its high-priority stream too (cheap once the context exists): a stream made at a dispatch
  // delays that dispatch on the host, and a policy may launch at either priority on the set.
  if (auto high = green_->stream_for(sms, static_cast<int>(tenant.value), cuda_priority(kHighStreamPriority)); !high) {
    return high.status();
  }
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

Status CudaBackend::abort_all(Seconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, grace));
  // The preempt flag of every persistent dispatch, written without waiting for anything: from
  // the pinned image (an upload not yet done carries it), and to the device on a stream of its
  // own, after the dispatch's start where that has not passed yet (its upload may be pending).
  Stream direct;  // not the control stream: that one may wait behind a stuck dispatch's start
  CONCORD_RETURN_IF_ERROR(direct.create());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Running& r : running_) {
      if (r.completing || r.placement.form != LaunchForm::persistent) continue;
      const bool started = cudaEventQuery(r.start.get()) == cudaSuccess;
      for (const Part& p : r.parts) {
        if (p.control < 0) continue;
        images_.get()[p.control].preempt = 1;
        cudaStream_t st = direct.get();
        if (!started) {
          Stream own;
          CONCORD_RETURN_IF_ERROR(own.create());
          CONCORD_CUDA(cudaStreamWaitEvent(own.get(), r.start.get(), 0));
          st = own.get();
          abort_streams_.push_back(std::move(own));
        }
        CONCORD_CUDA(cudaMemcpyAsync(&controls_.get()[p.control].preempt, preempt_one_.get(), sizeof(int32_t),
                                     cudaMemcpyHostToDevice, st));
      }
    }
    abort_streams_.push_back(std::move(direct));
  }
  // Wait, bounded, for the completion thread to find every dispatch finished.
  while (true) {
    std::string stuck;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!completer_error_.is_ok()) return completer_error_;
      for (const Running& r : running_) {
        if (r.completing) continue;
        stuck += (stuck.empty() ? "" : "; ") + r.label;
      }
    }
    if (stuck.empty()) return Status::ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::device_error("cuda: still running " + std::to_string(grace) + " s after abort (native and opaque "
                                  "kernels cannot be preempted; end the process): " + stuck);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
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
      CONCORD_RETURN_IF_ERROR(wait_stream(completer_stream_.get(), options_.control_wait_s, "reading the progress of " + r.label));
      finished = std::min<int64_t>(static_cast<int64_t>(*completer_done_.get()), p.range.size());
    }
    if (finished < p.range.size()) c.preempted = true;
    c.blocks_done.push_back(finished);
  }
  return c;
}

void CudaBackend::completion_loop() {
  if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
    // Never silently: advance() returns this.
    std::lock_guard<std::mutex> lock(mu_);
    completer_error_ = Status::device_error(std::string("cuda: the completion thread could not start: cudaSetDevice: ") +
                                            cudaGetErrorName(e));
    completer_failed_.store(true, std::memory_order_release);
    return;
  }
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
          // An error such as an illegal address is sticky: it poisons the context, so every
          // dispatch still running reports it too; each names itself.
          failed = Status::device_error("cuda: " + w.r->label + " failed: " + cudaGetErrorName(q) + " (" +
                                        cudaGetErrorString(q) + ")");
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
      if (!c) {
        // Delivered as a completion that carries the error, so the engine can attribute it.
        Completion bad;
        bad.dispatch = w->r->id;
        bad.start = bad.end = now();
        bad.blocks_done.assign(w->r->parts.size(), 0);
        bad.error = c.status();
        c = std::move(bad);
      }
      lock.lock();
      w->r->result = std::move(*c);
      ++completed_;
      lock.unlock();
    }
  }
}

Result<std::vector<Completion>> CudaBackend::advance(Seconds until) {
  std::vector<Completion> out;
  // Returns at least this often, empty if nothing completed, so that the engine can look at its
  // stop flag while a kernel runs for long (or never ends).
  constexpr Seconds kSliceS = 0.01;
  const Seconds slice_end = now() + kSliceS;
  while (true) {
    if (completer_failed_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      return completer_error_;
    }
    if (completed_.load() > 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = running_.begin(); it != running_.end();) {
          if (!it->result) {
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
          out.push_back(std::move(*it->result));
          ranges_.end(it->range);
          for (const Part& p : it->parts) {
            if (p.control >= 0) free_controls_.push_back(p.control);
          }
          recycle(*it);
          it = running_.erase(it);
          --completed_;
          --active_;
        }
      }
      std::sort(out.begin(), out.end(), [](const Completion& a, const Completion& b) { return a.end < b.end; });
      if (!out.empty()) return out;
    }
    const bool idle = active_.load() == 0;
    if (now() >= until || now() >= slice_end || (idle && !std::isfinite(until))) return out;
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
    auto b = CudaBackend::create(config.device_index, config.seed);
    if (!b) return b.status();
    return std::unique_ptr<Backend>(std::move(*b));
  });
}

}  // namespace concord::cuda
