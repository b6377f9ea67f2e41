#include "policy/raise/type_order_policy.h"

#include <algorithm>
#include <random>

#include "mechanism/params.h"

namespace concord::policy {

Status TypeOrderPolicy::on_start(SchedContext& ctx) {
  (void)ctx;
  streams_.reset();
  return Status::ok();
}

const TaskInfo& TypeOrderPolicy::info_of(SchedContext& ctx, const WaitingTask& w) {
  return types_.of(ctx, w.tenant, w.launch);
}

TaskChoice TypeOrderPolicy::with_random_variant(SchedContext& ctx, const std::vector<WaitingTask>& waiting, size_t index) {
  const TaskInfo& info = info_of(ctx, waiting[index]);
  const int n = static_cast<int>(info.vectors.size());
  if (fixed_variant_ >= 0) return TaskChoice{index, fitting_variant(info.fits, std::min(fixed_variant_, n - 1))};
  // Among the variants that fit on an SM (every one, usually: then the draw is the same as over 0..n-1).
  const std::vector<int> fitting = fitting_variants(info);
  if (fitting.empty()) return TaskChoice{index, std::uniform_int_distribution<int>(0, n - 1)(ctx.rng())};
  const int pick = std::uniform_int_distribution<int>(0, static_cast<int>(fitting.size()) - 1)(ctx.rng());
  return TaskChoice{index, fitting[static_cast<size_t>(pick)]};
}

std::optional<TaskChoice> SqPolicy::choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) {
  // The lowest type among waiting and running tasks is the current one.
  int current = 3;
  for (const WaitingTask& w : waiting) current = std::min(current, type_of(ctx, w));
  streams().for_each_active([&](int64_t t, const TaskStreams::Active&) {
    current = std::min(current, static_cast<int>(types().known(TenantId{t}).cls));
  });
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (type_of(ctx, waiting[i]) == current) return with_random_variant(ctx, waiting, i);
  }
  return std::nullopt;  // the current type's last tasks are still running
}

Status RrPolicy::on_start(SchedContext& ctx) {
  next_type_ = 0;
  return TypeOrderPolicy::on_start(ctx);
}

std::optional<TaskChoice> RrPolicy::choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) {
  for (int k = 0; k < 3; ++k) {
    const int type = (next_type_ + k) % 3;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (type_of(ctx, waiting[i]) == type) {
        next_type_ = (type + 1) % 3;
        return with_random_variant(ctx, waiting, i);
      }
    }
  }
  return std::nullopt;
}

std::optional<TaskChoice> RdPolicy::choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) {
  const size_t i = std::uniform_int_distribution<size_t>(0, waiting.size() - 1)(ctx.rng());
  return with_random_variant(ctx, waiting, i);
}

namespace {
template <class P>
Result<std::unique_ptr<Policy>> make(const char* name, const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params(name, params, {"streams", "dims", "ahead", "burst"}));
  auto streams = int_param(params, "streams", 4, 1);
  if (!streams) return streams.status();
  auto dims = dims_param(name, params, "random");
  if (!dims) return dims.status();
  auto queue = queue_params(name, params);
  if (!queue) return queue.status();
  return std::unique_ptr<Policy>(std::make_unique<P>(*streams, *dims, *queue));
}
}  // namespace

Result<std::unique_ptr<Policy>> make_sq(const PolicyParams& params) { return make<SqPolicy>("sq", params); }
Result<std::unique_ptr<Policy>> make_rr(const PolicyParams& params) { return make<RrPolicy>("rr", params); }
Result<std::unique_ptr<Policy>> make_rd(const PolicyParams& params) { return make<RdPolicy>("rd", params); }

}  // namespace concord::policy
