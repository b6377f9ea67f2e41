#include "intercept/interceptor.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "intercept/config.h"
#include "intercept/cu_handles.h"
#include "intercept/green_sets.h"
#include "intercept/kernel_id.h"
#include "intercept/real_driver.h"
#include "ipc/tenant_client.h"

namespace concord::intercept {
namespace {

constexpr uint64_t kLegacyStreamKey = 0x1;  // CU_STREAM_LEGACY's value: stream 0 outside _ptsz too

// Counters of what the library did, written as JSON at exit when CONCORD_INTERCEPT_STATS names a
// file (the GPU tests read them to see that launches really went through the library).
struct Counters {
  std::atomic<uint64_t> launches{0};         // every launch a hook saw
  std::atomic<uint64_t> passed_through{0};   // no daemon (or disabled, or gone): the real call alone
  std::atomic<uint64_t> captured{0};         // into a capturing stream: untouched
  std::atomic<uint64_t> noticed{0};          // posted to the daemon
  std::atomic<uint64_t> free_run{0};         // noticed and launched without waiting
  std::atomic<uint64_t> released{0};         // waited for and released
  std::atomic<uint64_t> on_priority_stream{0};  // released onto a priority shadow stream
  std::atomic<uint64_t> on_green_stream{0};     // released onto a green-context stream
  std::atomic<uint64_t> green_fallbacks{0};     // a green-context launch failed; relaunched on the app stream
  std::atomic<uint64_t> graphs{0};
  std::atomic<uint64_t> completions{0};         // completions reported
  std::atomic<uint64_t> failed_launches{0};     // the real launch returned an error
  std::atomic<uint64_t> synchronizations{0};
  std::atomic<uint64_t> sm_sets_prepared{0};
  std::atomic<uint64_t> requests_begun{0};
  std::atomic<uint64_t> requests_ended{0};
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> frees{0};
  std::atomic<uint64_t> live_bytes{0};
  std::atomic<uint64_t> peak_bytes{0};
};

struct FunctionInfo {
  uint64_t id = 0;
  bool green_ok = true;  // false once a launch of it on a green-context stream failed
};

// Shadow streams of one application stream (in one context), by (priority, SM set).
struct StreamState {
  bool priority_known = false;
  int priority = 0;
  std::map<int, OwnedStream> priority_shadows;
};

// The two events of one thread's hand-offs, in one context (a record followed by its wait at once
// on the same thread, so one pair per thread serves every stream).
struct HandoffEvents {
  CUcontext context = nullptr;
  OwnedEvent before, after;
};

std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "tenant" : name;
}

class Interceptor {
 public:
  // unstarted -> connected (registered with the daemon; from the first launch or request mark)
  // -> active (the first launch's context known, the completion thread running); or pass_through.
  enum class Mode : int { unstarted, pass_through, connected, active };

  CUresult launch(const LaunchCall& call);
  void stream_destroyed(CUstream stream);
  void capture_begun() { captures_.fetch_add(1, std::memory_order_acq_rel); }
  void capture_ended() {
    int n = captures_.load(std::memory_order_acquire);
    while (n > 0 && !captures_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
    }
  }
  // In a child forked after the library connected (pthread_atfork): pass-through for good.
  void became_child() { mode_.store(Mode::pass_through, std::memory_order_release); }
  void synchronized() {
    counters_.synchronizations.fetch_add(1, std::memory_order_relaxed);
    kick();
  }
  // Wakes the completion thread (the flag under wake_mu_, so a wait about to begin sees it).
  void kick() {
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      kick_.store(true, std::memory_order_release);
    }
    wake_.notify_one();
  }
  void allocated(CUdeviceptr ptr, size_t bytes);
  void freed(CUdeviceptr ptr);
  int request(bool begin);
  void shutdown();

 private:
  void start();
  Status connect();
  void enter_context();
  Mode started_mode();
  void log(const std::string& line) const { std::fprintf(stderr, "concord-intercept: %s\n", line.c_str()); }
  void fall_back(const std::string& why);
  uint64_t stream_key(CUstream app) const;
  bool capturing(CUstream app) const;
  FunctionInfo function_info(const void* function, bool graph);
  void mark_green_failed(const void* function);
  Result<CUstream> priority_shadow(CUstream app, uint64_t key, CUcontext ctx, int priority, bool* on_app);
  Result<HandoffEvents*> handoff_events(CUcontext ctx);
  Status handoff(CUstream from, CUstream to, CUevent event);
  Result<CUevent> take_event();
  void track(uint64_t seq, CUstream stream);
  void after_launch(CUresult r, uint64_t seq, CUstream app, CUstream target, HandoffEvents* events, bool green) noexcept;
  void completion_loop();
  void poll_completions();
  void take_announcements();
  void write_stats() const;

