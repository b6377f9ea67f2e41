// The messages of a tenant's shared-memory rings: launch notices, completions and request
// boundaries up (tenant library -> daemon), decisions and SM-set announcements down, heartbeats
// and goodbyes both ways. Each declares its fields once (message_fields.h); protocol.h lists them.
#pragma once

#include <cstdint>
#include <vector>

#include "ipc/message_fields.h"

namespace concord::ipc {

// One kernel launch (or CUDA graph launch, placed as one unit) the process makes (under a lease:
// has made) or wants to make (per-launch decisions).
struct LaunchNotice {
  uint64_t seq = 0;     // 1, 2, ... per tenant, in the order the process launched
  uint64_t stream = 0;  // the process's stream handle, as an opaque id (stream order is per id)
  uint64_t kernel = 0;  // the function's id: a hash of its name, or the graph's
  Dim3 grid, block;     // zero for a graph launch (a graph has no one shape)
  uint32_t shared_mem = 0;
  bool graph = false;
  uint64_t at_ns = 0;   // CLOCK_MONOTONIC when the process launched it (or noticed it, per launch)
  bool operator==(const LaunchNotice&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.seq, "seq", kSeq);
    f(m.stream, "stream");
    f(m.kernel, "kernel");
    f(m.grid, "grid");
    f(m.block, "block");
    f(m.shared_mem, "shared_mem", Range{0, limits::kMaxSharedMemBytes, "{0} bytes, over {1}"});
    f(m.graph, "graph");
    f(m.at_ns, "at_ns");
  }
  // A graph launch carries no shape; any other, CUDA's limits on its grid and block.
  template <typename Bad>
  static Status check(const LaunchNotice& l, Bad bad);
};

enum class Verdict : uint8_t { release = 0, hold = 1 };
const char* to_string(Verdict verdict);
template <>
struct EnumRange<Verdict> {
  static constexpr uint8_t lo = 0, hi = 1;
  static constexpr const char* names = "release (0) or hold (1)";
};
// Placement's two stream priority levels: the device's least and greatest.
enum class Priority : uint8_t { normal = 0, high = 1 };
template <>
struct EnumRange<Priority> {
  static constexpr uint8_t lo = 0, hi = 1;
  static constexpr const char* names = "normal (0) or high (1)";
};

// The daemon's answer to a launch notice: release it now (on a stream of the priority, in the SM
// set the handle names; 0: the whole GPU) or hold it until a later decision releases it.
struct Decision {
  uint64_t seq = 0;
  Verdict verdict = Verdict::release;
  Priority priority = Priority::normal;
  uint32_t sm_set = 0;
  bool operator==(const Decision&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.seq, "seq", kSeq);
    f(m.verdict, "verdict");
    f(m.priority, "priority");
    f(m.sm_set, "sm_set");
  }
};

// A released launch ended on the device, and with it every earlier launch of the same stream
// (stream order: the library learns of ends from markers it records now and then and from the
// application's synchronisations, not from an event per launch). ok: no error reported for it.
// A launch ended before (by an earlier completion) may be named again: it changes nothing.
struct CompletionNotice {
  uint64_t seq = 0;
  uint64_t stream = 0;  // seq's stream, as its notice named it
  bool ok = true;
  uint64_t at_ns = 0;   // CLOCK_MONOTONIC when the library learned of the end
  bool operator==(const CompletionNotice&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.seq, "seq", kSeq);
    f(m.stream, "stream");
    f(m.ok, "ok");
    f(m.at_ns, "at_ns");
  }
};

struct Heartbeat {
  uint64_t sent_ns = 0;  // CLOCK_MONOTONIC of the sender
  bool operator==(const Heartbeat&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.sent_ns, "sent_ns");
  }
};

enum class ByeReason : uint8_t { exit = 0, shutdown = 1, error = 2 };
template <>
struct EnumRange<ByeReason> {
  static constexpr uint8_t lo = 0, hi = 2;
  static constexpr const char* names = "exit (0), shutdown (1) or error (2)";
};
// A goodbye: on the rings, either side's; on the control socket, the caller's tenants leave.
struct Bye {
  ByeReason reason = ByeReason::exit;
  bool operator==(const Bye&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.reason, "reason");
  }
};

