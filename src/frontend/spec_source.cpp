#include "concord/spec_source.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace concord {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

TenantHints spec_hints(const TenantSpec& tenant) {
  TenantHints hints;
  for (const KernelStep& s : tenant.steps) hints.request.push_back({&s.kernel, s.count});
  hints.requests = tenant.requests;
  return hints;
}

SpecSource::SpecSource(const Workload& workload, SpecSourceOptions options) : workload_(workload), options_(options) {}

Status SpecSource::open(TenantSink& sink) {
  if (workload_.tenants.empty()) return Status::invalid_argument("workload '" + workload_.name + "' has no tenants");
  tenants_.clear();
  tenants_.reserve(workload_.tenants.size());
  for (size_t i = 0; i < workload_.tenants.size(); ++i) {
    const TenantSpec& spec = workload_.tenants[i];
    if (spec.steps.empty()) return Status::invalid_argument("tenant '" + spec.name + "' has no kernels");
    TenantInfo info;
    info.name = spec.name;
    info.cls = spec.cls;
    info.latency_target = spec.latency_target;
    info.labels = spec.labels;
    std::optional<TenantHints> hints;
    if (options_.hints) hints = spec_hints(spec);
    std::vector<const KernelSpec*> kernels;
    for (const KernelStep& s : spec.steps) kernels.push_back(&s.kernel);
    auto id = sink.join(info, std::move(hints), kernels);
    if (!id) return id.status();
    Tenant t;
    t.spec = &spec;
    t.id = *id;
    switch (spec.arrival.kind) {
      case ArrivalProcess::Kind::closed_loop:
        break;
      case ArrivalProcess::Kind::poisson: {
        // Each tenant draws from its own stream, so adding a tenant leaves the others' arrivals alone.
        std::mt19937_64 gen(options_.seed * 0x9E3779B97F4A7C15ULL + i + 1);
        std::exponential_distribution<double> gap(spec.arrival.rate_per_s);
        Seconds at = 0;
        for (int r = 0; r < spec.requests; ++r) {
          at += gap(gen);
          t.arrivals.push_back(at);
        }
        break;
      }
      case ArrivalProcess::Kind::timestamps:
        t.arrivals = spec.arrival.timestamps;
        break;
    }
    tenants_.push_back(std::move(t));
  }
  return Status::ok();
}

SpecSource::Tenant* SpecSource::find(TenantId id) {
  for (Tenant& t : tenants_) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

Status SpecSource::submit_next(TenantSink& sink, Tenant& t) {
  const auto& steps = t.spec->steps;
  const KernelStep& step = steps[t.step];
  const bool last = t.step + 1 == steps.size() && t.repeat + 1 == step.count;
  CONCORD_RETURN_IF_ERROR(sink.submit(t.id, LaunchSubmission{&step.kernel, t.request, last}));
  if (++t.repeat >= step.count) {
    t.repeat = 0;
    ++t.step;
  }
  return Status::ok();
}

Status SpecSource::start_request(TenantSink& sink, Tenant& t, Seconds at) {
  auto r = sink.arrive(t.id, at);
  if (!r) return r.status();
  t.request = *r;
  t.step = 0;
  t.repeat = 0;
  if (options_.submit == SpecSourceOptions::Submit::request) {
    while (t.step < t.spec->steps.size()) CONCORD_RETURN_IF_ERROR(submit_next(sink, t));
    return Status::ok();
  }
  return submit_next(sink, t);
}

Status SpecSource::arrive(TenantSink& sink, Tenant& t, Seconds at) {
  ++t.arrived;
  // One launch at a time: a request that arrives while another is being submitted waits its turn
  // (its latency still counts from `at`).
  if (options_.submit == SpecSourceOptions::Submit::launch && t.request >= 0) {
    t.waiting.push_back(at);
    return Status::ok();
  }
  CONCORD_RETURN_IF_ERROR(start_request(sink, t, at));
  return leave_if_done(sink, t);
}

Status SpecSource::leave_if_done(TenantSink& sink, Tenant& t) {
  if (t.left || t.arrived < t.spec->requests || !t.waiting.empty() || t.step < t.spec->steps.size()) return Status::ok();
  t.left = true;
  return sink.leave(t.id);
}

Result<Seconds> SpecSource::pump(TenantSink& sink) {
  Seconds next = kNever;
  for (Tenant& t : tenants_) {
    if (t.arrivals.empty()) {
      // Closed loop: the first request arrives as the clock starts, each next one as the last ends.
      if (t.arrived == 0) CONCORD_RETURN_IF_ERROR(arrive(sink, t, 0.0));
      continue;
    }
    while (t.arrived < t.spec->requests && t.arrivals[static_cast<size_t>(t.arrived)] <= sink.now()) {
      CONCORD_RETURN_IF_ERROR(arrive(sink, t, t.arrivals[static_cast<size_t>(t.arrived)]));
    }
    if (t.arrived < t.spec->requests) next = std::min(next, t.arrivals[static_cast<size_t>(t.arrived)]);
  }
  return next;
}

Status SpecSource::on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds at) {
  (void)launch;
  (void)at;
  if (options_.submit != SpecSourceOptions::Submit::launch) return Status::ok();
  Tenant* t = find(tenant);
  if (!t || t->request < 0 || t->step >= t->spec->steps.size()) return Status::ok();
  CONCORD_RETURN_IF_ERROR(submit_next(sink, *t));
  return leave_if_done(sink, *t);
}

Status SpecSource::on_request_end(TenantSink& sink, TenantId tenant, int64_t request, Seconds at) {
  (void)request;
  Tenant* t = find(tenant);
  if (!t) return Status::ok();
  if (options_.submit == SpecSourceOptions::Submit::launch) {
    t->request = -1;
    if (!t->waiting.empty()) {
      const Seconds arrived_at = t->waiting.front();
      t->waiting.pop_front();
      CONCORD_RETURN_IF_ERROR(start_request(sink, *t, arrived_at));
      return leave_if_done(sink, *t);
    }
  }
  // Closed loop: the next request arrives as this one ends.
  if (t->arrivals.empty() && t->arrived < t->spec->requests) return arrive(sink, *t, at);
  return Status::ok();
}

bool SpecSource::exhausted() const {
  return std::all_of(tenants_.begin(), tenants_.end(), [](const Tenant& t) { return t.left; });
}

RunOutcome run_workload_outcome(const Workload& workload, Backend& backend, Policy& policy, const EngineOptions& options,
                                SpecSourceOptions source) {
  source.seed = options.seed;
  SpecSource spec(workload, source);
  return run_engine_outcome(spec, backend, policy, options);
}

Result<RunRecord> run_workload(const Workload& workload, Backend& backend, Policy& policy, const EngineOptions& options,
                               SpecSourceOptions source) {
  RunOutcome outcome = run_workload_outcome(workload, backend, policy, options, source);
  if (!outcome.status) return outcome.status;
  return std::move(outcome.record);
}

}  // namespace concord