  std::atomic<Mode> mode_{Mode::unstarted};
  std::once_flag started_;
  std::once_flag context_once_;
  InterceptConfig config_;
  const RealDriver* driver_ = nullptr;
  std::unique_ptr<ipc::TenantClient> client_;
  CUcontext context_ = nullptr;  // the context of the first launch: the completion thread's
  CUdevice device_ = 0;
  int least_priority_ = 0, greatest_priority_ = 0;
  std::atomic<int> captures_{0};
  Counters counters_;

  std::mutex functions_mu_;
  std::unordered_map<const void*, FunctionInfo> functions_;

  std::mutex streams_mu_;
  std::map<std::pair<uint64_t, CUcontext>, StreamState> streams_;

  std::mutex handoff_mu_;
  std::vector<std::unique_ptr<HandoffEvents>> handoffs_;  // every thread's, owned here

  std::mutex events_mu_;
  std::vector<OwnedEvent> events_;       // every completion event made
  std::vector<CUevent> free_events_;
  std::vector<std::pair<uint64_t, CUevent>> pending_;  // (seq, event) of launches in flight

  std::atomic<GreenSets*> green_{nullptr};
  std::unique_ptr<GreenSets> green_owner_;
  bool green_failed_ = false;  // the split or probe failed: SM sets are not honoured

  std::mutex allocations_mu_;
  std::unordered_map<CUdeviceptr, size_t> allocations_;

  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::atomic<bool> kick_{false};  // set with wake_mu_ held before notifying: no wake-up is lost
  pid_t owner_pid_ = 0;             // the process that connected (0: none did)
  std::atomic<bool> stop_{false};
  std::thread completion_thread_;
  std::once_flag shut_;
};

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

void fall_back_at_exit() { instance().shutdown(); }
// A child forked after the library connected shares the parent's socket and rings but has none of
// its threads: it runs pass-through and never touches the parent's connection (not even at exit).
void forked_child() { instance().became_child(); }

void Interceptor::fall_back(const std::string& why) {
  log("pass-through for the rest of this process: " + why);
  mode_.store(Mode::pass_through, std::memory_order_release);
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
  if (config_.log) log("registered as tenant " + std::to_string(client_->tenant()) + " (" + config_.tenant.name + ")");
}

void Interceptor::enter_context() {
  Status st = [this]() -> Status {
    CONCORD_INTERCEPT_CU(driver_->ctx_get_current(&context_));
    if (!context_) return Status::failed_precondition("the first launch came with no current CUDA context");
    CONCORD_INTERCEPT_CU(driver_->ctx_get_device(&device_));
    CONCORD_INTERCEPT_CU(driver_->ctx_get_stream_priority_range(&least_priority_, &greatest_priority_));
    return Status::ok();
  }();
  if (!st) {
    client_->close();
    fall_back(st.message());
    return;
  }
  completion_thread_ = std::thread([this] { completion_loop(); });
  mode_.store(Mode::active, std::memory_order_release);
}

Status Interceptor::connect() {
  ipc::TenantClientOptions options;
  options.socket_path = config_.socket_path;
  options.info = config_.tenant;
  options.info.pid = static_cast<int32_t>(getpid());
  auto client = ipc::TenantClient::connect(options);
  if (!client) return Status(client.status().code(), "no daemon at " + config_.socket_path + ": " + client.status().message());
  client_ = std::move(*client);
  return Status::ok();
}

