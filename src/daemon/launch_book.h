// LaunchBook: one tenant's launches on the daemon's side, one record each, from its notice to the
// moment neither the tenant nor the engine needs it.
//
// A record's life has two sides, each one field:
// - what the tenant was told and said (`Told`): noticed, then held or released, then ended; a
//   launch under an open lease is released when noticed, and one released ahead of the engine (a
//   follow-on) may end before the engine dispatches it.
// - where the engine has it (`EngineStep`): waiting in the inbox, queued, running (dispatched),
//   done (finished, dropped with its tenant, or no engine at all: the lease form).
// A record goes when it has ended and the engine is done with it.
//
// The hub writes what comes up the ring (notice, end, request edges) in ring order and checks it:
// a message out of order is refused by name and changes nothing. The source and the backend move
// the engine's side. Per tenant, launches reach the engine, are decided and are dispatched in
// their order (seq), so the queued, undecided and held launches are each a run of consecutive
// seqs: the book keeps cursors into one map, not a container each.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "concord/ids.h"
#include "concord/status.h"
#include "ipc/protocol.h"

namespace concord::daemon {

enum class Told : uint8_t { noticed, held, released, ended };
enum class EngineStep : uint8_t { inbox, queued, running, done };

struct LaunchRecord {
  uint64_t stream = 0;
  Told told = Told::noticed;
  EngineStep engine = EngineStep::done;
  bool followed = false;  // released by the daemon ahead of the engine's dispatch
  std::chrono::steady_clock::time_point held_since{};
  DispatchId dispatch;    // while running
  uint64_t next_on_stream = 0;  // the stream's next launch not ended (0: none)
};

class LaunchBook {
 public:
  // `engine`: whether an engine takes these launches (per-launch policies); without one (the lease
  // form) a record goes at its end.
  explicit LaunchBook(size_t max_outstanding = ipc::kMaxOutstandingLaunches, bool engine = true)
      : max_outstanding_(max_outstanding), engine_(engine) {}

  // The tenant's side, from its ring (the hub).
  // Launch `seq` on `stream` (`released`: launched already, under a lease: no decision follows).
  Status notice(uint64_t seq, uint64_t stream, bool released);
  // The launch `seq` of `stream` ended, and with it every earlier launch of that stream: the seqs
  // that ended now, ascending (none when they had ended before). An error when seq was never
  // noticed, was noticed on another stream, or an earlier launch of the stream was not released.
  Result<std::vector<uint64_t>> end(uint64_t seq, uint64_t stream);
  // A request's begin or end mark (LC tenants).
  void request_edge(bool begin) { in_request_ = begin; }
  bool in_request() const { return in_request_; }
  uint64_t last_noticed() const { return last_noticed_; }

  // The engine's side (the source and the backend).
  // The source gave the engine launch `seq` (noticed earlier, in order).
  Status queue(uint64_t seq);
  // A decision sent to the tenant: checked as the tenant's library checks it. Holding stamps
  // `now`; releasing a held launch returns how long it was held.
  Result<std::chrono::steady_clock::duration> decide(uint64_t seq, ipc::Verdict verdict, std::chrono::steady_clock::time_point now,
                                                     bool follow_on = false);
  // The oldest queued launch, now running as `dispatch` (the engine dispatches a tenant's
  // launches in order): its record, or nothing when none is queued.
  std::optional<std::pair<uint64_t, LaunchRecord*>> dispatch_next(DispatchId dispatch);
  // The engine is done with running launch `seq` (it finished, or failed with its tenant).
  void finish(uint64_t seq);
  // The engine lets go of what it had not dispatched (those launches are decided by nobody now).
  void forget_queued();
  // The engine dropped the tenant: what it had not dispatched is forgotten, what runs fails.
  void drop();
  bool dropped() const { return dropped_; }

  // Queued launches no decision has been sent for, ascending (the backend holds or follows them).
  std::vector<uint64_t> undecided();
  std::optional<uint64_t> oldest_held() const;
  // Launches running (dispatched, not finished), with their dispatches.
  std::vector<std::pair<uint64_t, DispatchId>> running_dispatches() const;
  std::optional<DispatchId> running_as(uint64_t seq) const;
  // What the tenant was told of launch `seq` (ended when the book no longer has it).
  Told told(uint64_t seq) const {
    const auto it = records_.find(seq);
    return it == records_.end() ? Told::ended : it->second.told;
  }
  // Queued launches not yet dispatched, ascending.
  std::vector<uint64_t> queued_seqs() const;

  size_t outstanding() const { return outstanding_; }  // noticed, not ended
  size_t queued() const { return queued_; }            // queued, not dispatched
  size_t running() const { return running_; }          // dispatched, not finished
  size_t in_flight() const { return in_flight_; }      // released, not ended
  size_t held() const { return held_; }
  size_t records() const { return records_.size(); }

 private:
  struct StreamRun {
    uint64_t first = 0, last = 0;  // its launches not ended, linked through next_on_stream
  };
  void set_engine(LaunchRecord& r, EngineStep step);
  // The engine is done with the records from `from` on that are at `step`.
  void let_go(uint64_t from, EngineStep step);
  void erase_if_spent(std::map<uint64_t, LaunchRecord>::iterator it);

  size_t max_outstanding_;
  bool engine_;
  bool dropped_ = false;
  bool in_request_ = false;
  uint64_t last_noticed_ = 0;
  std::map<uint64_t, LaunchRecord> records_;
  std::map<uint64_t, StreamRun> streams_;
  // Cursors (the runs above): the next launch the engine gets, the first queued one not decided,
  // the oldest held one, the next one it dispatches.
  uint64_t next_queue_ = 1, next_undecided_ = 1, next_dispatch_ = 1;
  size_t outstanding_ = 0, queued_ = 0, running_ = 0, in_flight_ = 0, held_ = 0;
};

}  // namespace concord::daemon
