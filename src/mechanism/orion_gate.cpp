#include "mechanism/orion_gate.h"

#include <algorithm>
#include <limits>

#include "concord/occupancy.h"

namespace concord::policy {

const char* to_string(OrionProfile p) {
  switch (p) {
    case OrionProfile::compute: return "compute";
    case OrionProfile::memory: return "memory";
    case OrionProfile::unknown: break;
  }
  return "unknown";
}

const char* to_string(OrionVerdict v) {
  switch (v) {
    case OrionVerdict::launch: return "launch";
    case OrionVerdict::wait_sms: return "wait: SM threshold";
    case OrionVerdict::wait_profile: return "wait: same profile as the LC kernel";
    case OrionVerdict::wait_duration: return "wait: BE duration threshold";
  }
  return "?";
}

int64_t orion_sm_need(int64_t blocks, int resident) {
  if (resident <= 0) return std::numeric_limits<int64_t>::max();
  return (std::max<int64_t>(blocks, 0) + resident - 1) / resident;
}

OrionProfile orion_profile(const DeviceSpec& device, ComputeUnit unit, double flops, double bytes, Seconds seconds) {
  if (flops > 0) {
    if (bytes <= 0) return OrionProfile::compute;
    const double peak = unit == ComputeUnit::tensor ? device.tensor_flops : device.fp32_flops;
    const double knee = peak / device.dram_bytes_per_s;
    return flops / bytes > knee ? OrionProfile::compute : OrionProfile::memory;
  }
  // No FP32 work: Orion falls back to measured SM and DRAM throughput. Concord knows the DRAM
  // share (its bytes over the duration); SM throughput without FLOPs is not known here.
  if (seconds > 0 && bytes / seconds >= kOrionBusyShare * device.dram_bytes_per_s) return OrionProfile::memory;
  return OrionProfile::unknown;
}

OrionOp orion_op(const Estimator& estimator, const KernelSpec& kernel) {
  const DeviceSpec& device = estimator.device();
  const KernelVariant& v = kernel.variant(kernel.default_variant);
  OrionOp op;
  op.sm_need = orion_sm_need(v.logical_blocks, max_resident_blocks(device, v));
  op.seconds = estimator.seconds(kernel, kernel.default_variant, device.sm_count);
  const double blocks = static_cast<double>(v.logical_blocks);
  op.profile = orion_profile(device, kernel.unit, v.flops_per_block * blocks, v.bytes_per_block * blocks, op.seconds);
  return op;
}

OrionDecision orion_admit(const OrionRule& rule, const OrionBeState& state, const OrionView& view, const OrionOp& be) {
  OrionDecision out{OrionVerdict::launch, state};
  if (view.lc_active) {
    if (be.sm_need > rule.sm_threshold || state.pass_sms > rule.sm_threshold - be.sm_need) {
      out.verdict = OrionVerdict::wait_sms;
      return out;
    }
    if (be.profile != OrionProfile::unknown &&
        std::any_of(view.lc_kernels.begin(), view.lc_kernels.end(), [&](OrionProfile lc) { return lc == be.profile; })) {
      out.verdict = OrionVerdict::wait_profile;
      return out;
    }
  }
  if (state.gated) {
    if (view.be_running) {
      out.verdict = OrionVerdict::wait_duration;
      return out;
    }
    out.state.gated = false;
    out.state.since_drain = 0;
  }
  out.state.pass_sms = state.pass_sms + std::min(be.sm_need, std::numeric_limits<int64_t>::max() - state.pass_sms);
  out.state.since_drain += be.seconds;
  if (out.state.since_drain > rule.max_be_seconds && view.lc_has_work) out.state.gated = true;
  return out;
}

OrionLcLatency::Request& OrionLcLatency::of(TenantId tenant) {
  const auto t = static_cast<size_t>(tenant.value);
  if (by_tenant_.size() <= t) by_tenant_.resize(t + 1);
  return by_tenant_[t];
}

void OrionLcLatency::hinted(TenantId tenant, Seconds seconds) { of(tenant) = Request{seconds, true, true, -1, 0}; }

void OrionLcLatency::launched(TenantId tenant, Seconds seconds, int64_t request, bool last) {
  Request& r = of(tenant);
  if (r.hinted) return;
  if (request != r.current) {
    r.current = request;
    r.current_seconds = 0;
  }
  r.current_seconds += seconds;
  if (last) r.whole = true;
  if (last || !r.whole) r.seconds = r.current_seconds;
}

Seconds OrionLcLatency::seconds(TenantId tenant) const {
  const auto t = static_cast<size_t>(tenant.value);
  return t < by_tenant_.size() ? by_tenant_[t].seconds : 0;
}

}  // namespace concord::policy