uint64_t Interceptor::stream_key(CUstream app) const {
  if (app == nullptr || app == CU_STREAM_LEGACY) return kLegacyStreamKey;
  if (app == CU_STREAM_PER_THREAD) {
    // Each thread's default stream is its own stream: a key per thread (low bits 0x2; real stream
    // handles are aligned pointers).
    static std::atomic<uint64_t> next_thread{1};
    thread_local const uint64_t key = (next_thread.fetch_add(1, std::memory_order_relaxed) << 8) | 0x2;
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
  {
    std::lock_guard<std::mutex> lock(functions_mu_);
    if (auto it = functions_.find(function); it != functions_.end()) return it->second;
  }
  FunctionInfo info;
  const char* name = nullptr;
  if (!graph) {
    // A CUfunction, or a CUkernel (what the runtime launches since CUDA 12): ask as either.
    if (driver_->func_get_name(&name, reinterpret_cast<CUfunction>(const_cast<void*>(function))) != CUDA_SUCCESS) name = nullptr;
    if (!name && driver_->kernel_get_name(&name, reinterpret_cast<CUkernel>(const_cast<void*>(function))) != CUDA_SUCCESS) {
      name = nullptr;
    }
  }
  info.id = name ? kernel_id_of(name) : handle_id_of(reinterpret_cast<uint64_t>(function));
  std::lock_guard<std::mutex> lock(functions_mu_);
  return functions_.emplace(function, info).first->second;
}

void Interceptor::mark_green_failed(const void* function) {
  std::lock_guard<std::mutex> lock(functions_mu_);
  functions_[function].green_ok = false;
}

Result<CUstream> Interceptor::priority_shadow(CUstream app, uint64_t key, CUcontext ctx, int priority, bool* on_app) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  StreamState& state = streams_[{key, ctx}];
  if (!state.priority_known) {
    CONCORD_INTERCEPT_CU(driver_->stream_get_priority(app, &state.priority));
    state.priority_known = true;
  }
  if (state.priority == priority) {
    *on_app = true;
    return app;
  }
  *on_app = false;
  if (auto it = state.priority_shadows.find(priority); it != state.priority_shadows.end()) return it->second.get();
  CUstream raw = nullptr;
  CONCORD_INTERCEPT_CU(driver_->get<PFN_cuStreamCreateWithPriority_v5050>(Entry::StreamCreateWithPriority)(
      &raw, CU_STREAM_NON_BLOCKING, priority));
  return state.priority_shadows.emplace(priority, OwnedStream(driver_, raw)).first->second.get();
}

Result<HandoffEvents*> Interceptor::handoff_events(CUcontext ctx) {
  thread_local std::vector<HandoffEvents*> mine;  // this thread's, one pair per context
  for (HandoffEvents* e : mine) {
    if (e->context == ctx) return e;
  }
  auto events = std::make_unique<HandoffEvents>();
  events->context = ctx;
  CUevent before = nullptr, after = nullptr;
  CONCORD_INTERCEPT_CU(driver_->event_create(&before, CU_EVENT_DISABLE_TIMING));
  events->before = OwnedEvent(driver_, before);
  CONCORD_INTERCEPT_CU(driver_->event_create(&after, CU_EVENT_DISABLE_TIMING));
  events->after = OwnedEvent(driver_, after);
  HandoffEvents* pair = events.get();
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    handoffs_.push_back(std::move(events));
  }
  mine.push_back(pair);
  return pair;
}

Status Interceptor::handoff(CUstream from, CUstream to, CUevent event) {
  CONCORD_INTERCEPT_CU(driver_->event_record(event, from));
  CONCORD_INTERCEPT_CU(driver_->stream_wait_event(to, event, 0));
  return Status::ok();
}

