#include "policy/raise/raise_policy.h"

#include <array>

#include <algorithm>

#include "mechanism/params.h"
#include "policy/raise/raise_metrics.h"

namespace concord::policy {

namespace {

// Whether variant `v` of a candidate fits on an SM; a task none of whose variants fits keeps all
// of them (the engine's refusal then names the tenant and kernel).
bool fits(const RaiseCandidate& c, int v) {
  if (!c.fits) return true;
  const auto& f = *c.fits;
  return f[static_cast<size_t>(v)] || std::none_of(f.begin(), f.end(), [](bool x) { return x; });
}

// S_t of variant `v` under `type`: precomputed with the task (TaskInfo::scores, its own class)
// where the candidate has them.
double score_of(const RaiseCandidate& c, int v, RaiseClass type) {
  if (c.scores && type == c.cls) return (*c.scores)[static_cast<size_t>(v)];
  return raise_score((*c.vectors)[static_cast<size_t>(v)], type);
}

}  // namespace

std::optional<std::pair<size_t, int>> raise_decide(const RaiseVector& m_g, const std::vector<RaiseCandidate>& tasks,
                                                   double alpha, double beta, int fixed_variant, double tie) {
  // Admissible types in order of preference (RAISE paper, Section V-B, step 3). Vectors are time-weighted
  // means, so "IPC left > alpha" allows for rounding (10 - 7.0000000001 is not above 3).
  constexpr double kEps = 1e-9;
  std::array<RaiseClass, 3> types{};
  size_t type_count = 0;
  if (at(m_g, RaiseMetric::ipc) > alpha + kEps) types[type_count++] = RaiseClass::com;
  if (at(m_g, RaiseMetric::du) > beta + kEps) types[type_count++] = RaiseClass::mem;
  types[type_count++] = RaiseClass::lat;
  for (size_t k = 0; k < type_count; ++k) {
    const RaiseClass type = types[k];
    bool any = false;
    std::optional<std::pair<size_t, int>> best;
    double best_score = -1;
    const double s_g = raise_score(m_g, type);
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].cls != type) continue;
      any = true;
      const int n = static_cast<int>(tasks[i].vectors->size());
      const int fixed = fixed_variant < 0         ? -1
                        : tasks[i].fits ? fitting_variant(*tasks[i].fits, std::min(fixed_variant, n - 1))
                                        : std::min(fixed_variant, n - 1);
      for (int v = 0; v < n; ++v) {
        if (fixed >= 0 && v != fixed) continue;
        if (fixed < 0 && !fits(tasks[i], v)) continue;  // a variant that can never run
        // Step 5: the largest S_t below S_g; the first waiting task wins ties.
        const double s_t = score_of(tasks[i], v, type);
        if (s_t < s_g - kEps && s_t > best_score) {
          best_score = s_t;
          best = std::make_pair(i, v);
        }
      }
    }
    if (any && best && tie > 0 && fixed_variant < 0) {
      // The chosen task's largest variant whose score is within `tie` of the best (and fits).
      const auto& vecs = *tasks[best->first].vectors;
      for (int v = static_cast<int>(vecs.size()) - 1; v > best->second; --v) {
        if (!fits(tasks[best->first], v)) continue;
        const double s_t = score_of(tasks[best->first], v, type);
        if (s_t < s_g - kEps && s_t >= best_score - tie) {
          best->second = v;
          break;
        }
      }
    }
    if (best) return best;
    // This type has waiting tasks and none fits: hold (the paper's step 5).
    if (any) return std::nullopt;
  }
  return std::nullopt;
}

RaiseVector raise_remaining(const std::vector<const RaiseVector*>& running) {
  RaiseVector m_g;
  m_g.fill(10);
  for (const RaiseVector* m : running) {
    for (size_t i = 0; i < m_g.size(); ++i) m_g[i] -= (*m)[i];
  }
  return m_g;
}

Result<double> raise_auto_threshold(const std::vector<TaskInfo>& tasks, RaiseMetric metric) {
  if (tasks.empty()) return Status::invalid_argument("raise: an `auto` threshold needs at least one task");
  double sum = 0;
  for (const TaskInfo& t : tasks) sum += at(t.vectors.at(t.class_variant), metric);
  return sum / static_cast<double>(tasks.size()) + 0.5;
}

Status RaisePolicy::on_start(SchedContext& ctx) {
  (void)ctx;
  streams_.reset();
  return update_thresholds();
}

Status RaisePolicy::on_tenant_joined(SchedContext& ctx, TenantId tenant) {
  CONCORD_RETURN_IF_ERROR(types_.joined(ctx, tenant));
  return update_thresholds();
}

