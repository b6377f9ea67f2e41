// Task-stream scheduling shared by RAISE and its baselines (raise.md V-B, VI-A): a task is one
// request of a tenant; it takes one of N_str streams from its first launch until its last
// completes, and all its launches run one block-size variant on the whole GPU. Subclasses pick
// which waiting task starts next and with which variant, or hold.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "concord/policy.h"
#include "concord/raise.h"

namespace concord::policy {

// What the schedulers know of a task type (a tenant): its RAISE vector per variant and class.
struct TaskInfo {
  std::vector<RaiseVector> vectors;  // per variant of its kernels
  RaiseClass cls = RaiseClass::lat;  // the tenant's raise_type, else by its largest-block variant's vector (raise.md VI-A)
  size_t class_variant = 0;          // that variant: the vector `cls` was read from
  bool measured = true;              // false when any kernel's metrics were estimated
};

// A kernel variant's RAISE vector: measured (profiled with `concord profile raise`) or, when
// absent, estimated from the roofline (docs/policies.md says how).
RaiseVector kernel_raise_vector(const KernelSpec& kernel, int variant, const Estimator& estimator);
// A tenant's vectors: its kernels' vectors weighted by estimated time x count (raise.md VI-A).
TaskInfo task_info(const TenantSpec& tenant, const Estimator& estimator);

class TaskStreamPolicy : public Policy {
 public:
  explicit TaskStreamPolicy(int streams) : streams_(streams) {}
  Status on_start(SchedContext& ctx) override;
  // How many of a task's later kernels wait on its stream behind the one running
  // (SchedContext::queue_next): -1 all of them (the default: a CUDA program puts its task's
  // kernels on its stream at once, raise.md V-B), 0 none (each kernel launched by the host when
  // the one before it has finished: a host round trip per kernel).
  void set_ahead(int ahead) { ahead_ = ahead; }
  int ahead() const { return ahead_; }
  // At most this many kernels queued per scheduling call (0: no limit); the rest on a tick at
  // once, after the engine has taken the completions in between. Queueing costs the host about
  // 10 us a kernel on the H200: a 20-kernel task queued in one go leaves other tasks'
  // completions unseen for 200 us.
  void set_burst(int burst) { burst_ = burst; }
  // Hand-off: once a running task's last kernel is on its stream, decide now which task takes that
  // stream when it ends (with the ending task's resources counted free) and dispatch its first
  // kernel behind that last one (SchedContext::dispatch_after), so it starts when the GPU finishes
  // the task instead of a host round trip later (30-66 us on the H200, bench/raise/gaps.py). Off (the default): the
  // host starts the next task when it sees the completion. Measured on the H200 (docs/results.md):
  // it commits the next task to that stream, so it cannot start earlier when another task ends
  // first, and it holds its resources meanwhile; RAISE lost 3-9% with it at 36-120 tasks.
  void set_handoff(bool on) { handoff_ = on; }

 protected:
  struct Waiting {
    LaunchId launch;
    TenantId tenant;
    int64_t request = 0;
  };
  struct Choice {
    size_t index;  // into the waiting list
    int variant;
  };
  // Picks the next task to start among `waiting` (first launches of requests, in ready order), or
  // nullopt to hold. Called while a stream is free, or for a hand-off while the task releasing()
  // names is about to end (its resources then count as free).
  virtual std::optional<Choice> choose(SchedContext& ctx, const std::vector<Waiting>& waiting) = 0;

  Status schedule(SchedContext& ctx) override;
  const TaskInfo& info(TenantId t) const { return infos_[static_cast<size_t>(t.value)]; }
  const std::vector<TaskInfo>& infos() const { return infos_; }
  // Tasks holding a stream: running, or handed a stream that a running task will free.
  int running_tasks() const { return static_cast<int>(active_.size()); }
  // The tasks running now (and those handed a stream), by tenant, with their variants.
  struct Active {
    int64_t request = 0;
    int variant = 0;
    int64_t behind = -1;   // handed off: starts when this tenant's task ends
    int64_t handed = -1;   // the tenant whose task takes this one's stream when it ends
  };
  const std::map<int64_t, Active>& active() const { return active_; }
  // During a hand-off decision: the tenant whose task is about to end (its resources count as
  // free); -1 otherwise.
  int64_t releasing() const { return releasing_; }
  int streams() const { return streams_; }

 private:
  // Queues the kernels of running tasks behind their latest dispatch, up to `ahead_`.
  Status queue_ahead(SchedContext& ctx);
  // A task's dispatches in flight (running or queued behind) and the latest of them (null: none).
  static std::pair<int, const RunningDispatch*> in_flight_of(const SchedContext& ctx, int64_t tenant);
  // Hands the streams of tasks whose last kernel is dispatched to their successors.
  Status hand_off(SchedContext& ctx, const std::vector<ReadyLaunch>& ready, std::vector<Waiting>& waiting);
  // Dispatches the first launch of waiting[c.index] (behind `after` when valid) and records it.
  Status start_task(SchedContext& ctx, const std::vector<ReadyLaunch>& ready, std::vector<Waiting>& waiting,
                    const Choice& c, DispatchId after, int64_t behind);

  int streams_;
  int ahead_ = -1;
  int burst_ = 4;
  bool handoff_ = false;
  int64_t releasing_ = -1;
  std::vector<TaskInfo> infos_;
  std::map<int64_t, Active> active_;  // tenant -> its running task
};

// The `ahead` parameter of the task-stream policies: "task" (-1, the default) or a count >= 0.
Result<int> ahead_param(const std::string& policy, const PolicyParams& params);
// `ahead`, `burst` (default 4, 0: no limit) and `handoff` (default off) of a task-stream policy,
// applied to it.
Status apply_queue_params(const std::string& policy, const PolicyParams& params, TaskStreamPolicy& p);

// Index of a kernel's largest-block variant (RAISE's "Max").
int max_variant(const KernelSpec& kernel);

}  // namespace concord::policy
