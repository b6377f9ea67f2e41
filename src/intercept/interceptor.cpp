#include "intercept/interceptor.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "intercept/completions.h"
#include "intercept/config.h"
#include "intercept/counters.h"
#include "intercept/green_sets.h"
#include "intercept/room.h"
#include "intercept/kernel_id.h"
#include "intercept/placement.h"
#include "intercept/real_driver.h"
#include "ipc/tenant_client.h"

namespace concord::intercept {
namespace {

constexpr uint64_t kLegacyStreamKey = 0x1;  // CU_STREAM_LEGACY's value: stream 0 outside _ptsz too
constexpr uint64_t kPerThreadKeyTag = 0x2;  // low bits of a per-thread default stream's key
// An LC stream with launches no marker covers gets one from the completion thread once it has been
// quiet this long (the end of a burst the application does not synchronise on: long enough that a
// framework's host work between two kernels of a burst rarely triggers one); a BE stream after the
// longer bound (its end matters only to the books and to in-flight caps).
constexpr uint64_t kLcTailNs = 200'000;
constexpr uint64_t kBeTailNs = 1'000'000;
// A launch waiting at its lease's in-flight cap goes anyway after this long without progress (the
// launches it waits for may be on a stream no marker can reach).
constexpr uint64_t kCapWaitBoundNs = 50'000'000;

struct FunctionInfo {
  uint64_t id = 0;
  bool green_ok = true;  // false once a launch of it on a green-context stream failed
  bool kernel_handle = false;  // a CUkernel (the runtime's), not a CUfunction: told by which name call answered
};

std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "tenant" : name;
}

class Interceptor {
 public:
  // unstarted -> connected (registered with the daemon; from the first launch, stream or request
  // mark) -> active (the first launch's context known, the completion thread running); or
  // pass_through.
  enum class Mode : int { unstarted, pass_through, connected, active };

  CUresult launch(const LaunchCall& call);
  // The priority a stream the application creates is made with: the lease's high one for an LC
  // tenant whose lease says so, else std::nullopt (as the application asked; `asked`: the
  // priority it asked for, std::nullopt for none).
  std::optional<int> new_stream_priority(std::optional<int> asked);
  void stream_destroyed(CUstream stream);
  void capture_begun() { captures_.fetch_add(1, std::memory_order_acq_rel); }
  void capture_ended() {
    int n = captures_.load(std::memory_order_acquire);
    while (n > 0 && !captures_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
    }
  }
  // In a child forked after the library connected (pthread_atfork): pass-through for good.
  void became_child() { mode_.store(Mode::pass_through, std::memory_order_release); }
  SyncMark sync_begin(CUstream stream, bool per_thread, bool whole_context);
  void sync_end(const SyncMark& mark, CUresult r);
  void allocated(CUdeviceptr ptr, size_t bytes);
  void freed(CUdeviceptr ptr);
  int request(bool begin);
  void shutdown();

 private:
  void start();
  Status connect();
  void enter_context();
  Mode started_mode();
  bool lc() const { return config_.tenant.cls == TenantClass::latency_critical; }
  void log(const std::string& line) const { std::fprintf(stderr, "concord-intercept: %s\n", line.c_str()); }
  void fall_back(const std::string& why);
  uint64_t stream_key(CUstream app) const;
  bool capturing(CUstream app) const;
  FunctionInfo function_info(const void* function, bool graph);
  void mark_green_failed(const void* function);
  // Launches `call` on `app` at `priority` (StreamPlacer), counting the route it took.
  CUresult launch_at(const LaunchCall& call, CUstream app, uint64_t key, int priority);
  CUresult launch_leased(const LaunchCall& call, CUstream app, uint64_t key, const FunctionInfo& info, ipc::LeaseTerms terms);
  CUresult launch_per_decision(const LaunchCall& call, CUstream app, uint64_t key, const FunctionInfo& info);
  ipc::LaunchNotice notice_of(const LaunchCall& call, uint64_t key, const FunctionInfo& info) const;
  // BE: waits while the lease's gate is closed, and at its in-flight cap; the admission in force
  // (its cap, and the room it asks for).
  ipc::Admission admit(ipc::LeaseTerms terms, CUstream app, uint64_t key);
  // A BE kernel launch confined as `a` asks (SM count, residency), on `app` at `priority`.
  CUresult launch_in_room(const LaunchCall& call, CUstream app, uint64_t key, int priority, const FunctionInfo& info,
                          const ipc::Admission& a);
  bool wait_below(uint32_t cap, CUstream app, uint64_t key);
  uint64_t in_flight() const { return book_->in_flight(); }
  // Books a noticed launch (made at `now_ns`) and records the marker that should follow it, if
  // any; whether it did.
  bool book(uint64_t key, CUstream app, uint64_t seq, uint64_t every, bool force, uint64_t now_ns);
  void raise_flag(uint32_t slot);
  void maybe_lower_flag();
  void wake_poller();
  void completion_loop();
  void take_announcements();
  void write_stats(bool daemon_gone) const;

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