Result<CUevent> Interceptor::take_event() {
  std::lock_guard<std::mutex> lock(events_mu_);
  if (!free_events_.empty()) {
    CUevent e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  CONCORD_INTERCEPT_CU(driver_->event_create(&e, CU_EVENT_DISABLE_TIMING));
  events_.emplace_back(driver_, e);
  return e;
}

void Interceptor::track(uint64_t seq, CUstream stream) {
  auto event = take_event();
  Status st = event ? driver_status(driver_->event_record(*event, stream), "cuEventRecord", __FILE__, __LINE__) : event.status();
  if (!st) {
    // Without an event the end cannot be seen: report it now rather than never.
    log("completion of launch " + std::to_string(seq) + " not tracked: " + st.message());
    if (event) {
      std::lock_guard<std::mutex> lock(events_mu_);
      free_events_.push_back(*event);
    }
    (void)client_->completed(seq, true);
    counters_.completions.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bool was_idle = false;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    was_idle = pending_.empty();
    pending_.emplace_back(seq, *event);
  }
  // The completion thread polls on its own while anything is pending: only an idle one needs waking
  // (a futex call per launch otherwise).
  if (was_idle) kick();
}

CUresult Interceptor::launch(const LaunchCall& call) {
  counters_.launches.fetch_add(1, std::memory_order_relaxed);
  Mode mode = started_mode();
  if (mode == Mode::connected) {
    std::call_once(context_once_, [this] { enter_context(); });
    mode = mode_.load(std::memory_order_acquire);
  }
  const CUstream app = (call.per_thread && call.stream == nullptr) ? CU_STREAM_PER_THREAD : call.stream;
  if (mode != Mode::active || client_->pass_through()) {
    counters_.passed_through.fetch_add(1, std::memory_order_relaxed);
    return call.invoke(call.args, call.stream);
  }
  if (capturing(app)) {
    counters_.captured.fetch_add(1, std::memory_order_relaxed);
    return call.invoke(call.args, call.stream);
  }
  if (call.graph) counters_.graphs.fetch_add(1, std::memory_order_relaxed);
  const uint64_t key = stream_key(app);
  const FunctionInfo info = function_info(call.function, call.graph);
  // Read before the notice: a launch noticed while the tenant runs free goes where the application
  // put it, unplaced.
  const bool free_run = client_->free_run();
  ipc::LaunchNotice notice;
  notice.stream = key;
  notice.kernel = info.id;
  notice.graph = call.graph;
  if (call.graph) {
    notice.grid = notice.block = ipc::Dim3{0, 0, 0};  // a graph has no one shape (the protocol wants zeros)
  } else {
    notice.grid = call.grid;
    notice.block = call.block;
    notice.shared_mem = call.shared_mem;
  }
  auto seq = client_->notice(notice);
  if (!seq || *seq == 0) {
    counters_.passed_through.fetch_add(1, std::memory_order_relaxed);
    return call.invoke(call.args, call.stream);
  }
  counters_.noticed.fetch_add(1, std::memory_order_relaxed);
  // A launch noticed in free run is released at once (the client knows which were); anything else
  // waits here, a hold included.
  ipc::Decision decision;
  if (auto d = client_->wait_release(*seq)) {
    decision = *d;
  } else if (config_.log) {
    log("launch " + std::to_string(*seq) + " released without a decision: " + d.status().message());
  }
  if (free_run && decision.sm_set == 0 && decision.priority == ipc::Priority::normal) {
    counters_.free_run.fetch_add(1, std::memory_order_relaxed);
    const CUresult r = call.invoke(call.args, call.stream);
    after_launch(r, *seq, app, app, nullptr, false);
    return r;
  }
  counters_.released.fetch_add(1, std::memory_order_relaxed);

  // Where the decision puts it.
  const int priority = decision.priority == ipc::Priority::high ? greatest_priority_ : least_priority_;
  CUcontext ctx = nullptr;
  CUstream target = app;
  bool green = false;
  Status st = driver_status(driver_->ctx_get_current(&ctx), "cuCtxGetCurrent", __FILE__, __LINE__);
  if (st && decision.sm_set != 0 && !call.graph && info.green_ok) {
    // Green contexts are made for the first launch's device only.
    if (GreenSets* sets = green_.load(std::memory_order_acquire); sets && ctx == context_) {
      if (auto s = sets->stream(decision.sm_set, key, priority)) {
        target = *s;
        green = true;
      } else if (config_.log) {
        log("SM set " + std::to_string(decision.sm_set) + " not honoured: " + s.status().message());
      }
    }
  }
  if (st && !green) {
    bool on_app = true;
    auto s = priority_shadow(app, key, ctx, priority, &on_app);
    if (s) target = *s;
    else st = s.status();
  }
  HandoffEvents* events = nullptr;
  if (st && target != app) {
    auto e = handoff_events(ctx);
    if (e) {
      events = *e;
      st = handoff(app, target, events->before.get());
    } else {
      st = e.status();
    }
  }
  if (!st) {
    // Nothing is lost but the placement: launch where the application asked.
    if (config_.log) log("launch " + std::to_string(*seq) + " placed on its own stream: " + st.message());
    target = app;
    green = false;
  }
  CUresult r = call.invoke(call.args, target == app ? call.stream : target);
  if (r != CUDA_SUCCESS && green) {
    // A function bound to another context (a CUfunction of the primary context) may not launch
    // on a green-context stream: remember it and launch on the application's stream.
    mark_green_failed(call.function);
    counters_.green_fallbacks.fetch_add(1, std::memory_order_relaxed);
    target = app;
    green = false;
    r = call.invoke(call.args, call.stream);
  }
  after_launch(r, *seq, app, target, events, green);
  return r;
}

void Interceptor::after_launch(CUresult r, uint64_t seq, CUstream app, CUstream target, HandoffEvents* events,
                               bool green) noexcept {
  // The launch is made: nothing here may throw back into launch(), whose caller would launch again.
  try {
    if (r != CUDA_SUCCESS) {
      // Refused before it ran (a bad configuration an autotuner probes, say): the context is fine,
      // so the daemon hears of an ended launch, not of a failure (which drops the tenant).
      counters_.failed_launches.fetch_add(1, std::memory_order_relaxed);
      (void)client_->completed(seq, true);
      return;
    }
    track(seq, target);
    if (target == app) return;
    (green ? counters_.on_green_stream : counters_.on_priority_stream).fetch_add(1, std::memory_order_relaxed);
    if (Status back = handoff(target, app, events->after.get()); !back) {
      // The application stream would no longer wait for this launch: wait on the host instead,
      // so that its order still holds.
      log("hand-off back to the application stream failed (" + back.message() + "); synchronising");
      driver_->get<PFN_cuStreamSynchronize_v2000>(Entry::StreamSynchronize)(target);
    }
  } catch (...) {
    // Out of memory for the bookkeeping: the launch stands; only its completion goes unreported.
    if (target != app) driver_->get<PFN_cuStreamSynchronize_v2000>(Entry::StreamSynchronize)(target);
  }
}

void Interceptor::stream_destroyed(CUstream stream) {
  if (mode_.load(std::memory_order_acquire) != Mode::active) return;
  const uint64_t key = stream_key(stream);
  std::lock_guard<std::mutex> lock(streams_mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = it->first.first == key ? streams_.erase(it) : std::next(it);
  }
}

void Interceptor::allocated(CUdeviceptr ptr, size_t bytes) {
  counters_.allocations.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(allocations_mu_);
  allocations_[ptr] = bytes;
  const uint64_t live = counters_.live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (live > counters_.peak_bytes.load(std::memory_order_relaxed)) counters_.peak_bytes.store(live, std::memory_order_relaxed);
}

void Interceptor::freed(CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(allocations_mu_);
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) return;  // not ours to count (allocated before the library saw it)
  counters_.frees.fetch_add(1, std::memory_order_relaxed);
  counters_.live_bytes.fetch_sub(it->second, std::memory_order_relaxed);
  allocations_.erase(it);
}

