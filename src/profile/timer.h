// Timing launches through the Backend interface, for the profilers (profiler.cpp,
// src/policy/aker/aker_profiler.cpp): the same code on the simulator and on the GPU.
#pragma once

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "concord/backend.h"

namespace concord::profile {

// One launch to time: a kernel variant, its logical blocks and its placement; with a partner, a
// fused launch (self_parts of this kernel and partner_parts of the partner in each block).
struct Launch {
  const KernelSpec* kernel = nullptr;
  int variant = 0;
  BlockRange range;
  Placement placement;
  TenantId tenant{0};
  DispatchId after;  // stream order behind this dispatch (invalid: none)
  struct Partner {
    const KernelSpec* kernel = nullptr;
    int variant = 0;
    BlockRange range;
    TenantId tenant{1};
    int self_parts = 1;
    int partner_parts = 1;
  };
  std::optional<Partner> partner;
};

// Starts dispatches on a backend and collects their completions: durations are a completion's
// end minus its start, as the backend measured them (events on the GPU, model time in the sim).
class Timer {
 public:
  explicit Timer(Backend& backend) : b_(backend) {}

  // Whether the backend can run `l` as placed (its can_implement).
  Status can_run(const Launch& l) const { return b_.can_implement(request(l, DispatchId{next_dispatch_}, next_launch_)); }

  Result<DispatchId> start(const Launch& l) {
    const DispatchRequest r = request(l, DispatchId{next_dispatch_++}, next_launch_);
    next_launch_ += static_cast<int64_t>(r.parts.size());
    CONCORD_RETURN_IF_ERROR(b_.dispatch(r));
    pending_.insert(r.id);
    return r.id;
  }

  // Waits for every started dispatch; returns their completions by id.
  Result<std::map<DispatchId, Completion>> wait_all() {
    std::map<DispatchId, Completion> out;
    while (!pending_.empty()) {
      auto done = b_.advance(std::numeric_limits<double>::infinity());
      if (!done) return done.status();
      if (done->empty() && b_.running() == 0) {
        return Status::internal("profiler: the backend runs nothing but " + std::to_string(pending_.size()) +
                                " dispatches never completed");
      }
      for (Completion& c : *done) {
        if (c.preempted) return Status::internal("profiler: dispatch " + std::to_string(c.dispatch.value) + " was preempted");
        pending_.erase(c.dispatch);
        out[c.dispatch] = std::move(c);
      }
    }
    return out;
  }

  // Median duration of `reps` runs of `l`, after one warm-up run (the first run of a kernel on a
  // backend also prepares it).
  Result<double> median(const Launch& l, int reps) {
    std::vector<double> times;
    for (int r = 0; r < reps + 1; ++r) {
      auto id = start(l);
      if (!id) return id.status();
      auto done = wait_all();
      if (!done) return done.status();
      const Completion& c = done->at(*id);
      if (r > 0) times.push_back(c.end - c.start);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

 private:
  static DispatchRequest request(const Launch& l, DispatchId id, int64_t first_launch) {
    DispatchRequest r;
    r.id = id;
    DispatchPart part;
    part.launch = LaunchId{first_launch};
    part.tenant = l.tenant;
    part.kernel = l.kernel;
    part.variant = l.variant;
    part.range = l.range;
    r.placement = l.placement;
    r.placement.variant = l.variant;
    r.placement.range = l.range;
    r.after = l.after;
    if (l.partner) {
      part.parts_per_block = l.partner->self_parts;
      DispatchPart other;
      other.launch = LaunchId{first_launch + 1};
      other.tenant = l.partner->tenant;
      other.kernel = l.partner->kernel;
      other.variant = l.partner->variant;
      other.range = l.partner->range;
      other.parts_per_block = l.partner->partner_parts;
      r.placement.fusion = Fusion{other.launch, other.range, l.partner->self_parts, l.partner->partner_parts, other.variant};
      r.parts.push_back(part);
      r.parts.push_back(other);
    } else {
      r.parts.push_back(part);
    }
    return r;
  }

  Backend& b_;
  int64_t next_dispatch_ = 0;
  int64_t next_launch_ = 0;
  std::set<DispatchId> pending_;
};

}  // namespace concord::profile
