// The CUDA backend's completions: events timed against the clock, the completion thread that turns
// finished launches into Completions, and advance().
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