// The SM set a handle names, sent down before any decision uses the handle (the library builds
// its green context then, so no launch waits for one). Handles are >= 1 (0 is the whole GPU) and
// never change meaning for the tenant's life. The bitmap: 64-bit words, SM s is bit s % 64 of
// word s / 64; at least one SM, no trailing zero word, at most limits::kMaxSms SMs.
struct SmSetAnnounce {
  uint32_t handle = 1;
  std::vector<uint64_t> words;
  bool operator==(const SmSetAnnounce&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.handle, "handle", Range{1, UINT32_MAX, "is {0} (the whole GPU needs no announcement)"});
    f(m.words, "words", Count{1, limits::kMaxSms / 64, 8, "{0} words, over {1} (1024 SMs)"});
  }
  template <typename Bad>
  static Status check(const SmSetAnnounce& a, Bad bad) {
    if (a.words.empty()) return bad("words", "is empty (an SM set has at least one SM)");
    if (a.words.back() == 0) return bad("words", "ends with a zero word (not the shortest form)");
    return Status::ok();
  }
};
// SM ids <-> an announcement's bitmap (ids outside 0..kMaxSms-1 are an invalid_argument).
Result<std::vector<uint64_t>> sm_words(const std::vector<int>& sms);
std::vector<int> sm_ids(const std::vector<uint64_t>& words);

// An LC request's boundary, posted by the library when the application calls
// concord_request_begin() / concord_request_end(): the launches noticed between a begin and its
// end are one request, whose latency runs from the begin to the end of its last launch.
// `last_seq` is the last launch noticed before the boundary (0: none yet), so the daemon can
// check the ring's order.
enum class RequestEdge : uint8_t { begin = 0, end = 1 };
template <>
struct EnumRange<RequestEdge> {
  static constexpr uint8_t lo = 0, hi = 1;
  static constexpr const char* names = "begin (0) or end (1)";
};
struct RequestBoundary {
  RequestEdge edge = RequestEdge::begin;
  uint64_t last_seq = 0;
  uint64_t at_ns = 0;  // CLOCK_MONOTONIC when the application marked it
  bool operator==(const RequestBoundary&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.edge, "edge");
    f(m.last_seq, "last_seq");
    f(m.at_ns, "at_ns");
  }
};

// The tenant's GPU memory as its library counts it (docs/intercept.md, "Memory"): allocated now
// and at most so far, posted when it changed, at most every 100 ms. For the daemon's metrics and
// `concord top`; its books of quotas never read it (a tenant's word on its own use decides nothing).
struct MemoryUsage {
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
  bool operator==(const MemoryUsage&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.live_bytes, "live_bytes", at_most(limits::kMaxMemoryBytes));
    f(m.peak_bytes, "peak_bytes", at_most(limits::kMaxMemoryBytes));
  }
  template <typename Bad>
  static Status check(const MemoryUsage& u, Bad bad) {
    if (u.peak_bytes < u.live_bytes) return bad("peak_bytes", "is below live_bytes");
    return Status::ok();
  }
};

template <typename Bad>
Status LaunchNotice::check(const LaunchNotice& l, Bad bad) {
  if (l.graph) {
    if (l.grid != Dim3{0, 0, 0} || l.block != Dim3{0, 0, 0} || l.shared_mem != 0) {
      return bad("grid", "a graph launch carries no grid, block or shared memory (all must be 0)");
    }
    return Status::ok();
  }
  const auto outside = [&bad](const char* field, uint32_t v, uint32_t hi) -> Status {
    if (v >= 1 && v <= hi) return Status::ok();
    return bad(field, std::to_string(v) + " is outside 1.." + std::to_string(hi));
  };
  CONCORD_RETURN_IF_ERROR(outside("grid.x", l.grid.x, limits::kMaxGridX));
  CONCORD_RETURN_IF_ERROR(outside("grid.y", l.grid.y, limits::kMaxGridYZ));
  CONCORD_RETURN_IF_ERROR(outside("grid.z", l.grid.z, limits::kMaxGridYZ));
  CONCORD_RETURN_IF_ERROR(outside("block.x", l.block.x, limits::kMaxBlockThreads));
  CONCORD_RETURN_IF_ERROR(outside("block.y", l.block.y, limits::kMaxBlockThreads));
  CONCORD_RETURN_IF_ERROR(outside("block.z", l.block.z, limits::kMaxBlockZ));
  const uint64_t threads = uint64_t(l.block.x) * l.block.y * l.block.z;
  if (threads > limits::kMaxBlockThreads) {
    return bad("block", std::to_string(threads) + " threads, over " + std::to_string(limits::kMaxBlockThreads));
  }
  return Status::ok();
}

}  // namespace concord::ipc
