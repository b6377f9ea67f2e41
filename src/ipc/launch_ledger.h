// One tenant's launches in order, as both ends of the rings keep them (src/ipc/protocol.h has the
// messages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "concord/status.h"
#include "ipc/protocol.h"

namespace concord::ipc {

// The library's books of its launches that wait for a decision: noticed (ascending seqs, each on a
// stream; the launches between them went out under a lease and are not booked), held, released,
// completed. The library checks the decisions that come down against it, and that a completion it
// sends covers no launch still waiting. A message out of order is refused by name and changes
// nothing. (The daemon's books, one record per launch of every kind, are its LaunchBook.)
class LaunchLedger {
 public:
  explicit LaunchLedger(size_t max_outstanding = 4096) : max_outstanding_(max_outstanding) {}
  Status notice(uint64_t seq, uint64_t stream);
  Status decision(const Decision& decision);
  // The launch `seq` of `stream` ended, and with it every earlier launch of that stream: the
  // booked seqs that ended now, ascending (none when they had ended before, or none was booked).
  // An error when seq was booked on another stream, or an earlier booked launch of the stream was
  // not released.
  Result<std::vector<uint64_t>> completion(uint64_t seq, uint64_t stream);
  uint64_t last_noticed() const { return last_noticed_; }
  size_t outstanding() const { return states_.size(); }

 private:
  enum class State : uint8_t { noticed, held, released };
  struct Entry {
    State state = State::noticed;
    uint64_t stream = 0;
  };
  size_t max_outstanding_;
  uint64_t last_noticed_ = 0;
  std::map<uint64_t, Entry> states_;
  std::map<uint64_t, std::deque<uint64_t>> by_stream_;  // outstanding seqs of each stream, ascending
};

}  // namespace concord::ipc
