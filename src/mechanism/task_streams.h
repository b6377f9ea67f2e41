// Task streams (RAISE paper, Section V-B, VI-A), a piece RAISE and its baselines compose: a task is one request
// of a tenant; it takes one of N_str streams from its first launch until its last completes, and
// all its launches run one block-size variant on the whole GPU. The policy that owns a TaskStreams
// says which waiting task starts next and with which variant, or holds (TaskChooser).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "concord/policy.h"

namespace concord::policy {

// A task waiting for a stream: the first launch of a tenant's request.
struct WaitingTask {
  LaunchId launch;
  TenantId tenant;
  int64_t request = 0;
};
struct TaskChoice {
  size_t index;  // into the waiting list
  int variant;
};

class TaskChooser {
 public:
  virtual ~TaskChooser() = default;
  // Picks the next task to start among `waiting` (first launches of requests, in ready order), or
  // nullopt to hold. Called while a stream is free.
  virtual std::optional<TaskChoice> choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) = 0;
};

class TaskStreams {
 public:
  // `ahead`: how many of a task's submitted later kernels wait on its stream behind the one
  // running: -1 all of them (a CUDA program puts its task's kernels on its stream at once,
  // RAISE paper, Section V-B), 0 none (each kernel launched by the host when the one before it has finished).
  // `burst`: at most this many kernels queued per scheduling call (0: no limit); the rest on a tick
  // at once, after the engine has taken the completions in between (queueing costs the host about
  // 10 us a kernel on the H200: a 20-kernel task queued in one go leaves other tasks' completions
  // unseen for 200 us).
  TaskStreams(int streams, int ahead, int burst) : streams_(streams), ahead_(ahead), burst_(burst) {}

  void reset() {
    active_.clear();
    running_ = 0;
  }
  // Retires finished tasks, runs the next launch of every running task, starts new tasks while a
  // stream is free, and queues running tasks' submitted kernels behind them.
  Status schedule(SchedContext& ctx, TaskChooser& chooser);

  // The tasks holding a stream now, by tenant, with their variants.
  struct Active {
    int64_t request = 0;
    int variant = 0;
  };
  // Calls f(tenant id, Active) for each running task, by tenant id.
  template <typename F>
  void for_each_active(F&& f) const {
    for (size_t t = 0; t < active_.size(); ++t) {
      if (active_[t]) f(static_cast<int64_t>(t), *active_[t]);
    }
  }
  int running_tasks() const { return running_; }
  int streams() const { return streams_; }
  int ahead() const { return ahead_; }

 private:
  Status queue_ahead(SchedContext& ctx);
  Status start_task(SchedContext& ctx, std::vector<WaitingTask>& waiting, const TaskChoice& c);

  int streams_;
  int ahead_ = -1;
  int burst_ = 4;
  // Per tenant id: its running task (a vector, not a map: a decision looks tasks up per ready launch).
  std::vector<std::optional<Active>> active_;
  int running_ = 0;
  const std::optional<Active>* active_of(TenantId t) const {
    const auto i = static_cast<size_t>(t.value);
    return i < active_.size() && active_[i] ? &active_[i] : nullptr;
  }
  // Per call, kept to reuse their storage: launches of running tasks to dispatch, tasks waiting.
  std::vector<std::pair<LaunchId, int>> continuing_;
  std::vector<char> live_;  // per tenant: its task still has a ready or running launch
  struct Flight {
    int count = 0;
    DispatchId last;
  };
  std::vector<Flight> flight_;  // per tenant: dispatches in flight and the latest
  std::vector<WaitingTask> waiting_;
};

// `ahead` ("task", the default, or a count >= 0) and `burst` (default 4, 0: no limit) of a
// task-stream policy.
struct QueueParams {
  int ahead = -1;
  int burst = 4;
};
Result<QueueParams> queue_params(const std::string& policy, const PolicyParams& params);

// Index of a kernel's largest-block variant (RAISE's "Max").
int max_variant(const KernelSpec& kernel);

}  // namespace concord::policy
