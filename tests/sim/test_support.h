// Helpers for simulator scenarios: a policy scripted by lambdas and small workload builders.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/sim/sim_backend.h"
#include "concord/spec_source.h"
#include "concord/policy.h"
#include "concord/suite.h"
#include "concord/workload.h"

namespace concord::testing {

class ScriptedPolicy final : public Policy {
 public:
  using Hook = std::function<Status(SchedContext&)>;
  using CompleteHook = std::function<Status(SchedContext&, const Completion&)>;
  explicit ScriptedPolicy(Hook schedule, CompleteHook on_done = nullptr)
      : schedule_(std::move(schedule)), on_done_(std::move(on_done)) {}
  std::string name() const override { return "scripted"; }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    if (on_done_) CONCORD_RETURN_IF_ERROR(on_done_(ctx, c));
    return schedule_(ctx);
  }

 protected:
  Status schedule(SchedContext& ctx) override { return schedule_(ctx); }

 private:
  Hook schedule_;
  CompleteHook on_done_;
};

inline Placement whole(const SchedContext& ctx) {
  Placement p;
  p.sms = ctx.device().all_sms();
  return p;
}

inline KernelStep step(const std::string& kernel, int64_t size, int count = 1) {
  auto k = make_suite_kernel(kernel, size);
  if (!k) throw std::runtime_error(k.status().to_string());
  return KernelStep{*k, count};
}

inline TenantSpec tenant(const std::string& name, std::vector<KernelStep> steps, int requests = 1) {
  TenantSpec t;
  t.name = name;
  t.steps = std::move(steps);
  t.requests = requests;
  return t;
}

inline Workload workload(std::vector<TenantSpec> tenants) {
  Workload w;
  w.name = "test";
  w.tenants = std::move(tenants);
  return w;
}

inline Result<RunRecord> run_on_sim(const Workload& w, Policy& p, uint64_t seed = 1,
                                    const DeviceSpec& device = h200_spec()) {
  sim::SimBackend backend(device);
  EngineOptions o;
  o.seed = seed;
  return run_workload(w, backend, p, o);
}

inline Result<RunRecord> run_on_sim(const Workload& w, const std::string& policy, uint64_t seed = 1,
                                    const PolicyParams& params = {}) {
  auto p = builtin_policies().make(policy, params);
  if (!p) return p.status();
  return run_on_sim(w, **p, seed);
}

}  // namespace concord::testing
