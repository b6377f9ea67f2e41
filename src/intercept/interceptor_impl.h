// The interception library's insides, shared by interceptor.cpp (start, context, notes from the
// hooks, the completion thread, shutdown) and interceptor_launch.cpp (the launch path: leases,
// per-launch decisions, room, completion markers, the LC flag). Never included elsewhere.
#pragma once

#include "intercept/interceptor.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
#include "intercept/memory_book.h"
#include "intercept/launch_route.h"
#include "intercept/real_driver.h"
#include "intercept/thread_cache.h"
#include "intercept/wake_word.h"
#include "ipc/tenant_client.h"

namespace concord::intercept::impl {

inline constexpr uint64_t kLegacyStreamKey = 0x1;  // CU_STREAM_LEGACY's value: stream 0 outside _ptsz too
inline constexpr uint64_t kPerThreadKeyTag = 0x2;  // low bits of a per-thread default stream's key
// An LC stream with launches no marker covers gets one from the completion thread once it has been
// quiet this long (the end of a burst the application does not synchronise on: long enough that a
// framework's host work between two kernels of a burst rarely triggers one); a BE stream after the
// longer bound (its end matters only to the books and to in-flight caps).
inline constexpr uint64_t kLcTailNs = 200'000;
inline constexpr uint64_t kBeTailNs = 1'000'000;
// A launch waiting at its lease's in-flight cap goes anyway after this long without progress (the
// launches it waits for may be on a stream no marker can reach).
inline constexpr uint64_t kCapWaitBoundNs = 50'000'000;
// The tenant's memory in use goes to the daemon at most this often once the completion thread runs.
inline constexpr uint64_t kMemoryReportNs = 100'000'000;
// An allocation refused for the quota is said on stderr at most once this often (with a count).
inline constexpr uint64_t kMemoryRefusalLogNs = 10'000'000'000;

struct FunctionInfo {
  uint64_t id = 0;
  bool green_ok = true;  // false once a launch of it on a green-context stream failed
  bool kernel_handle = false;  // a CUkernel (the runtime's), not a CUfunction: told by which name call answered
};

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
  // After a failure of the library's own on the launch path (its books may be half-written):
  // pass-through for good, the LC flag lowered and the daemon told, one line on stderr.
  void give_up(const std::string& why) noexcept;
  SyncMark sync_begin(CUstream stream, bool per_thread, bool whole_context);
  void sync_end(const SyncMark& mark, CUresult r);
  // The tenant's memory book (the process registered first, as at its first launch); null when the
  // library is disabled.
  MemoryBook* memory();
  // An allocation refused for the quota: one line on stderr now and then.
  void memory_refused(const char* call, uint64_t bytes);
  // The book changed: counted, and told to the daemon at most every kMemoryReportNs.
  void memory_changed(bool allocated, bool freed);
  int request(bool begin);
  void shutdown();

 private:
  void start();
  Status connect();
  std::string device_bus_id() const;
  std::string bus_id_of(CUdevice dev) const;  // its PCI bus id as the driver writes it ("" unknown)
  void enter_context();
  Mode started_mode();
  bool lc() const { return config_.tenant.cls == TenantClass::latency_critical; }
  void log(const std::string& line) const { std::fprintf(stderr, "concord-intercept: %s\n", line.c_str()); }
  void fall_back(const std::string& why);
  uint64_t stream_key(CUstream app) const;
  bool capturing(CUstream app) const;
  // Whether the current context is on the GPU the process registered for (its first launch's).
  bool on_own_gpu() const;
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
  // Posts the book's live and peak bytes to the daemon if they changed: at every change until the
  // first launch, then when the last report is kMemoryReportNs old (from whichever thread gets
  // there: an allocation's, or the completion thread, which tells the last change).
  void report_memory();
  // The GPU's total memory as the driver reports it (0: unknown), for the registration.
  uint64_t device_memory() const;

  std::atomic<Mode> mode_{Mode::unstarted};
  std::atomic<bool> gave_up_{false};
  std::once_flag started_;
  std::once_flag context_once_;
  InterceptConfig config_;
  const RealDriver* driver_ = nullptr;
  std::unique_ptr<ipc::TenantClient> client_;
  std::string bus_id_;  // the PCI bus id it registered with ("" unknown)
  CUcontext context_ = nullptr;  // the context of the first launch: the completion thread's
  CUdevice device_ = 0;
  int least_priority_ = 0, greatest_priority_ = 0;
  std::atomic<int> captures_{0};
  Counters counters_;

  std::mutex functions_mu_;
  std::unordered_map<const void*, FunctionInfo> functions_;
  ThreadCache<const void*, FunctionInfo, struct FunctionCacheTag> function_cache_;  // functions_, per thread

  std::unique_ptr<StreamPlacer> placer_;  // made with the completion thread

  // What was launched and what is known to have ended (made with the completion thread).
  std::unique_ptr<CompletionBook> book_;

  // An LC tenant's flag on its GPU's board: up from its first launch (or request mark) until its
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

  MemoryBook memory_;
  std::atomic<uint64_t> memory_reported_{~uint64_t{0}};  // the book's version last told to the daemon
  std::atomic<uint64_t> memory_report_ns_{0};            // and when

  WakeWord wake_;                         // the completion thread sleeps on it
  std::atomic<bool> poller_idle_{false};  // the completion thread sleeps long: a launch wakes it
  pid_t owner_pid_ = 0;                   // the process that connected (0: none did)
  std::atomic<bool> stop_{false};
  std::thread completion_thread_;
  std::once_flag shut_;
};

// The process's one Interceptor.
Interceptor& instance();

}  // namespace concord::intercept::impl
