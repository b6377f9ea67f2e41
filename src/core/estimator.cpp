#include "concord/estimator.h"

#include <algorithm>

namespace concord {

bool Estimator::measured(const KernelSpec& kernel, int variant) const {
  return !kernel.sm_curve.empty() && variant == kernel.default_variant;
}

double Estimator::roofline_seconds(const KernelSpec& kernel, const KernelVariant& v, int sms) const {
  const double share = static_cast<double>(sms) / device_.sm_count;
  const double peak = kernel.unit == ComputeUnit::tensor ? device_.tensor_flops : device_.fp32_flops;
  const double blocks = static_cast<double>(v.logical_blocks);
  const double compute = v.flops_per_block * blocks / (peak * roofline_.compute_efficiency * share);
  const double bandwidth = device_.dram_bytes_per_s * roofline_.dram_efficiency * std::min(1.0, share * roofline_.sm_bandwidth_share);
  const double memory = v.bytes_per_block * blocks / bandwidth;
  return std::max(compute, memory);
}

double Estimator::seconds(const KernelSpec& kernel, int variant, int sms, CachePolicy cache) const {
  sms = std::clamp(sms, 1, device_.sm_count);
  const KernelVariant& v = kernel.variant(variant);
  if (measured(kernel, variant)) {
    return curve_seconds(kernel.sm_curve, sms) * kernel.cache_slowdown[static_cast<size_t>(cache)];
  }
  double t = roofline_seconds(kernel, v, sms);
  if (bypasses_l1(cache)) t *= 1.0 + kernel.l1_sensitivity;
  if (evicts_l2_first(cache)) t *= 1.0 + kernel.l2_sensitivity;
  return t;
}

int Estimator::demand_sms(const KernelSpec& kernel, int variant, double tolerance) const {
  const double all = seconds(kernel, variant, device_.sm_count);
  for (int sms = tpc_step_; sms < device_.sm_count; sms += tpc_step_) {
    if (seconds(kernel, variant, sms) <= all * (1.0 + tolerance)) return sms;
  }
  return device_.sm_count;
}

}  // namespace concord
