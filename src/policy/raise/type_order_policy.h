// RAISE's baselines (RAISE paper, Section VI-A), on the same N_str task streams as RAISE, each task in a
// random block-size variant (the run's seeded generator):
//   sq: sequential by type — every COM task, then every MEM task, then every LAT task; a type
//       starts only when the previous type's tasks have all finished;
//   rr: round-robin over the types, COM, MEM, LAT in turn (a type with no waiting task is skipped);
//   rd: a random waiting task.
#pragma once

#include <memory>

#include "mechanism/task_streams.h"
#include "policy/raise/raise_tasks.h"

namespace concord::policy {

// What the three share: task streams, RAISE's task types, and a random variant for the chosen task
// or one fixed variant for every task (`dims=min|mid|max`: the order's effect alone, apart from the
// dimensions'). Each baseline supplies only its order.
class TypeOrderPolicy : public Policy, protected TaskChooser {
 public:
  TypeOrderPolicy(int streams, int fixed_variant, QueueParams q)
      : streams_(streams, q.ahead, q.burst), fixed_variant_(fixed_variant) {}
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override { return types_.joined(ctx, tenant); }

 protected:
  Status schedule(SchedContext& ctx) override { return streams_.schedule(ctx, *this); }
  // The waiting task's info (its type), from its tenant's hint or its submitted launches.
  const TaskInfo& info_of(SchedContext& ctx, const WaitingTask& w);
  int type_of(SchedContext& ctx, const WaitingTask& w) { return static_cast<int>(info_of(ctx, w).cls); }
  TaskChoice with_random_variant(SchedContext& ctx, const std::vector<WaitingTask>& waiting, size_t index);
  const TaskStreams& streams() const { return streams_; }
  const TaskTypes& types() const { return types_; }

 private:
  TaskStreams streams_;
  TaskTypes types_;
  int fixed_variant_ = -1;  // -1: random
};

class SqPolicy final : public TypeOrderPolicy {
 public:
  using TypeOrderPolicy::TypeOrderPolicy;
  std::string name() const override { return "sq"; }

 protected:
  std::optional<TaskChoice> choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) override;
};

class RrPolicy final : public TypeOrderPolicy {
 public:
  using TypeOrderPolicy::TypeOrderPolicy;
  std::string name() const override { return "rr"; }
  Status on_start(SchedContext& ctx) override;

 protected:
  std::optional<TaskChoice> choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) override;

 private:
  int next_type_ = 0;  // the type whose turn it is
};

class RdPolicy final : public TypeOrderPolicy {
 public:
  using TypeOrderPolicy::TypeOrderPolicy;
  std::string name() const override { return "rd"; }

 protected:
  std::optional<TaskChoice> choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) override;
};

Result<std::unique_ptr<Policy>> make_sq(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rr(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rd(const PolicyParams& params);

}  // namespace concord::policy
