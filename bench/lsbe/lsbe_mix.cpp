#include "lsbe_mix.h"

#include <algorithm>
#include <cmath>

namespace concord::lsbe {

Result<Mix> load_mix(const std::string& path) {
  auto w = load_workload_file(path);
  if (!w) return w.status();
  Mix m;
  m.file = path;
  m.workload.name = w->name;
  m.workload.source = w->source;
  std::vector<TenantSpec> be;
  for (TenantSpec& t : w->tenants) {
    if (t.cls == TenantClass::latency_critical) m.workload.tenants.push_back(std::move(t));
    else be.push_back(std::move(t));
  }
  if (m.workload.tenants.size() != 1) {
    return Status::invalid_argument(path + ": a mix needs exactly one LC tenant; it has " + std::to_string(m.workload.tenants.size()));
  }
  if (be.empty()) return Status::invalid_argument(path + ": a mix needs at least one BE tenant; it has none");
  for (TenantSpec& t : be) {
    if (t.arrival.kind != ArrivalProcess::Kind::closed_loop) {
      return Status::invalid_argument(path + ": BE tenant '" + t.name + "' must run closed loop (no arrival)");
    }
    m.workload.tenants.push_back(std::move(t));
  }
  return m;
}

namespace {

Workload named(const Mix& mix, const std::string& suffix, std::vector<TenantSpec> tenants) {
  Workload w;
  w.name = mix.workload.name + suffix;
  w.source = mix.workload.source;
  w.tenants = std::move(tenants);
  return w;
}

TenantSpec poisson_lc(const Mix& mix, int requests, double rate_per_s, Seconds target) {
  TenantSpec lc = mix.lc();
  lc.requests = requests;
  lc.arrival = ArrivalProcess{ArrivalProcess::Kind::poisson, rate_per_s, {}};
  lc.latency_target = target;
  return lc;
}

}  // namespace

Workload lc_closed(const Mix& mix, int requests) {
  TenantSpec lc = mix.lc();
  lc.requests = requests;
  lc.arrival = ArrivalProcess{};
  return named(mix, "/lc-closed", {lc});
}

Workload lc_poisson(const Mix& mix, int requests, double rate_per_s, Seconds target) {
  return named(mix, "/lc-poisson", {poisson_lc(mix, requests, rate_per_s, target)});
}

Workload be_alone(const Mix& mix, size_t i, int requests) {
  TenantSpec be = mix.be(i);
  be.requests = requests;
  return named(mix, "/" + be.name + "-alone", {be});
}

Workload shared(const Mix& mix, int requests, double rate_per_s, Seconds target, const std::vector<int>& be_requests) {
  std::vector<TenantSpec> tenants{poisson_lc(mix, requests, rate_per_s, target)};
  for (size_t i = 0; i < mix.be_count(); ++i) {
    tenants.push_back(mix.be(i));
    tenants.back().requests = be_requests.at(i);
  }
  return named(mix, "", std::move(tenants));
}

int be_request_ceiling(double alone_requests_per_s, Seconds time_limit) {
  const double n = std::ceil(alone_requests_per_s * time_limit / 2) + 1;
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(spec_limits::kRequests)));
}

}  // namespace concord::lsbe
