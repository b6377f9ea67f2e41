// What RAISE and its baselines know of a task type (a tenant): its RAISE vector per block-size
// variant and its class (RAISE paper, Section VI-A). From the tenant's hint (its request's kernels) when its
// source gave one; otherwise from the present: the kernels its request has submitted when the task
// is about to start (all of them when the program enqueues the task at once, only the first when it
// launches one kernel at a time).
#pragma once

#include <optional>
#include <vector>

#include "concord/policy.h"
#include "policy/raise/raise_metrics.h"

namespace concord::policy {

struct TaskInfo {
  std::vector<RaiseVector> vectors;  // per variant of its kernels
  RaiseClass cls = RaiseClass::lat;  // the tenant's stated raise_type, else by its largest-block variant's vector
  size_t class_variant = 0;          // that variant: the vector `cls` was read from
  bool measured = true;              // false when any kernel's metrics were estimated
  // Per variant: one block of each of its kernels (at that variant) fits on an SM of the device.
  // A variant that does not could never run; the policies never choose one.
  std::vector<bool> fits;
  // Per variant: its type score S_t under `cls` (Eq. 1-3), what every decision compares.
  std::vector<double> scores;
};

// A variant's measured RAISE vector (its "raise" facet), if it has one.
std::optional<RaiseVector> measured_raise_vector(const KernelVariant& variant);
// The variant to run in place of `wanted`: `wanted` when it fits, else the largest fitting one
// below it, else the smallest fitting one above it, else `wanted` (nothing fits: the engine's
// refusal names the tenant and kernel).
int fitting_variant(const std::vector<bool>& fits, int wanted);
// The variants of the task that fit, ascending.
std::vector<int> fitting_variants(const TaskInfo& info);

// A kernel variant's RAISE vector: measured (profiled with `concord profile raise`) or, when
// absent, estimated from the roofline (docs/policies.md says how).
RaiseVector kernel_raise_vector(const KernelSpec& kernel, int variant, const Estimator& estimator);
// A task's vectors: its kernels' vectors weighted by estimated time x count (RAISE paper, Section VI-A).
TaskInfo task_info(const std::vector<TenantHints::Step>& kernels, std::optional<RaiseClass> stated,
                   const Estimator& estimator);
// The tenant's stated type, from its `raise_type` label (COM, MEM or LAT); an error names the
// tenant and the value.
Result<std::optional<RaiseClass>> stated_raise_type(const TenantView& tenant);

// The task infos of a run's tenants.
class TaskTypes {
 public:
  // From the tenant's hint, if any (and checks its label).
  Status joined(const SchedContext& ctx, TenantId tenant);
  // The info of the task whose first launch is `first` (from the present when the tenant has no
  // hint: the launch and what its request has submitted behind it); stable for a task once it
  // started.
  const TaskInfo& of(const SchedContext& ctx, TenantId tenant, LaunchId first);
  const TaskInfo& known(TenantId tenant) const { return *infos_[static_cast<size_t>(tenant.value)]; }
  // The infos known so far (hinted tenants from the start, others once a task of theirs was seen).
  std::vector<TaskInfo> all_known() const;
  // Bumped whenever an info is added or replaced.
  int64_t version() const { return version_; }

 private:
  std::vector<std::optional<TaskInfo>> infos_;
  std::vector<std::optional<RaiseClass>> stated_;
  std::vector<bool> hinted_;
  int64_t version_ = 0;
};

}  // namespace concord::policy
