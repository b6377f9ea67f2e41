// RAISE's baselines (raise.md VI-A), on the same N_str task streams as RAISE, each task in a
// random block-size variant (the run's seeded generator):
//   sq: sequential by type — every COM task, then every MEM task, then every LAT task; a type
//       starts only when the previous type's tasks have all finished;
//   rr: round-robin over the types, COM, MEM, LAT in turn (a type with no waiting task is skipped);
//   rd: a random waiting task.
#pragma once

#include <memory>

#include "policy/task_streams.h"

namespace concord::policy {

// What the three share: a random variant for the chosen task, or one fixed variant for every task
// (`dims=min|mid|max`: the order's effect alone, apart from the dimensions').
class RandomDimsPolicy : public TaskStreamPolicy {
 public:
  RandomDimsPolicy(int streams, int fixed_variant = -1) : TaskStreamPolicy(streams), fixed_variant_(fixed_variant) {}

 protected:
  Choice with_random_variant(SchedContext& ctx, const std::vector<Waiting>& waiting, size_t index);
  int type_of(const Waiting& w) const { return static_cast<int>(info(w.tenant).cls); }

 private:
  int fixed_variant_ = -1;  // -1: random
};

class SqPolicy final : public RandomDimsPolicy {
 public:
  using RandomDimsPolicy::RandomDimsPolicy;
  std::string name() const override { return "sq"; }

 protected:
  std::optional<Choice> choose(SchedContext& ctx, const std::vector<Waiting>& waiting) override;
};

class RrPolicy final : public RandomDimsPolicy {
 public:
  using RandomDimsPolicy::RandomDimsPolicy;
  std::string name() const override { return "rr"; }
  Status on_start(SchedContext& ctx) override;

 protected:
  std::optional<Choice> choose(SchedContext& ctx, const std::vector<Waiting>& waiting) override;

 private:
  int next_type_ = 0;  // the type whose turn it is
};

class RdPolicy final : public RandomDimsPolicy {
 public:
  using RandomDimsPolicy::RandomDimsPolicy;
  std::string name() const override { return "rd"; }

 protected:
  std::optional<Choice> choose(SchedContext& ctx, const std::vector<Waiting>& waiting) override;
};

Result<std::unique_ptr<Policy>> make_sq(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rr(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rd(const PolicyParams& params);

}  // namespace concord::policy
