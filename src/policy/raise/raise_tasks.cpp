#include "policy/raise/raise_tasks.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "concord/occupancy.h"
#include "mechanism/task_streams.h"
#include "policy/raise/raise_facet.h"

namespace concord::policy {

std::optional<RaiseVector> measured_raise_vector(const KernelVariant& v) {
  auto it = v.facets.find(kRaiseFacetName);
  if (it == v.facets.end()) return std::nullopt;
  // Parsed once per distinct facet text: a task's vectors are rebuilt per task when its source
  // gives no hints.
  thread_local std::unordered_map<std::string, std::optional<RaiseVector>> parsed;
  auto p = parsed.find(it->second);
  if (p == parsed.end()) {
    auto m = raise_facet_from_json(it->second);  // the store checked it when it was attached
    p = parsed.emplace(it->second, m ? std::optional<RaiseVector>(*m) : std::nullopt).first;
  }
  return p->second;
}

RaiseVector kernel_raise_vector(const KernelSpec& kernel, int variant, const Estimator& estimator) {
  const KernelVariant& v = kernel.variant(variant);
  if (auto m = measured_raise_vector(v)) return *m;
  // Estimate from the roofline: utilisations of the FP32 (or tensor) pipes and of DRAM over the
  // estimated time; occupancy from the occupancy calculator and the grid; instruction issue
  // follows the arithmetic plus a share of the memory traffic. Only the simulator without
  // profiles uses this; measured vectors come from `concord profile raise`.
  const DeviceSpec& dev = estimator.device();
  const double t = std::max(estimator.seconds(kernel, variant, dev.sm_count), 1e-9);
  const double blocks = static_cast<double>(v.logical_blocks);
  const double peak = kernel.unit == ComputeUnit::tensor ? dev.tensor_flops : dev.fp32_flops;
  const double cu = std::clamp(v.flops_per_block * blocks / t / peak, 0.0, 1.0);
  const double mu = std::clamp(v.bytes_per_block * blocks / t / dev.dram_bytes_per_s, 0.0, 1.0);
  const double resident = max_resident_blocks(dev, v);
  const double per_sm = std::min(resident, blocks / dev.sm_count);
  const double aoc = std::clamp(per_sm * v.warps_per_block() / (dev.sm.max_threads / 32.0), 0.0, 1.0);
  const double sme = std::clamp(blocks / dev.sm_count, 0.0, 1.0);
  const double ipc = std::clamp(cu + 0.2 * mu, 0.0, 1.0);
  RaiseVector m{};
  at(m, RaiseMetric::aoc) = 10 * aoc;
  at(m, RaiseMetric::sme) = 10 * sme;
  at(m, RaiseMetric::ipc) = 10 * ipc;
  at(m, RaiseMetric::isu) = 10 * ipc;
  at(m, RaiseMetric::spu) = kernel.unit == ComputeUnit::tensor ? 1.0 : 10 * cu;
  at(m, RaiseMetric::du) = 10 * mu;
  at(m, RaiseMetric::lsu) = 10 * std::min(1.0, 0.5 * mu + 0.1);
  at(m, RaiseMetric::tu) = 10 * std::min(1.0, 0.7 * mu);
  return m;
}

TaskInfo task_info(const std::vector<TenantHints::Step>& kernels, std::optional<RaiseClass> stated,
                   const Estimator& estimator) {
  TaskInfo info;
  int variants = 1;
  for (const auto& s : kernels) variants = std::max(variants, s.kernel->variant_count());
  for (int v = 0; v < variants; ++v) {
    RaiseVector sum{};
    double total = 0;
    for (const auto& s : kernels) {
      const int kv = std::min(v, s.kernel->variant_count() - 1);
      const double w = estimator.seconds(*s.kernel, kv, estimator.device().sm_count) * static_cast<double>(s.count);
      const RaiseVector m = kernel_raise_vector(*s.kernel, kv, estimator);
      if (!measured_raise_vector(s.kernel->variant(kv))) info.measured = false;
      for (size_t i = 0; i < m.size(); ++i) sum[i] += w * m[i];
      total += w;
    }
    if (total > 0) {
      for (double& x : sum) x /= total;
    }
    info.vectors.push_back(sum);
    const bool fits = std::all_of(kernels.begin(), kernels.end(), [&](const TenantHints::Step& s) {
      return max_resident_blocks(estimator.device(), s.kernel->variant(std::min(v, s.kernel->variant_count() - 1))) > 0;
    });
    info.fits.push_back(fits);
  }
  // The class of the task's largest-block variant (Table IV's types are read on Max), unless the
  // tenant states it (`raise_type`, as the paper's Table IV does by hand).
  const KernelSpec& first = *kernels.front().kernel;
  info.class_variant = static_cast<size_t>(std::min<int>(max_variant(first), variants - 1));
  info.cls = stated ? *stated : raise_class(info.vectors[info.class_variant]);
  for (const RaiseVector& v : info.vectors) info.scores.push_back(raise_score(v, info.cls));
  return info;
}

int fitting_variant(const std::vector<bool>& fits, int wanted) {
  const int n = static_cast<int>(fits.size());
  if (wanted < 0 || wanted >= n || fits[static_cast<size_t>(wanted)]) return wanted;
  for (int v = wanted - 1; v >= 0; --v) {
    if (fits[static_cast<size_t>(v)]) return v;
  }
  for (int v = wanted + 1; v < n; ++v) {
    if (fits[static_cast<size_t>(v)]) return v;
  }
  return wanted;
}

std::vector<int> fitting_variants(const TaskInfo& info) {
  std::vector<int> out;
  for (size_t v = 0; v < info.fits.size(); ++v) {
    if (info.fits[v]) out.push_back(static_cast<int>(v));
  }
  return out;
}

Result<std::optional<RaiseClass>> stated_raise_type(const TenantView& tenant) {
  auto it = tenant.info.labels.find("raise_type");
  if (it == tenant.info.labels.end()) return std::optional<RaiseClass>{};
  if (it->second == "COM") return std::optional<RaiseClass>{RaiseClass::com};
  if (it->second == "MEM") return std::optional<RaiseClass>{RaiseClass::mem};
  if (it->second == "LAT") return std::optional<RaiseClass>{RaiseClass::lat};
  return Status::invalid_argument("tenant '" + tenant.info.name + "': raise_type must be COM, MEM or LAT, not '" +
                                  it->second + "'");
}

Status TaskTypes::joined(const SchedContext& ctx, TenantId tenant) {
  const auto t = static_cast<size_t>(tenant.value);
  if (infos_.size() <= t) {
    infos_.resize(t + 1);
    stated_.resize(t + 1);
    hinted_.resize(t + 1, false);
  }
  const TenantView& view = ctx.tenant(tenant);
  auto stated = stated_raise_type(view);
  if (!stated) return stated.status();
  stated_[t] = *stated;
  if (view.hints && !view.hints->request.empty()) {
    infos_[t] = task_info(view.hints->request, *stated, ctx.estimator());
    hinted_[t] = true;
    ++version_;
  }
  return Status::ok();
}

const TaskInfo& TaskTypes::of(const SchedContext& ctx, TenantId tenant, LaunchId launch) {
  const auto t = static_cast<size_t>(tenant.value);
  if (hinted_[t]) return *infos_[t];
  const ReadyLaunch* first = nullptr;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (r.id == launch) first = &r;
  }
  if (!first) {
    if (infos_[t]) return *infos_[t];
    static const TaskInfo kUnknown{{RaiseVector{}}, RaiseClass::lat, 0, false, {true}, {0.0}};
    return kUnknown;
  }
  // No hint: the task's kernels as its tenant has submitted them by now.
  std::vector<TenantHints::Step> kernels{{first->kernel, 1}};
  if (!first->last_of_request) {
    for (const QueuedLaunch& q : ctx.queued(tenant)) {
      if (q.request != first->request) break;
      if (kernels.back().kernel == q.kernel) {
        ++kernels.back().count;
      } else {
        kernels.push_back({q.kernel, 1});
      }
      if (q.last_of_request) break;
    }
  }
  infos_[t] = task_info(kernels, stated_[t], ctx.estimator());
  ++version_;
  return *infos_[t];
}

std::vector<TaskInfo> TaskTypes::all_known() const {
  std::vector<TaskInfo> out;
  for (const auto& i : infos_) {
    if (i) out.push_back(*i);
  }
  return out;
}

}  // namespace concord::policy
