// What PBS and its baselines share (the PBS paper, Section II-A): every tenant's
// launches run at once, in the persistent form, on the tenant's SMs — an equal contiguous share
// of the GPU each (`split`, the paper's setting) or every SM (`shared`) — at the tenant's current
// TLP and cache policy. A TLP change reaches the tenant's running dispatches in place
// (SchedContext::set_tlp) as well as its later launches. Over sampling windows it counts each
// tenant's logical blocks from the dispatches' progress counters and completions, and the bytes
// those blocks request (the "pbs" facet), giving blocks/s and EB per tenant.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "concord/policy.h"
#include "policy/pbs/pbs_facet.h"

namespace concord::policy {

enum class SmSharing { split, shared };
// The `sms` parameter: split (default) or shared.
Result<SmSharing> sm_sharing_param(const PolicyParams& params);

struct TenantWindow {
  TenantId tenant;
  double blocks_per_s = 0;
  double eb = 0;  // requested bytes per second (effective bandwidth)
};

class TlpRunner {
 public:
  explicit TlpRunner(SmSharing sharing) : sharing_(sharing) {}
  // With `sms=split` every tenant gets a share of at least one SM: at most one tenant per SM.
  Status admits(const std::string& policy, const WorkloadShape& shape, const DeviceSpec& device) const;

  void joined(TenantId t);
  void left(TenantId t) { active_.erase(t.value); }
  // Tenants that joined and have not left and drained, ascending.
  std::vector<TenantId> active() const;

  // Dispatches every ready launch that has no running dispatch.
  Status dispatch_ready(SchedContext& ctx);
  // Counts a finished dispatch's last blocks into the window.
  void completed(const Completion& c);

  // The tenant's TLP from now on (its running persistent dispatches too); 0 = as many as fit.
  Status set_tlp(SchedContext& ctx, TenantId t, int tlp);
  int tlp(TenantId t) const;
  void set_cache(TenantId t, CachePolicy cache) { state_[t.value].cache = cache; }
  // Changes made by set_tlp that moved a tenant's TLP (each tenant counted once per change).
  int64_t tlp_changes() const { return tlp_changes_; }

  // Blocks of a tenant's kernel that fit on one SM (its highest TLP): the last kernel it launched,
  // else its first ready or queued one; 1 when none is known yet.
  int max_tlp(const SchedContext& ctx, TenantId t) const;
  // Kernels (name/variant) the tenant has dispatched so far.
  const std::set<std::string>& kernels_of(TenantId t) const;
  // Kernels (name/variant) dispatched without a measured `pbs` facet: their EB counts the spec's
  // bytes per block (pbs_facet_of), and no L1 miss rate is known for them. Policies report the
  // count in their stats ("kernels_without_pbs_facet"), so results say what was assumed.
  const std::set<std::string>& kernels_without_facet() const { return without_facet_; }

  // A sampling window: start() zeroes the counts; finish() reads the running dispatches' progress
  // and returns each active tenant's blocks/s and EB since start().
  Status start_window(SchedContext& ctx);
  Result<std::vector<TenantWindow>> finish_window(SchedContext& ctx);

 private:
  struct TenantState {
    int tlp = 0;
    CachePolicy cache = CachePolicy::normal;
    const KernelSpec* last_kernel = nullptr;
    int last_variant = 0;
    std::set<std::string> kernels;
    double blocks = 0;  // in the current window
    double bytes = 0;
  };
  struct DispatchState {
    TenantId tenant;
    double bytes_per_block = 0;
    int64_t counted = 0;  // blocks already counted into a window
    bool persistent = false;
  };
  SmSet sms_for(const SchedContext& ctx, TenantId t) const;
  void count(DispatchState& d, int64_t done);

  SmSharing sharing_;
  std::set<int64_t> active_;
  std::map<int64_t, TenantState> state_;
  std::map<int64_t, DispatchState> dispatches_;  // running dispatches this runner made
  std::set<std::string> without_facet_;
  Seconds window_start_ = 0;
  int64_t tlp_changes_ = 0;
};

}  // namespace concord::policy
