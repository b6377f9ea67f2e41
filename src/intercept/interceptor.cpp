// The interception library: starting and registering, the notes the hooks pass on, the completion
// thread and shutdown (the launch path: interceptor_launch.cpp).
#include "intercept/interceptor_impl.h"

namespace concord::intercept {
namespace impl {
namespace {

std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "tenant" : name;
}

void fall_back_at_exit() { instance().shutdown(); }
// A child forked after the library connected shares the parent's socket and rings but has none of
// its threads: it runs pass-through and never touches the parent's connection (not even at exit).
void forked_child() { instance().became_child(); }

}  // namespace

Interceptor::Mode Interceptor::started_mode() {
  Mode mode = mode_.load(std::memory_order_acquire);
  if (mode == Mode::unstarted) {
    std::call_once(started_, [this] { start(); });
    mode = mode_.load(std::memory_order_acquire);
  }
  return mode;
}

Interceptor& instance() {
  static auto* interceptor = new Interceptor();  // never destroyed: see interceptor.h
  return *interceptor;
}


void Interceptor::fall_back(const std::string& why) {
  log("pass-through for the rest of this process: " + why);
  mode_.store(Mode::pass_through, std::memory_order_release);
}

void Interceptor::give_up(const std::string& why) noexcept {
  if (gave_up_.exchange(true)) return;
  try {
    const Mode was = mode_.exchange(Mode::pass_through, std::memory_order_acq_rel);
    log("pass-through for the rest of this process: " + why);
    if (client_ && (was == Mode::connected || was == Mode::active)) {
      // Its flag down (no BE gate waits for launches the books will never see end), and the
      // daemon told it is gone.
      if (flag_up_.exchange(false)) client_->lower_lc(flag_slot_.load());
      client_->close();
    }
  } catch (...) {
  }
}

void Interceptor::start() {
  auto parsed = parse_config([](const char* var) { return std::getenv(var); }, program_name());
  if (!parsed) {
    fall_back(parsed.status().message());
    return;
  }
  config_ = *parsed;
  if (config_.disabled) {
    mode_.store(Mode::pass_through, std::memory_order_release);
    if (!config_.stats_path.empty()) std::atexit(fall_back_at_exit);
    return;
  }
  driver_ = real_driver();
  if (!driver_ || !driver_->complete) {
    fall_back(!driver_ ? "libcuda.so.1 could not be opened"
                       : "libcuda.so.1 lacks functions the launch path needs (a driver older than CUDA 12.3?)");
    return;
  }
  if (Status st = connect(); !st) {
    fall_back(st.message());
    if (!config_.stats_path.empty()) std::atexit(fall_back_at_exit);
    return;
  }
  owner_pid_ = ::getpid();
  ::pthread_atfork(nullptr, nullptr, forked_child);
  mode_.store(Mode::connected, std::memory_order_release);
  // Registered after the CUDA runtime's own exit handlers, so it runs before them.
  std::atexit(fall_back_at_exit);
  if (config_.log) {
    log("registered as tenant " + std::to_string(client_->tenant()) + " (" + config_.tenant.name + ")" +
        (bus_id_.empty() ? std::string(", GPU unknown") : ", GPU " + bus_id_));
  }
}

void Interceptor::enter_context() {
  Status st = [this]() -> Status {
    CONCORD_INTERCEPT_CU(driver_->ctx_get_current(&context_));
    if (!context_) return Status::failed_precondition("the first launch came with no current CUDA context");
    CONCORD_INTERCEPT_CU(driver_->ctx_get_device(&device_));
    CONCORD_INTERCEPT_CU(driver_->ctx_get_stream_priority_range(&least_priority_, &greatest_priority_));
    // The process registered for the GPU it saw then (a request mark on a thread without a context
    // names device 0): steering it on another GPU would gate the wrong GPU's tenants.
    if (const std::string bus = bus_id_of(device_); !bus_id_.empty() && !bus.empty() && bus != bus_id_) {
      return Status::failed_precondition("registered for GPU " + bus_id_ + " but its first launch is on GPU " + bus +
                                         " (mark requests on a thread that has made its device current)");
    }
    return Status::ok();
  }();
  if (!st) {
    client_->close();
    fall_back(st.message());
    return;
  }
  placer_ = std::make_unique<StreamPlacer>(*driver_);
  book_ = std::make_unique<CompletionBook>(*driver_, [this](uint64_t seq, uint64_t key, bool ok, uint64_t at_ns) {
    (void)client_->completed(seq, key, ok, at_ns);
  });
  completion_thread_ = std::thread([this] { completion_loop(); });
  mode_.store(Mode::active, std::memory_order_release);
}

// The GPU this process launches on, as the node daemon knows it: the PCI bus id of the current
// context's device, or of device 0 (the one the CUDA runtime uses by default, after
// CUDA_VISIBLE_DEVICES) where this thread has no context; "" where the driver cannot tell (not
// initialized yet: the library never initializes it itself).
std::string Interceptor::device_bus_id() const {
  if (!driver_->device_get) return {};
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  const bool in_context = driver_->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr && driver_->ctx_get_device(&dev) == CUDA_SUCCESS;
  if (!in_context && driver_->device_get(&dev, 0) != CUDA_SUCCESS) return {};
  return bus_id_of(dev);
}

std::string Interceptor::bus_id_of(CUdevice dev) const {
  char bus[ipc::limits::kDeviceBytes + 1] = {};
  if (!driver_->device_get_pci_bus_id || driver_->device_get_pci_bus_id(bus, static_cast<int>(sizeof bus), dev) != CUDA_SUCCESS) {
    return {};
  }
  return bus;
}

Status Interceptor::connect() {
  ipc::TenantClientOptions options;
  options.socket_path = config_.socket_path;
  options.info = config_.tenant;
  options.info.pid = static_cast<int32_t>(getpid());
  options.info.device = device_bus_id();
  options.info.device_memory_bytes = device_memory();
  options.reconnect.enabled = config_.reconnect;
  // The daemon going and coming back is said on stderr whatever CONCORD_INTERCEPT_LOG says: for
  // that while the process runs unmanaged.
  options.on_event = [this](const std::string& what) { log(what); };
  bus_id_ = options.info.device;
  auto client = ipc::TenantClient::connect(options);
  if (!client) {
    // The daemon's refusals (LC not granted, a reservation that does not fit, no GPU of its own).
    if (client.status().code() == StatusCode::permission_denied || client.status().code() == StatusCode::failed_precondition) {
      return Status(client.status().code(), "the daemon at " + config_.socket_path + " refused the tenant: " + client.status().message());
    }
    return Status(client.status().code(), "no daemon at " + config_.socket_path + ": " + client.status().message());
  }
  client_ = std::move(*client);
  if (client_->granted_class() != config_.tenant.cls) {
    // LC asked and refused (CONCORD_LC_REFUSED=be): a BE tenant from here on.
    log("registered as a BE tenant: latency-critical refused: " + client_->lc_refused());
    config_.tenant.cls = client_->granted_class();
  }
  // The quota holds for the process's life, also if the daemon goes: the other tenants' quotas
  // were granted beside it.
  const MemoryQuota quota = client_->memory_quota();
  memory_.set_quota(quota);
  if (quota.limited() && quota.limit_bytes < config_.tenant.memory_bytes) {
    log("GPU memory limit " + format_bytes(quota.limit_bytes) + ", under the " + format_bytes(config_.tenant.memory_bytes) +
        " asked: the most concordd gives a tenant without a reservation now");
  } else if (config_.log && quota.limited()) {
    log(std::string("GPU memory ") + (quota.reserved_bytes > 0 ? "reservation " : "limit ") + format_bytes(quota.limit_bytes));
  }
  return Status::ok();
}

uint64_t Interceptor::stream_key(CUstream app) const {
  if (app == nullptr || app == CU_STREAM_LEGACY) return kLegacyStreamKey;
  if (app == CU_STREAM_PER_THREAD) {
    // Each thread's default stream is its own stream: a key per thread (low bits 0x2; real stream
    // handles are aligned pointers).
    static std::atomic<uint64_t> next_thread{1};
    thread_local const uint64_t key = (next_thread.fetch_add(1, std::memory_order_relaxed) << 8) | kPerThreadKeyTag;
    return key;
  }
  return reinterpret_cast<uint64_t>(app);
}

bool Interceptor::capturing(CUstream app) const {
  if (captures_.load(std::memory_order_acquire) == 0) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // An error here (the legacy stream asked while another stream captures) means the launch would
  // join or break a capture: leave it to the real call.
  if (driver_->stream_is_capturing(app, &status) != CUDA_SUCCESS) return true;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

FunctionInfo Interceptor::function_info(const void* function, bool graph) {
  // The launch path's lookup: this thread's copy, no lock.
  if (const std::optional<FunctionInfo> mine = function_cache_.find(function)) return *mine;
  {
    std::lock_guard<std::mutex> lock(functions_mu_);
    if (auto it = functions_.find(function); it != functions_.end()) {
      function_cache_.keep(function, it->second);
      return it->second;
    }
  }
  FunctionInfo info;
  const char* name = nullptr;
  if (!graph) {
    // A CUfunction, or a CUkernel (what the runtime launches since CUDA 12): ask as either.
    if (driver_->func_get_name(&name, reinterpret_cast<CUfunction>(const_cast<void*>(function))) != CUDA_SUCCESS) name = nullptr;
    if (!name) {
      if (driver_->kernel_get_name(&name, reinterpret_cast<CUkernel>(const_cast<void*>(function))) != CUDA_SUCCESS) {
        name = nullptr;
      } else {
        info.kernel_handle = true;
      }
    }
  }
  info.id = name ? kernel_id_of(name) : handle_id_of(reinterpret_cast<uint64_t>(function));
  std::lock_guard<std::mutex> lock(functions_mu_);
  const FunctionInfo& kept = functions_.emplace(function, info).first->second;
  function_cache_.keep(function, kept);
  return kept;
}

void Interceptor::mark_green_failed(const void* function) {
  std::lock_guard<std::mutex> lock(functions_mu_);
  functions_[function].green_ok = false;
  function_cache_.invalidate();
}

std::optional<int> Interceptor::new_stream_priority(std::optional<int> asked) {
  const Mode mode = started_mode();
  if ((mode != Mode::connected && mode != Mode::active) || client_->pass_through() || !lc()) return std::nullopt;
  if (client_->lease().priority != ipc::Priority::high) return std::nullopt;
  // A stream on another GPU than the tenant's is not the daemon's to steer, as its launches are not.
  if (mode == Mode::active && !on_own_gpu()) return std::nullopt;
  int least = 0, greatest = 0;
  if (driver_->ctx_get_stream_priority_range(&least, &greatest) != CUDA_SUCCESS) return std::nullopt;
  if (asked && *asked <= greatest) return std::nullopt;  // as high as it gets already
  counters_.streams_raised.fetch_add(1, std::memory_order_relaxed);
  return greatest;
}

void Interceptor::stream_destroyed(CUstream stream) {
  // Shadows and books exist once active (made before the mode is stored).
  if (mode_.load(std::memory_order_acquire) != Mode::active) return;
  const uint64_t key = stream_key(stream);
  placer_->forget(key);
  if (Room* room = room_.load(std::memory_order_acquire)) room->forget(key);
  // A last marker behind what it ran (the handle is still valid: the hook calls this before the
  // real destroy); then none is recorded on the handle again (the driver may hand it out anew).
  if (stream != nullptr && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) (void)book_->mark_uncovered(key, stream);
  book_->stream_gone(key);
}

SyncMark Interceptor::sync_begin(CUstream stream, bool per_thread, bool whole_context) {
  SyncMark mark;
  counters_.synchronizations.fetch_add(1, std::memory_order_relaxed);
  if (mode_.load(std::memory_order_acquire) != Mode::active) return mark;
  const CUstream app = (per_thread && stream == nullptr) ? CU_STREAM_PER_THREAD : stream;
  mark.covered = book_->before_sync(stream_key(app), whole_context);
  return mark;
}

void Interceptor::sync_end(const SyncMark& mark, CUresult r) {
  // Also while the daemon is away: the books stay right for when it is back.
  if (mark.covered.empty() || r != CUDA_SUCCESS) return;
  // Everything launched on those streams before the synchronisation began has ended.
  book_->after_sync(mark.covered, ipc::monotonic_ns());
  maybe_lower_flag();
}

MemoryBook* Interceptor::memory() {
  const Mode mode = started_mode();
  return mode == Mode::pass_through && config_.disabled ? nullptr : &memory_;
}

void Interceptor::memory_refused(const char* call, uint64_t bytes) {
  uint64_t since = 0;
  if (!memory_.refused(ipc::monotonic_ns(), kMemoryRefusalLogNs, &since)) return;
  const MemoryQuota q = memory_.quota();
  log(std::string(call) + " of " + format_bytes(bytes) + " refused (CUDA_ERROR_OUT_OF_MEMORY): this tenant's GPU memory " +
      (q.reserved_bytes > 0 ? "reservation" : "limit") + " is " + format_bytes(q.limit_bytes) + " (set by concordd), " +
      format_bytes(memory_.live()) + " of it in use" +
      (since > 1 ? "; " + std::to_string(since - 1) + " more refused since the last line" : std::string()));
}

void Interceptor::memory_changed(bool allocated, bool freed) {
  if (allocated) counters_.allocations.fetch_add(1, std::memory_order_relaxed);
  if (freed) counters_.frees.fetch_add(1, std::memory_order_relaxed);
  report_memory();
}

void Interceptor::report_memory() {
  const Mode mode = mode_.load(std::memory_order_acquire);
  if (mode != Mode::connected && mode != Mode::active) return;
  const uint64_t version = memory_.version();
  if (version == memory_reported_.load(std::memory_order_acquire)) return;
  const uint64_t now = ipc::monotonic_ns();
  uint64_t last = memory_report_ns_.load(std::memory_order_acquire);
  // Before the first launch there is no completion thread to tell a change held back: each goes.
  if (mode == Mode::active && now - last < kMemoryReportNs) return;
  if (!memory_report_ns_.compare_exchange_strong(last, now, std::memory_order_acq_rel)) return;  // another thread reports
  memory_reported_.store(version, std::memory_order_release);
  client_->memory_used(memory_.live(), memory_.peak());
}

uint64_t Interceptor::device_memory() const {
  if (!driver_->device_total_mem || !driver_->device_get) return 0;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  const bool in_context = driver_->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr && driver_->ctx_get_device(&dev) == CUDA_SUCCESS;
  if (!in_context && driver_->device_get(&dev, 0) != CUDA_SUCCESS) return 0;
  size_t bytes = 0;
  return driver_->device_total_mem(&bytes, dev) == CUDA_SUCCESS ? bytes : 0;
}

int Interceptor::request(bool begin) {
  (begin ? counters_.requests_begun : counters_.requests_ended).fetch_add(1, std::memory_order_relaxed);
  // A request may be marked before the process's first launch: register then.
  const Mode mode = started_mode();
  if (mode != Mode::connected && mode != Mode::active) return 1;
  // Counted also while the daemon is away (a client that reconnects tells a new daemon of a request
  // open), but not told.
  const bool told = !client_->pass_through();
  if (lc()) {
    if (begin) {
      in_request_.fetch_add(1);
    } else {
      int n = in_request_.load();
      while (n > 0 && !in_request_.compare_exchange_weak(n, n - 1)) {
      }
    }
    // An LC request about to launch raises the flag already: gates that yield to it close before
    // its first kernel goes out.
    if (begin) {
      const ipc::LeaseTerms terms = client_->lease();
      if (terms.lc_slot != ipc::kNoLcSlot) raise_flag(terms.lc_slot);
    }
  }
  const Status st = begin ? client_->request_begin() : client_->request_end();
  if (!begin && mode == Mode::active) {
    maybe_lower_flag();
  } else if (!begin && in_request_.load() == 0 && flag_up_.exchange(false)) {
    // No launch yet (and no completion thread): nothing is in flight.
    client_->lower_lc(flag_slot_.load(std::memory_order_relaxed));
  }
  if (!st) {
    if (config_.log) log(std::string("request ") + (begin ? "begin" : "end") + " not told: " + st.message());
    return 1;
  }
  return told ? 0 : 1;
}

void Interceptor::take_announcements() {
  for (const ipc::SmSetAnnouncement& a : client_->take_announcements()) {
    if (!config_.green_contexts && !green_failed_) {
      green_failed_ = true;
      if (config_.log) log("SM sets are not honoured (CONCORD_GREEN_CONTEXTS is not 1): launches run on the whole GPU");
    }
    if (!green_owner_ && !green_failed_) {
      auto sets = GreenSets::create(*driver_, device_);
      if (!sets) {
        green_failed_ = true;
        log("SM sets will not be honoured (green contexts unavailable): " + sets.status().message());
      } else {
        green_owner_ = std::move(*sets);
        green_.store(green_owner_.get(), std::memory_order_release);
      }
    }
    if (!green_owner_) continue;
    const SmSet sms = SmSet::of(a.sms);
    if (Status st = green_owner_->prepare(a.handle, sms); !st) {
      log("SM set " + std::to_string(a.handle) + " not prepared: " + st.message());
      continue;
    }
    counters_.sm_sets_prepared.fetch_add(1, std::memory_order_relaxed);
    const SmSet cover = green_owner_->cover_of(a.handle);
    if (config_.log || !(cover == sms)) {
      log("SM set " + std::to_string(a.handle) + " = " + sms.to_string() + " runs on " + cover.to_string() +
          (cover == sms ? "" : " (its TPC groups' union)"));
    }
  }
}

void Interceptor::completion_loop() {
  // The thread's calls must not break another thread's stream capture (global capture mode
  // forbids "unsafe" calls in every thread not in relaxed mode).
  CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (driver_->ctx_set_current(context_) != CUDA_SUCCESS || driver_->thread_exchange_capture_mode(&relaxed) != CUDA_SUCCESS) {
    log("the completion thread could not enter the launch's context: completions are reported at launch");
  }
  const auto period = std::chrono::microseconds(lc() ? config_.poll_us : config_.be_poll_us);
  auto last_announcements = std::chrono::steady_clock::time_point{};
  while (!stop_.load(std::memory_order_acquire)) {
    // Read before this round's looks: a wake-up after them ends the sleep below at once.
    const uint32_t seen = wake_.read();
    // SM-set announcements (per-launch decisions only) every 10 ms: no launch waits for them.
    if (const auto now = std::chrono::steady_clock::now(); now - last_announcements >= std::chrono::milliseconds(10)) {
      last_announcements = now;
      take_announcements();
    }
    book_->poll();
    // Streams whose last launches no marker covers, quiet for a while: the end of a burst the
    // application did not synchronise on. Not while a capture is in progress (the stream might be
    // capturing: a marker would join the graph).
    if (captures_.load(std::memory_order_acquire) == 0) {
      const int n = book_->tail_markers(lc() ? kLcTailNs : kBeTailNs);
      counters_.tail_markers.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    maybe_lower_flag();
    report_memory();
    client_->flush();
    // Polled often while markers are pending, or while an LC tenant's flag is up or its launches
    // are in flight (its burst's end lowers the flag); a BE tenant's uncovered launches wait for a
    // synchronisation or its tail marker (checked at the idle period).
    const auto busy = [this] {
      return book_->markers_pending() || flag_up_.load(std::memory_order_acquire) || (lc() && book_->in_flight() > 0);
    };
    if (busy()) {
      if (!stop_.load(std::memory_order_acquire)) wake_.wait(seen, period);
      continue;
    }
    // Idle: sleep until a launch wakes it, or 10 ms. The flag is set before the last look, so a
    // launch in between either is seen or wakes it (the word moved since `seen`).
    poller_idle_.store(true, std::memory_order_seq_cst);
    const uint32_t idle_seen = wake_.read();
    if (!busy() && !stop_.load(std::memory_order_acquire)) wake_.wait(idle_seen, std::chrono::milliseconds(10));
    poller_idle_.store(false, std::memory_order_release);
  }
  book_->poll();
}

void Interceptor::shutdown() {
  if (owner_pid_ != 0 && ::getpid() != owner_pid_) return;  // a forked child: the parent's connection is not its own
  std::call_once(shut_, [this] {
    if (completion_thread_.joinable()) {
      stop_.store(true, std::memory_order_release);
      wake_.wake();
      completion_thread_.join();
    }
    // Whether the daemon went away while the process ran (closing turns the client pass-through,
    // and so does giving up after a failure of the library's own).
    const bool daemon_gone = client_ && client_->pass_through() && !gave_up_.load();
    if (client_) {
      counters_.reconnects.store(client_->reconnections(), std::memory_order_relaxed);
      if (flag_up_.exchange(false)) client_->lower_lc(flag_slot_.load());
      client_->close();
    }
    write_stats(daemon_gone);
  });
}

void Interceptor::write_stats(bool daemon_gone) const {
  if (config_.stats_path.empty()) return;
  const Mode m = mode_.load();
  const char* mode = m == Mode::active        ? "active"
                     : m == Mode::connected   ? "connected"
                     : m == Mode::pass_through ? "pass_through"
                                               : "unstarted";
  const MemoryQuota quota = memory_.quota();
  const MemoryCounts memory{memory_.live(), memory_.peak(), quota.limit_bytes, quota.reserved_bytes, memory_.refusals()};
  if (Status st = write_counters(config_.stats_path, mode, daemon_gone, counters_,
                                 book_ ? book_->markers() : 0, book_ ? book_->reported() : 0, book_ ? book_->queries() : 0, memory);
      !st) {
    log(st.message());
  }
}

}  // namespace impl

using impl::instance;


namespace {

// A launch whose real calls are counted: every way the library makes the real launch goes through
// the call's invoke functions, so whether the kernel went out is known whatever fails after it.
struct Watched {
  const LaunchCall* call = nullptr;
  bool launched = false;  // a real launch call returned CUDA_SUCCESS
  CUresult note(CUresult r) {
    launched = launched || r == CUDA_SUCCESS;
    return r;
  }
};

LaunchCall watched(const LaunchCall& call, Watched& w) {
  LaunchCall c = call;
  c.args = &w;
  c.invoke = [](const void* p, CUstream target) {
    auto& x = *static_cast<Watched*>(const_cast<void*>(p));
    return x.note(x.call->invoke(x.call->args, target));
  };
  if (call.invoke_priority) {
    c.invoke_priority = [](const void* p, CUstream target, int priority) {
      auto& x = *static_cast<Watched*>(const_cast<void*>(p));
      return x.note(x.call->invoke_priority(x.call->args, target, priority));
    };
  }
  if (call.invoke_shared) {
    c.invoke_shared = [](const void* p, CUstream target, int priority, uint32_t shared_mem) {
      auto& x = *static_cast<Watched*>(const_cast<void*>(p));
      return x.note(x.call->invoke_shared(x.call->args, target, priority, shared_mem));
    };
  }
  return c;
}

}  // namespace

CUresult intercept_launch(const LaunchCall& call) noexcept {
  Watched w{&call};
  std::string why;
  try {
    return instance().launch(watched(call, w));
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an unknown exception";
  }
  // Nothing of the library's may fail the application's launch, nor run it twice: the library's
  // books may be half-written, so the process goes on pass-through; the launch is made now only
  // if it did not go out.
  instance().give_up("the launch path failed (" + why + ")");
  return w.launched ? CUDA_SUCCESS : call.invoke(call.args, call.stream);
}

std::optional<int> note_new_stream_priority(std::optional<int> asked) noexcept {
  try {
    return instance().new_stream_priority(asked);
  } catch (...) {
    return std::nullopt;
  }
}

void note_stream_created(CUstream stream) noexcept {
  // A handle the driver hands out again must not find the shadows of the stream it named before.
  note_stream_destroyed(stream);
}

void note_stream_destroyed(CUstream stream) noexcept {
  try {
    instance().stream_destroyed(stream);
  } catch (...) {
  }
}

void note_capture_begun() noexcept { instance().capture_begun(); }
void note_capture_ended() noexcept { instance().capture_ended(); }

SyncMark note_sync_begin(CUstream stream, bool per_thread, bool whole_context) noexcept {
  try {
    return instance().sync_begin(stream, per_thread, whole_context);
  } catch (...) {
    return SyncMark{};
  }
}

void note_sync_end(const SyncMark& mark, CUresult r) noexcept {
  try {
    instance().sync_end(mark, r);
  } catch (...) {
  }
}

MemoryBook* memory_book() noexcept {
  try {
    return instance().memory();
  } catch (...) {
    return nullptr;
  }
}

void note_memory_refused(const char* call, uint64_t bytes) noexcept {
  try {
    instance().memory_refused(call, bytes);
  } catch (...) {
  }
}

void note_memory_changed(bool allocated, bool freed) noexcept {
  try {
    instance().memory_changed(allocated, freed);
  } catch (...) {
  }
}

int note_request(bool begin) noexcept {
  try {
    return instance().request(begin);
  } catch (...) {
    return 1;
  }
}

}  // namespace concord::intercept
