#include "policy/shortest_first/shortest_first_policy.h"

#include "mechanism/params.h"
#include "policy/shortest_first/shortest_first_facet.h"

namespace concord::policy {
namespace {

class ShortestFirst final : public Policy {
 public:
  std::string name() const override { return "shortest-first"; }

 protected:
  // Every hook the policy does not override (on_ready, on_complete, on_tick) runs schedule().
  Status schedule(SchedContext& ctx) override {
    if (!ctx.running().empty() || ctx.ready().empty()) return Status::ok();
    const ReadyLaunch* best = nullptr;
    double best_s = 0;
    for (const ReadyLaunch& r : ctx.ready()) {
      const double s = seconds_of(ctx, r);
      if (!best || s < best_s) {
        best = &r;
        best_s = s;
      }
    }
    return ctx.dispatch(best->id, whole_gpu(ctx)).status();
  }

 private:
  // The measured time where the kernel's variant has the facet, else the estimator's.
  static double seconds_of(const SchedContext& ctx, const ReadyLaunch& r) {
    const int v = r.variant >= 0 ? r.variant : r.kernel->default_variant;
    const auto& facets = r.kernel->variant(v).facets;
    if (const auto it = facets.find(kShortestFirstFacetName); it != facets.end()) {
      if (Result<double> s = shortest_first_facet_from_json(it->second)) return *s;
    }
    return ctx.estimator().seconds(*r.kernel, v, ctx.device().sm_count);
  }
};

}  // namespace

Result<std::unique_ptr<Policy>> make_shortest_first(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("shortest-first", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<ShortestFirst>());
}

}  // namespace concord::policy
