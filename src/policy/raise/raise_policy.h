// RAISE (the RAISE paper Section V): hybrid stream scheduling by resource-type scores and dynamic kernel
// dimensions. A global resource vector M_g (0-10 on each of eight metrics, 10 = idle GPU) lacks
// the vector m_t of every task running now: it loses m_t when a task starts and gets it back when
// the task finishes. With a stream free, the
// type to start is COM if M_g[IPC] > alpha, else MEM if M_g[DU] > beta, else LAT (a type with no
// waiting task passes to the next admissible one); among that type's waiting tasks and their
// Min/Mid/Max variants, the largest type score S_t below the GPU's S_g starts; when none fits,
// new tasks wait for a completion. Deviation: scores within `tie` of the best are equal, and among
// the chosen task's equal variants the larger block wins (the paper: a kernel's scale is
// proportional to the resources it occupies, and RAISE takes what consumes the most); the paper
// has no tie rule, and measured scores differ by noise (up to 0.07 over five H200 measurements).
#pragma once

#include <memory>
#include <optional>

#include "mechanism/task_streams.h"
#include "policy/raise/raise_tasks.h"

namespace concord::policy {

struct RaiseParams {
  double alpha = 3;   // IPC threshold
  double beta = 3;    // DU threshold
  // `alpha=auto` / `beta=auto`: the threshold from the run's own tasks, as the paper derived
  // its 3 (Section VI-A: the tasks' IPC and DU average about 2.5, thresholds set a little above):
  // the mean over the tenants known so far (each once, however many requests it runs) of the
  // metric on the vector each tenant's class is read from, + 0.5.
  bool alpha_auto = false;
  bool beta_auto = false;
  int streams = 4;    // N_str
  int fixed_variant = -1;  // -1: dynamic dimensions; else always this variant index (min 0, mid 1, max 2)
  double tie = 0.1;        // scores this close to the best count as equal (0: the paper's strict maximum)
};

// A waiting task as raise_decide sees it.
struct RaiseCandidate {
  const std::vector<RaiseVector>* vectors;  // per variant
  RaiseClass cls;
  const std::vector<bool>* fits = nullptr;  // per variant, whether it fits on an SM (TaskInfo::fits); null: all do
  const std::vector<double>* scores = nullptr;  // per variant, S_t under `cls` (TaskInfo::scores); null: computed
};

class RaisePolicy final : public Policy, private TaskChooser {
 public:
  RaisePolicy(RaiseParams p, QueueParams q)
      : p_(p), streams_(p.streams, q.ahead, q.burst), alpha_(p.alpha), beta_(p.beta) {}
  std::string name() const override { return "raise"; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;
  // The thresholds in use (`auto`: from the tasks known so far).
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  // M_g: 10 on every metric minus the vectors of the tasks running now (derived, never drifts).
  RaiseVector global() const;

 protected:
  Status schedule(SchedContext& ctx) override { return streams_.schedule(ctx, *this); }

 private:
  std::optional<TaskChoice> choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) override;
  Status update_thresholds();

  RaiseParams p_;
  TaskStreams streams_;
  TaskTypes types_;
  int64_t thresholds_for_ = -1;  // TaskTypes::version() the `auto` thresholds were computed at
  double alpha_ = 3;
  double beta_ = 3;
  std::vector<const TaskInfo*> infos_;      // per decision, kept to reuse their storage
  std::vector<RaiseCandidate> candidates_;
};

// The `auto` threshold on `metric` (IPC or DU): the mean over `tasks` (one per tenant) of that
// metric on the vector each one's class was read from, plus 0.5 (RAISE paper, Section VI-A: averages about 2.5, thresholds 3).
// An error when there are no tasks.
Result<double> raise_auto_threshold(const std::vector<TaskInfo>& tasks, RaiseMetric metric);

// The decision on its own (unit-tested): given M_g and the waiting tasks' vectors per variant and
// classes, the (task, variant) to start, or nullopt to hold.
std::optional<std::pair<size_t, int>> raise_decide(const RaiseVector& m_g, const std::vector<RaiseCandidate>& tasks,
                                                   double alpha, double beta, int fixed_variant, double tie = 0);

// M_g: 10 on every metric minus the running tasks' vectors (a metric may go below 0 when running
// tasks' vectors add up to more than the GPU; then nothing of that type fits).
RaiseVector raise_remaining(const std::vector<const RaiseVector*>& running);

Result<std::unique_ptr<Policy>> make_raise(const PolicyParams& params);

}  // namespace concord::policy