Status RaisePolicy::update_thresholds() {
  if (thresholds_for_ == types_.version()) return Status::ok();
  const std::vector<TaskInfo> known = types_.all_known();
  alpha_ = p_.alpha;
  beta_ = p_.beta;
  if (known.empty()) return Status::ok();  // `auto` waits for the first task
  thresholds_for_ = types_.version();
  if (p_.alpha_auto) {
    auto a = raise_auto_threshold(known, RaiseMetric::ipc);
    if (!a) return a.status();
    alpha_ = *a;
  }
  if (p_.beta_auto) {
    auto b = raise_auto_threshold(known, RaiseMetric::du);
    if (!b) return b.status();
    beta_ = *b;
  }
  return Status::ok();
}

RaiseVector RaisePolicy::global() const {
  // M_g: what the running tasks leave of the GPU (raise_remaining, without building a list).
  RaiseVector m_g;
  m_g.fill(10);
  streams_.for_each_active([&](int64_t t, const TaskStreams::Active& a) {
    const RaiseVector& m = types_.known(TenantId{t}).vectors[static_cast<size_t>(a.variant)];
    for (size_t i = 0; i < m_g.size(); ++i) m_g[i] -= m[i];
  });
  return m_g;
}

std::optional<TaskChoice> RaisePolicy::choose(SchedContext& ctx, const std::vector<WaitingTask>& waiting) {
  std::vector<const TaskInfo*>& infos = infos_;
  infos.clear();
  for (const WaitingTask& w : waiting) infos.push_back(&types_.of(ctx, w.tenant, w.launch));
  if (p_.alpha_auto || p_.beta_auto) {
    if (!update_thresholds()) return std::nullopt;
  }
  std::vector<RaiseCandidate>& tasks = candidates_;
  tasks.clear();
  for (const TaskInfo* info : infos) {
    tasks.push_back({&info->vectors, info->cls, &info->fits, info->scores.size() == info->vectors.size() ? &info->scores : nullptr});
  }
  auto pick = raise_decide(global(), tasks, alpha_, beta_, p_.fixed_variant, p_.tie);
  if (pick) return TaskChoice{pick->first, pick->second};
  if (streams_.running_tasks() > 0) return std::nullopt;  // hold until a task gives resources back
  // An idle GPU that fits nothing (a task heavier than the whole GPU on every variant): start the
  // first waiting task in its lightest variant rather than wait forever.
  const TaskInfo& first = *infos.front();
  const auto& vecs = first.vectors;
  const RaiseCandidate candidate{&vecs, first.cls, &first.fits};
  int lightest = -1;
  for (int v = 0; v < static_cast<int>(vecs.size()); ++v) {
    if (!fits(candidate, v)) continue;
    if (lightest < 0 ||
        raise_score(vecs[static_cast<size_t>(v)], first.cls) < raise_score(vecs[static_cast<size_t>(lightest)], first.cls)) {
      lightest = v;
    }
  }
  if (p_.fixed_variant >= 0) {
    return TaskChoice{0, fitting_variant(first.fits, std::min<int>(p_.fixed_variant, static_cast<int>(vecs.size()) - 1))};
  }
  return TaskChoice{0, std::max(lightest, 0)};
}

Result<std::unique_ptr<Policy>> make_raise(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("raise", params, {"alpha", "beta", "streams", "dims", "tie", "ahead", "burst"}));
  RaiseParams p;
  // A threshold: a number, or `auto` (from the workload's tasks when the run starts).
  auto threshold = [&](const char* key, double& value, bool& automatic) -> Status {
    auto it = params.find(key);
    if (it != params.end() && it->second == "auto") {
      automatic = true;
      return Status::ok();
    }
    auto v = double_param(params, key, value);
    if (!v) return v.status();
    value = *v;
    return Status::ok();
  };
  CONCORD_RETURN_IF_ERROR(threshold("alpha", p.alpha, p.alpha_auto));
  CONCORD_RETURN_IF_ERROR(threshold("beta", p.beta, p.beta_auto));
  auto streams = int_param(params, "streams", 4, 1);
  if (!streams) return streams.status();
  p.streams = *streams;
  auto tie = double_param(params, "tie", p.tie);
  if (!tie) return tie.status();
  if (*tie < 0) return Status::invalid_argument("raise: parameter 'tie' must be >= 0");
  p.tie = *tie;
  auto dims = dims_param("raise", params, "dynamic");
  if (!dims) return dims.status();
  p.fixed_variant = *dims;
  auto queue = queue_params("raise", params);
  if (!queue) return queue.status();
  return std::unique_ptr<Policy>(std::make_unique<RaisePolicy>(p, *queue));
}

}  // namespace concord::policy
