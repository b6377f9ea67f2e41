// The interception library's launch path: under a lease (admission, the LC flag, room for BE
// launches), under per-launch decisions, and the completion markers that follow launches.
#include "intercept/interceptor_impl.h"

namespace concord::intercept::impl {

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
  if (!on_own_gpu()) {
    counters_.other_gpu.fetch_add(1, std::memory_order_relaxed);
    return call.invoke(call.args, call.stream);
  }
  if (call.graph) counters_.graphs.fetch_add(1, std::memory_order_relaxed);
  const uint64_t key = stream_key(app);
  const FunctionInfo info = function_info(call.function, call.graph);
  const ipc::LeaseTerms terms = client_->lease();
  if (terms.gate == LeaseGate::per_launch) return launch_per_decision(call, app, key, info);
  return launch_leased(call, app, key, info, terms);
}

bool Interceptor::on_own_gpu() const {
  // The process is a tenant of the GPU of its first launch's context: a launch on another GPU's
  // context is not the daemon's to see (its books, markers and rooms are that one context's). One
  // driver call per launch (the current context, a thread-local read); the device is asked again
  // only when this thread's context changes.
  thread_local CUcontext seen = nullptr;
  thread_local bool own = true;
  CUcontext ctx = nullptr;
  if (driver_->ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return true;  // the real call will say
  if (ctx != seen) {
    CUdevice dev = 0;
    own = ctx == context_ || (driver_->ctx_get_device(&dev) == CUDA_SUCCESS && dev == device_);
    seen = ctx;
  }
  return own;
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
        // The padding or the context refused it (the application may have set its own maximum
        // since; a function bound to the primary context cannot launch there): unpadded on the
        // same stream tells which, and only a refused padding is not tried again.
        r = placer_->on_green(call, app, *green).result;
        if (r == CUDA_SUCCESS) {
          space->padding_failed(call.function);
          capped = false;
          failed = true;
        }
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
  const CompletionBook::Booked b = book_->book(key, app, foreign_ok, seq, every, force, now_ns);
  if (b.marker) book_->record_marker(app, key, b.seq, b.count);
  return b.marker;
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
  // Sequentially consistent with the work counted before it (a marker, a launch) and with the
  // poller's store of poller_idle_ before its last look: of the two, at least one sees the other.
  if (poller_idle_.load(std::memory_order_seq_cst) && poller_idle_.exchange(false, std::memory_order_acq_rel)) wake_.wake();
}

}  // namespace concord::intercept::impl
