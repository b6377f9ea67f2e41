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

// The order of one tenant's launches through their life: noticed (seq 1, 2, ... with no gap, each
// on a stream), held, released, completed. The daemon checks the notices and completions it takes;
// the library checks the decisions it takes. A message out of order is refused by name and
// changes nothing.
class LaunchLedger {
 public:
  explicit LaunchLedger(size_t max_outstanding = 4096) : max_outstanding_(max_outstanding) {}
  // `released`: launched already (under a lease), so no decision follows.
  Status notice(uint64_t seq, uint64_t stream, bool released = false);
  Status decision(const Decision& decision);
  // The launch `seq` of `stream` ended, and with it every earlier launch of that stream: the seqs
  // that ended now, ascending (none when they had ended before). An error when seq was never
  // noticed, was noticed on another stream, or an earlier launch of the stream was not released.
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