int Interceptor::request(bool begin) {
  (begin ? counters_.requests_begun : counters_.requests_ended).fetch_add(1, std::memory_order_relaxed);
  // A request may be marked before the process's first launch: register then.
  const Mode mode = started_mode();
  if ((mode != Mode::connected && mode != Mode::active) || client_->pass_through()) return 1;
  const Status st = begin ? client_->request_begin() : client_->request_end();
  if (!st) {
    if (config_.log) log(std::string("request ") + (begin ? "begin" : "end") + " not told: " + st.message());
    return 1;
  }
  return 0;
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

void Interceptor::poll_completions() {
  std::vector<std::pair<uint64_t, CUevent>> pending;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    pending.swap(pending_);
  }
  std::vector<std::pair<uint64_t, CUevent>> still;
  std::vector<CUevent> done;
  for (const auto& [seq, event] : pending) {
    const CUresult r = driver_->event_query(event);
    if (r == CUDA_ERROR_NOT_READY) {
      still.emplace_back(seq, event);
      continue;
    }
    (void)client_->completed(seq, r == CUDA_SUCCESS);
    counters_.completions.fetch_add(1, std::memory_order_relaxed);
    done.push_back(event);
  }
  std::lock_guard<std::mutex> lock(events_mu_);
  // Launches tracked meanwhile stay behind the older ones.
  still.insert(still.end(), pending_.begin(), pending_.end());
  pending_.swap(still);
  free_events_.insert(free_events_.end(), done.begin(), done.end());
}

