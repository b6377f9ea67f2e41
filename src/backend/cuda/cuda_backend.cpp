// The CUDA backend: the device probed, the backend made and torn down, what it can implement, and
// tenants' kernels and SM sets prepared before the clock starts (dispatch and resizing:
// cuda_backend_dispatch.cpp; completions: cuda_backend_completions.cpp).
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
#include "concord/backend_factory.h"

namespace concord::cuda {
namespace {

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
