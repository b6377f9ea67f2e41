// What the interception library did, counted as it goes and written as JSON at exit when
// CONCORD_INTERCEPT_STATS names a file (the GPU tests and benches read them to see that launches
// really went through the library, and by which path).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "concord/memory_quota.h"
#include "concord/status.h"

namespace concord::intercept {

struct Counters {
  std::atomic<uint64_t> launches{0};            // every launch a hook saw
  std::atomic<uint64_t> passed_through{0};      // no daemon (or disabled, or gone): the real call alone
  std::atomic<uint64_t> captured{0};            // into a capturing stream: untouched
  std::atomic<uint64_t> other_gpu{0};           // on a GPU other than the one the process registered for: untouched
  std::atomic<uint64_t> noticed{0};             // posted to the daemon
  std::atomic<uint64_t> leased{0};              // launched at once under an open lease
  std::atomic<uint64_t> gate_waits{0};          // waited for a closed gate first
  std::atomic<uint64_t> cap_waits{0};           // waited at the lease's in-flight cap first
  std::atomic<uint64_t> released{0};            // waited for a per-launch decision and released
  std::atomic<uint64_t> priority_attribute{0};  // given their lease's priority by a launch attribute
  std::atomic<uint64_t> on_priority_stream{0};  // released onto a priority shadow stream
  std::atomic<uint64_t> on_green_stream{0};     // released onto a green-context stream
  std::atomic<uint64_t> green_fallbacks{0};     // a green-context launch failed; relaunched on the app stream
  std::atomic<uint64_t> room_asked{0};          // BE kernel launches made while the lease asked for room
  std::atomic<uint64_t> room_sms{0};            // of which went out on an SM-count green context
  std::atomic<uint64_t> room_padded{0};         // of which went out with padded shared memory
  std::atomic<uint64_t> room_unpadded{0};       // of which needed no padding (already at or under the cap)
  std::atomic<uint64_t> room_fallbacks{0};      // of which a cap could not be applied (launched as asked)
  std::atomic<uint64_t> graphs{0};
  std::atomic<uint64_t> tail_markers{0};        // completion markers the completion thread recorded at a burst's end
  std::atomic<uint64_t> failed_launches{0};     // the real launch returned an error
  std::atomic<uint64_t> synchronizations{0};
  std::atomic<uint64_t> lc_raises{0};           // an LC tenant's flag raised
  std::atomic<uint64_t> streams_raised{0};      // streams created at the lease's high priority
  std::atomic<uint64_t> sm_sets_prepared{0};
  std::atomic<uint64_t> requests_begun{0};
  std::atomic<uint64_t> requests_ended{0};
  std::atomic<uint64_t> allocations{0};         // device allocations the library counted (VMM cuMemCreate included)
  std::atomic<uint64_t> frees{0};               // of which freed (VMM: the physical memory freed)
  std::atomic<uint64_t> reconnects{0};          // registered again after the daemon went (set at exit)
};

// The tenant's GPU memory at exit (intercept/memory_book.h).
struct MemoryCounts {
  uint64_t live = 0, peak = 0;
  uint64_t limit = kNoMemoryLimit, reserved = 0;  // the quota (kNoMemoryLimit: none)
  uint64_t refused = 0;                           // allocations refused for it
};

// Writes the counters to `path` as one JSON object, with the library's mode, whether the daemon
// went away, the completion markers recorded, completions reported and the event queries polls
// made, and the memory: live_bytes, peak_bytes, memory_limit (null: none), memory_reserved and
// memory_refused.
Status write_counters(const std::string& path, const char* mode, bool daemon_gone, const Counters& c, uint64_t markers,
                      uint64_t completions, uint64_t marker_queries, const MemoryCounts& memory);

}  // namespace concord::intercept