void Interceptor::completion_loop() {
  // The thread's calls must not break another thread's stream capture (global capture mode
  // forbids "unsafe" calls in every thread not in relaxed mode).
  CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (driver_->ctx_set_current(context_) != CUDA_SUCCESS || driver_->thread_exchange_capture_mode(&relaxed) != CUDA_SUCCESS) {
    log("the completion thread could not enter the launch's context: completions are reported at launch");
  }
  const auto period = std::chrono::microseconds(config_.poll_us);
  while (!stop_.load(std::memory_order_acquire)) {
    take_announcements();
    poll_completions();
    bool idle;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      idle = pending_.empty();
    }
    std::unique_lock<std::mutex> lock(wake_mu_);
    // Idle: sleep until a launch is tracked (announcements are looked at every 10 ms).
    wake_.wait_for(lock, idle ? std::chrono::microseconds(10'000) : period,
                   [this] { return kick_.exchange(false) || stop_.load(std::memory_order_acquire); });
  }
  poll_completions();
}

void Interceptor::shutdown() {
  if (owner_pid_ != 0 && ::getpid() != owner_pid_) return;  // a forked child: the parent's connection is not its own
  std::call_once(shut_, [this] {
    if (completion_thread_.joinable()) {
      stop_.store(true, std::memory_order_release);
      kick();
      completion_thread_.join();
    }
    if (client_) client_->close();
    write_stats();
  });
}

void Interceptor::write_stats() const {
  if (config_.stats_path.empty()) return;
  FILE* f = std::fopen(config_.stats_path.c_str(), "w");
  if (!f) {
    log("cannot write CONCORD_INTERCEPT_STATS file " + config_.stats_path);
    return;
  }
  const Mode m = mode_.load();
  const char* mode = m == Mode::active        ? "active"
                     : m == Mode::connected   ? "connected"
                     : m == Mode::pass_through ? "pass_through"
                                               : "unstarted";
  const Counters& c = counters_;
  std::fprintf(f,
               "{\"mode\": \"%s\", \"daemon_gone\": %s, \"launches\": %llu, \"passed_through\": %llu, \"captured\": %llu, "
               "\"noticed\": %llu, \"free_run\": %llu, \"released\": %llu, \"on_priority_stream\": %llu, "
               "\"on_green_stream\": %llu, \"green_fallbacks\": %llu, \"graphs\": %llu, \"completions\": %llu, "
               "\"failed_launches\": %llu, \"synchronizations\": %llu, \"sm_sets_prepared\": %llu, "
               "\"requests_begun\": %llu, \"requests_ended\": %llu, \"allocations\": %llu, \"frees\": %llu, "
               "\"live_bytes\": %llu, \"peak_bytes\": %llu}\n",
               mode, client_ && client_->pass_through() ? "true" : "false",
               static_cast<unsigned long long>(c.launches.load()), static_cast<unsigned long long>(c.passed_through.load()),
               static_cast<unsigned long long>(c.captured.load()), static_cast<unsigned long long>(c.noticed.load()),
               static_cast<unsigned long long>(c.free_run.load()), static_cast<unsigned long long>(c.released.load()),
               static_cast<unsigned long long>(c.on_priority_stream.load()),
               static_cast<unsigned long long>(c.on_green_stream.load()),
               static_cast<unsigned long long>(c.green_fallbacks.load()), static_cast<unsigned long long>(c.graphs.load()),
               static_cast<unsigned long long>(c.completions.load()),
               static_cast<unsigned long long>(c.failed_launches.load()),
               static_cast<unsigned long long>(c.synchronizations.load()),
               static_cast<unsigned long long>(c.sm_sets_prepared.load()),
               static_cast<unsigned long long>(c.requests_begun.load()),
               static_cast<unsigned long long>(c.requests_ended.load()),
               static_cast<unsigned long long>(c.allocations.load()), static_cast<unsigned long long>(c.frees.load()),
               static_cast<unsigned long long>(c.live_bytes.load()), static_cast<unsigned long long>(c.peak_bytes.load()));
  std::fclose(f);
}

}  // namespace

CUresult intercept_launch(const LaunchCall& call) noexcept {
  try {
    return instance().launch(call);
  } catch (...) {
    // Nothing of the library's may fail the application's launch.
    return call.invoke(call.args, call.stream);
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
void note_synchronized() noexcept { instance().synchronized(); }

void note_allocated(CUdeviceptr ptr, size_t bytes) noexcept {
  try {
    instance().allocated(ptr, bytes);
  } catch (...) {
  }
}

void note_freed(CUdeviceptr ptr) noexcept {
  try {
    instance().freed(ptr);
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