  std::unique_ptr<StreamPlacer> placer_;  // made with the completion thread

  // What was launched and what is known to have ended (made with the completion thread).
  std::unique_ptr<CompletionBook> book_;

  // An LC tenant's flag on the node board: up from its first launch (or request mark) until its
  // launches have ended outside a request.
  std::atomic<bool> flag_up_{false};
  std::atomic<uint32_t> flag_slot_{ipc::kNoLcSlot};
  std::atomic<int> in_request_{0};  // requests begun and not ended (threads may overlap them)

  // Room for BE launches (made on the first launch that asks; null when it could not be).
  std::once_flag room_once_;
  std::unique_ptr<Room> room_owner_;
  std::atomic<Room*> room_{nullptr};  // published once made

  std::atomic<GreenSets*> green_{nullptr};
  std::unique_ptr<GreenSets> green_owner_;
  bool green_failed_ = false;  // the split or probe failed: SM sets are not honoured

  std::mutex allocations_mu_;
  std::unordered_map<CUdeviceptr, size_t> allocations_;

  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::atomic<bool> kick_{false};         // set with wake_mu_ held before notifying: no wake-up is lost
  std::atomic<bool> poller_idle_{false};  // the completion thread sleeps long: a launch wakes it
  pid_t owner_pid_ = 0;                   // the process that connected (0: none did)
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
  placer_ = std::make_unique<StreamPlacer>(*driver_);
  book_ = std::make_unique<CompletionBook>(*driver_, [this](uint64_t seq, uint64_t key, bool ok, uint64_t at_ns) {
    (void)client_->completed(seq, key, ok, at_ns);
  });
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
  {
    std::lock_guard<std::mutex> lock(functions_mu_);
    if (auto it = functions_.find(function); it != functions_.end()) return it->second;
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
  return functions_.emplace(function, info).first->second;
}

void Interceptor::mark_green_failed(const void* function) {
  std::lock_guard<std::mutex> lock(functions_mu_);
  functions_[function].green_ok = false;
}

CUresult Interceptor::launch_at(const LaunchCall& call, CUstream app, uint64_t key, int priority) {
  const StreamPlacer::Placed p = placer_->at_priority(call, app, key, priority);
  if (p.result == CUDA_SUCCESS && p.route == StreamPlacer::Route::priority_attribute) {
    counters_.priority_attribute.fetch_add(1, std::memory_order_relaxed);
  } else if (p.result == CUDA_SUCCESS && p.route == StreamPlacer::Route::shadow_stream) {
    counters_.on_priority_stream.fetch_add(1, std::memory_order_relaxed);
  }
  return p.result;
}

ipc::LaunchNotice Interceptor::notice_of(const LaunchCall& call, uint64_t key, const FunctionInfo& info) const {
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
  return notice;
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
  const ipc::LeaseTerms terms = client_->lease();
  if (terms.gate == ipc::Gate::per_launch) return launch_per_decision(call, app, key, info);
  return launch_leased(call, app, key, info, terms);
}

CUresult Interceptor::launch_leased(const LaunchCall& call, CUstream app, uint64_t key, const FunctionInfo& info,
                                    ipc::LeaseTerms terms) {
  uint32_t cap = 0;
  ipc::Admission admitted;
  if (!lc()) {
    admitted = admit(terms, app, key);
    cap = admitted.cap;
    terms = client_->lease();
  }
  // Counted before it goes out, so a flag is never lowered while it does.
  book_->launching();
  if (lc() && terms.lc_slot != ipc::kNoLcSlot) raise_flag(terms.lc_slot);
  const int priority = terms.priority == ipc::Priority::high ? greatest_priority_ : least_priority_;
  const bool room = !lc() && config_.room && !call.graph && (admitted.sms != 0 || admitted.blocks_per_sm != 0);
  const CUresult r = room ? launch_in_room(call, app, key, priority, info, admitted) : launch_at(call, app, key, priority);
  ipc::LaunchNotice notice = notice_of(call, key, info);
  const uint64_t now = ipc::monotonic_ns();
  notice.at_ns = now;
  auto seq = client_->notice(notice, /*launched=*/true);
  if (!seq || *seq == 0) {
    // Pass-through from here on: this launch is nobody's to track.
    book_->forget_one();
    return r;
  }
  counters_.noticed.fetch_add(1, std::memory_order_relaxed);
  counters_.leased.fetch_add(1, std::memory_order_relaxed);
  if (r != CUDA_SUCCESS) counters_.failed_launches.fetch_add(1, std::memory_order_relaxed);
  // A refused launch never runs, but a marker after it still says when its stream's earlier
  // launches ended (and so closes its own books).
  // A thread's per-thread default stream can get no tail marker from the completion thread: an LC
  // tenant marks every launch there, so that its flag never waits for a synchronisation.
  const bool own_thread_only = (key & 0xff) == kPerThreadKeyTag;
  const uint64_t every = cap > 0 ? std::max<uint64_t>(1, cap / 2) : (lc() && own_thread_only ? 1 : config_.marker_every);
  // The completion thread, if asleep, wakes for a marker to poll or an LC burst to follow (a BE
  // launch without a marker leaves it asleep: no wake-up call per launch).
  if (book(key, app, *seq, every, r != CUDA_SUCCESS, now) || lc()) wake_poller();
  return r;
}

CUresult Interceptor::launch_per_decision(const LaunchCall& call, CUstream app, uint64_t key, const FunctionInfo& info) {
  ipc::LaunchNotice notice = notice_of(call, key, info);
  auto seq = client_->notice(notice, /*launched=*/false);
  if (!seq || *seq == 0) {
    counters_.passed_through.fetch_add(1, std::memory_order_relaxed);
    return call.invoke(call.args, call.stream);
  }
  counters_.noticed.fetch_add(1, std::memory_order_relaxed);
  // Waits here until released, a hold included.
  ipc::Decision decision;
  if (auto d = client_->wait_release(*seq)) {
    decision = *d;
  } else if (config_.log) {
    log("launch " + std::to_string(*seq) + " released without a decision: " + d.status().message());
  }
  counters_.released.fetch_add(1, std::memory_order_relaxed);
  book_->launching();
  const int priority = decision.priority == ipc::Priority::high ? greatest_priority_ : least_priority_;
  CUresult r = CUDA_SUCCESS;
  bool placed = false;
  if (decision.sm_set != 0 && !call.graph && info.green_ok) {
    // An SM set: a stream of its green context (made for the first launch's device only).
    CUcontext ctx = nullptr;
    GreenSets* sets = green_.load(std::memory_order_acquire);
    if (sets && driver_->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx == context_) {
      Result<CUstream> green = sets->stream(decision.sm_set, key, priority);
      if (green) {
        r = placer_->on_green(call, app, *green).result;
        placed = r == CUDA_SUCCESS;
        if (placed) {
          counters_.on_green_stream.fetch_add(1, std::memory_order_relaxed);
        } else {
          // A function bound to another context (a CUfunction of the primary context) may not
          // launch on a green-context stream: remember it and launch where the application asked.
          mark_green_failed(call.function);
          counters_.green_fallbacks.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (config_.log) {
        log("SM set " + std::to_string(decision.sm_set) + " not honoured: " + green.status().message());
      }
    }
  }
  if (!placed) r = launch_at(call, app, key, priority);
  if (r != CUDA_SUCCESS) counters_.failed_launches.fetch_add(1, std::memory_order_relaxed);
  // Every launch its own marker: the engine matches each launch's end.
  book(key, app, *seq, 1, true, ipc::monotonic_ns());
  wake_poller();
  return r;
}

ipc::Admission Interceptor::admit(ipc::LeaseTerms terms, CUstream app, uint64_t key) {
  bool waited_gate = false, waited_cap = false;
  for (;;) {
    const ipc::Admission a = ipc::admission(terms, client_->lc_active());
    if (a.open) {
      if (a.cap == 0 || in_flight() < a.cap) return a;
      if (!waited_cap) counters_.cap_waits.fetch_add(1, std::memory_order_relaxed);
      waited_cap = true;
      if (!wait_below(a.cap, app, key)) return a;
    } else {
      if (!waited_gate) counters_.gate_waits.fetch_add(1, std::memory_order_relaxed);
      waited_gate = true;
      (void)client_->wait_open(100'000'000);
    }
    if (client_->pass_through()) return {};
    terms = client_->lease();
  }
}

CUresult Interceptor::launch_in_room(const LaunchCall& call, CUstream app, uint64_t key, int priority,
                                     const FunctionInfo& info, const ipc::Admission& a) {
  counters_.room_asked.fetch_add(1, std::memory_order_relaxed);
  std::call_once(room_once_, [this] {
    Result<std::unique_ptr<Room>> r = Room::create(*driver_, device_);
    if (r) {
      room_owner_ = std::move(*r);
      room_.store(room_owner_.get(), std::memory_order_release);
    } else if (config_.log) {
      log("room for BE launches not available: " + r.status().message());
    }
  });
  Room* const space = room_.load(std::memory_order_acquire);
  CUcontext ctx = nullptr;
  if (!space || driver_->ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != context_) {
    // Room is made for the first launch's context only.
    counters_.room_fallbacks.fetch_add(1, std::memory_order_relaxed);
    return launch_at(call, app, key, priority);
  }
  // The residency cap: the same launch with padded dynamic shared memory.
  struct Padded {
    const LaunchCall* base;
    uint32_t shared;
  } padded{&call, call.shared_mem};
  LaunchCall room = call;
  bool capped = false, failed = false;
  if (a.blocks_per_sm != 0) {
    Result<uint32_t> shared = call.invoke_shared ? space->shared_for(call.function, info.kernel_handle, call.block, call.shared_mem,
                                                                         static_cast<int>(a.blocks_per_sm))
                                                 : Result<uint32_t>(Status::unsupported("room: this launch cannot be padded"));
    if (!shared) {
      failed = true;
    } else if (*shared != call.shared_mem) {
      padded.shared = *shared;
      room.args = &padded;
      room.invoke = [](const void* p, CUstream target) {
        const Padded& x = *static_cast<const Padded*>(p);
        return x.base->invoke_shared(x.base->args, target, kNoPriority, x.shared);
      };
      room.invoke_priority = [](const void* p, CUstream target, int prio) {
        const Padded& x = *static_cast<const Padded*>(p);
        return x.base->invoke_shared(x.base->args, target, prio, x.shared);
      };
      capped = true;
    } else {
      counters_.room_unpadded.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // The SM-count cap: a stream of a green context of that many SMs, in the application stream's
  // order (event hand-offs).
  // A function that once failed there (bound to the primary context) goes out uncapped by count.
  if (a.sms != 0 && static_cast<int>(a.sms) < space->device().sm_count && !info.green_ok) failed = true;
  if (a.sms != 0 && static_cast<int>(a.sms) < space->device().sm_count && info.green_ok) {
    Result<CUstream> green = space->sm_stream(static_cast<int>(a.sms), key, priority);
    if (green) {
      CUresult r = placer_->on_green(room, app, *green).result;
      if (r != CUDA_SUCCESS && capped) {
        // The padding may be what the driver refused (the application set its own maximum
        // since): unpadded on the same stream, and the function is not padded again.
        space->padding_failed(call.function);
        capped = false;
        failed = true;
        r = placer_->on_green(call, app, *green).result;
      }
      if (r == CUDA_SUCCESS) {
        counters_.room_sms.fetch_add(1, std::memory_order_relaxed);
        if (capped) counters_.room_padded.fetch_add(1, std::memory_order_relaxed);
        if (failed) counters_.room_fallbacks.fetch_add(1, std::memory_order_relaxed);
        return r;
      }
      // A function bound to the primary context (a driver-API CUfunction) cannot launch there.
      mark_green_failed(call.function);
      counters_.green_fallbacks.fetch_add(1, std::memory_order_relaxed);
    } else if (config_.log) {
      log("SM-count cap of " + std::to_string(a.sms) + " not applied: " + green.status().message());
    }
    failed = true;
  }
  CUresult r = launch_at(room, app, key, priority);
  if (r == CUDA_SUCCESS && capped) counters_.room_padded.fetch_add(1, std::memory_order_relaxed);
  if (r != CUDA_SUCCESS && capped) {
    // The driver refused the padded launch (its shared memory): the launch as the application
    // made it, and the function is not padded again.
    space->padding_failed(call.function);
    r = launch_at(call, app, key, priority);
    failed = true;
  }
  if (failed) counters_.room_fallbacks.fetch_add(1, std::memory_order_relaxed);
  return r;
}

bool Interceptor::wait_below(uint32_t cap, CUstream app, uint64_t key) {
  // Something to wait for: a marker behind this stream's launches that none covers yet.
  (void)book_->mark_uncovered(key, app);
  const uint64_t deadline = ipc::monotonic_ns() + kCapWaitBoundNs;
  while (in_flight() >= cap) {
    book_->poll();
    if (in_flight() < cap || client_->pass_through()) return true;
    if (ipc::monotonic_ns() > deadline) return false;
    ipc::sleep_ns(10'000);
  }
  return true;
}

bool Interceptor::book(uint64_t key, CUstream app, uint64_t seq, uint64_t every, bool force, uint64_t now_ns) {
  const bool foreign_ok = (key & 0xff) != kPerThreadKeyTag;
  const auto [marker, count] = book_->book(key, app, foreign_ok, seq, every, force, now_ns);
  if (marker) book_->record_marker(app, key, seq, count);
  return marker;
}

void Interceptor::raise_flag(uint32_t slot) {
  if (flag_up_.load() && flag_slot_.load(std::memory_order_relaxed) == slot) return;
  flag_slot_.store(slot, std::memory_order_relaxed);
  if (!flag_up_.exchange(true)) {
    client_->raise_lc(slot);
    counters_.lc_raises.fetch_add(1, std::memory_order_relaxed);
    wake_poller();
  }
}

void Interceptor::maybe_lower_flag() {
  // Sequentially consistent with raise_flag's and launching()'s operations: of a launch counted
  // and a lowering, at least one sees the other (a store-buffer pattern).
  if (!flag_up_.load()) return;
  if (in_flight() > 0 || in_request_.load() > 0) return;
  flag_up_.store(false);
  const uint32_t slot = flag_slot_.load(std::memory_order_relaxed);
  client_->lower_lc(slot);
  // A launch (or request mark) that came in between the check and the store raised nothing: raise
  // again for it.
  if ((in_flight() > 0 || in_request_.load() > 0) && !flag_up_.exchange(true)) client_->raise_lc(slot);
}

void Interceptor::wake_poller() {
  if (poller_idle_.load(std::memory_order_relaxed) && poller_idle_.exchange(false, std::memory_order_acq_rel)) {
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      kick_.store(true, std::memory_order_release);
    }
    wake_.notify_one();
  }
}

std::optional<int> Interceptor::new_stream_priority(std::optional<int> asked) {
  const Mode mode = started_mode();
  if ((mode != Mode::connected && mode != Mode::active) || client_->pass_through() || !lc()) return std::nullopt;
  if (client_->lease().priority != ipc::Priority::high) return std::nullopt;
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
  if (mark.covered.empty() || r != CUDA_SUCCESS || client_->pass_through()) return;
  // Everything launched on those streams before the synchronisation began has ended.
  book_->after_sync(mark.covered, ipc::monotonic_ns());
  maybe_lower_flag();
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
    client_->flush();
    // Polled often while markers are pending, or while an LC tenant's flag is up or its launches
    // are in flight (its burst's end lowers the flag); a BE tenant's uncovered launches wait for a
    // synchronisation or its tail marker (checked at the idle period).
    const auto busy = [this] {
      return book_->markers_pending() || flag_up_.load(std::memory_order_acquire) || (lc() && book_->in_flight() > 0);
    };
    std::unique_lock<std::mutex> lock(wake_mu_);
    if (busy()) {
      wake_.wait_for(lock, period, [this] { return kick_.exchange(false) || stop_.load(std::memory_order_acquire); });
      continue;
    }
    // Idle: sleep until a launch wakes it, or 10 ms. The flag is set before the last look, so a
    // launch in between either is seen or wakes it.
    poller_idle_.store(true, std::memory_order_release);
    if (!busy()) {
      wake_.wait_for(lock, std::chrono::milliseconds(10),
                     [this] { return kick_.exchange(false) || stop_.load(std::memory_order_acquire); });
    }
    poller_idle_.store(false, std::memory_order_release);
  }
  book_->poll();
}

void Interceptor::shutdown() {
  if (owner_pid_ != 0 && ::getpid() != owner_pid_) return;  // a forked child: the parent's connection is not its own
  std::call_once(shut_, [this] {
    if (completion_thread_.joinable()) {
      stop_.store(true, std::memory_order_release);
      {
        std::lock_guard<std::mutex> lock(wake_mu_);
        kick_.store(true, std::memory_order_release);
      }
      wake_.notify_one();
      completion_thread_.join();
    }
    // Whether the daemon went away while the process ran (closing turns the client pass-through).
    const bool daemon_gone = client_ && client_->pass_through();
    if (client_) {
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
  if (Status st = write_counters(config_.stats_path, mode, daemon_gone, counters_,
                                 book_ ? book_->markers() : 0, book_ ? book_->reported() : 0, book_ ? book_->queries() : 0);
      !st) {
    log(st.message());
  }
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
