// RAISE's baselines (raise.md VI-A), on the same N_str task streams as RAISE, each task in a
// random block-size variant (seeded):
//   sq: sequential by type — every COM task, then every MEM task, then every LAT task; a type
//       starts only when the previous type's tasks have all finished;
//   rr: round-robin over the types, COM, MEM, LAT in turn (a type with no waiting task is skipped);
//   rd: a random waiting task.
#pragma once

#include <memory>

#include "policy/task_streams.h"

namespace concord::policy {

enum class TypeOrder { sq, rr, rd };

class TypeOrderPolicy final : public TaskStreamPolicy {
 public:
  TypeOrderPolicy(TypeOrder order, int streams) : TaskStreamPolicy(streams), order_(order) {}
  std::string name() const override;
  Status on_start(SchedContext& ctx) override;

 protected:
  std::optional<Choice> choose(SchedContext& ctx, const std::vector<Waiting>& waiting) override;

 private:
  TypeOrder order_;
  int next_type_ = 0;  // rr: the type whose turn it is
};

Result<std::unique_ptr<Policy>> make_sq(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rr(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_rd(const PolicyParams& params);

}  // namespace concord::policy
