#include "policy/raise_baselines/type_order_policy.h"

#include <random>

#include "policy/params.h"

namespace concord::policy {

std::string TypeOrderPolicy::name() const {
  switch (order_) {
    case TypeOrder::sq: return "sq";
    case TypeOrder::rr: return "rr";
    case TypeOrder::rd: return "rd";
  }
  return "?";
}

Status TypeOrderPolicy::on_start(SchedContext& ctx) {
  next_type_ = 0;
  return TaskStreamPolicy::on_start(ctx);
}

std::optional<TaskStreamPolicy::Choice> TypeOrderPolicy::choose(SchedContext& ctx, const std::vector<Waiting>& waiting) {
  auto random_variant = [&](size_t index) {
    const int n = static_cast<int>(info(waiting[index].tenant).vectors.size());
    return std::uniform_int_distribution<int>(0, n - 1)(ctx.rng());
  };
  auto type_of = [&](size_t i) { return static_cast<int>(info(waiting[i].tenant).cls); };
  switch (order_) {
    case TypeOrder::sq: {
      // The lowest type among waiting and running tasks is the current one.
      int current = 3;
      for (size_t i = 0; i < waiting.size(); ++i) current = std::min(current, type_of(i));
      for (const auto& [t, a] : active()) current = std::min(current, static_cast<int>(info(TenantId{t}).cls));
      for (size_t i = 0; i < waiting.size(); ++i) {
        if (type_of(i) == current) return Choice{i, random_variant(i)};
      }
      return std::nullopt;  // the current type's last tasks are still running
    }
    case TypeOrder::rr:
      for (int k = 0; k < 3; ++k) {
        const int type = (next_type_ + k) % 3;
        for (size_t i = 0; i < waiting.size(); ++i) {
          if (type_of(i) == type) {
            next_type_ = (type + 1) % 3;
            return Choice{i, random_variant(i)};
          }
        }
      }
      return std::nullopt;
    case TypeOrder::rd: {
      const size_t i = std::uniform_int_distribution<size_t>(0, waiting.size() - 1)(ctx.rng());
      return Choice{i, random_variant(i)};
    }
  }
  return std::nullopt;
}

namespace {
Result<std::unique_ptr<Policy>> make(TypeOrder order, const char* name, const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params(name, params, {"streams"}));
  auto streams = int_param(params, "streams", 4, 1);
  if (!streams) return streams.status();
  return std::unique_ptr<Policy>(std::make_unique<TypeOrderPolicy>(order, *streams));
}
}  // namespace

Result<std::unique_ptr<Policy>> make_sq(const PolicyParams& params) { return make(TypeOrder::sq, "sq", params); }
Result<std::unique_ptr<Policy>> make_rr(const PolicyParams& params) { return make(TypeOrder::rr, "rr", params); }
Result<std::unique_ptr<Policy>> make_rd(const PolicyParams& params) { return make(TypeOrder::rd, "rd", params); }

}  // namespace concord::policy
