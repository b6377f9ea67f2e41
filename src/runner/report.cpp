#include "concord/report.h"

#include <fmt/format.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace concord {

using nlohmann::json;

namespace {

json placement_json(const Placement& p) {
  json j{{"sms", p.sms.to_string()}, {"sm_count", p.sms.count()}, {"tlp", p.tlp},
         {"cache", to_string(p.cache)}, {"form", to_string(p.form)}, {"variant", p.variant}, {"priority", p.priority}};
  if (p.tight_tlp > 0) {
    j["tight_sms"] = p.tight_sms.to_string();
    j["tight_tlp"] = p.tight_tlp;
  }
  if (p.fusion) {
    j["fusion"] = {{"partner", p.fusion->partner.value}, {"self_parts", p.fusion->self_parts},
                   {"partner_parts", p.fusion->partner_parts}};
  }
  return j;
}

}  // namespace

std::string experiment_json(const ExperimentResult& r, const RunContext& ctx) {
  const Metrics& m = r.metrics;
  json j;
  j["workload"] = ctx.workload_file;
  j["policy"] = r.run.policy;
  j["params"] = ctx.params;
  j["backend"] = r.run.backend;
  j["device"] = r.run.device;
  j["commit"] = ctx.commit;
  j["seed"] = r.run.seed;
  j["metrics"] = {{"stp", m.stp}, {"stp_window", m.stp_window}, {"window_s", m.window}, {"antt", m.antt}, {"fi", m.fi}, {"hs", m.hs}, {"makespan_s", m.makespan},
                  {"lc_goodput_per_s", m.lc_goodput}, {"be_throughput_per_s", m.be_throughput},
                  {"overall_throughput_per_s", m.overall_throughput}};
  if (m.serial_makespan) {
    j["metrics"]["serial_makespan_s"] = *m.serial_makespan;
    j["metrics"]["speedup_over_serial"] = *m.speedup_over_serial;
  }
  j["tenants"] = json::array();
  for (size_t i = 0; i < m.tenants.size(); ++i) {
    const TenantMetrics& t = m.tenants[i];
    const TenantRecord& rec = r.run.tenants[i];
    json requests = json::array();
    for (const auto& q : rec.requests) requests.push_back({{"arrival_s", q.arrival}, {"start_s", q.start}, {"end_s", q.end}});
    j["tenants"].push_back({{"name", t.name}, {"class", to_string(t.cls)}, {"alone_s", t.alone}, {"shared_s", t.shared},
                            {"np", t.np}, {"np_window", t.np_window}, {"latency_p50_s", t.latency_p50}, {"latency_p99_s", t.latency_p99},
                            {"latency_target_s", t.latency_target}, {"slo_attainment", t.slo_attainment},
                            {"requests_per_s", t.requests_per_s}, {"blocks_per_s", t.blocks_per_s},
                            {"logical_blocks", rec.logical_blocks}, {"requests", requests}});
  }
  j["launches"] = json::array();
  for (const auto& l : r.run.launches) {
    j["launches"].push_back({{"id", l.id.value}, {"tenant", l.tenant.value}, {"kernel", l.kernel}, {"request", l.request},
                             {"index", l.index}, {"logical_blocks", l.logical_blocks}, {"ready_s", l.ready},
                             {"start_s", l.start}, {"end_s", l.end}});
  }
  j["dispatches"] = json::array();
  for (const auto& d : r.run.dispatches) {
    json launches = json::array(), ranges = json::array();
    for (size_t k = 0; k < d.launches.size(); ++k) {
      launches.push_back(d.launches[k].value);
      ranges.push_back({d.ranges[k].begin, d.ranges[k].end});
    }
    j["dispatches"].push_back({{"id", d.id.value}, {"launches", launches}, {"ranges", ranges}, {"blocks_done", d.blocks_done},
                               {"dispatched_s", d.dispatched}, {"start_s", d.start}, {"end_s", d.end}, {"seen_s", d.seen},
                               {"after", d.after.valid() ? json(d.after.value) : json(nullptr)},
                               {"preempted", d.preempted}, {"placement", placement_json(d.placement)}});
  }
  j["engine"] = {{"policy_calls", r.run.stats.policy_calls}, {"dispatches", r.run.stats.dispatches},
                 {"policy_seconds", r.run.stats.policy_seconds},
                 {"backend_dispatch_seconds", r.run.stats.backend_seconds}, {"engine_seconds", r.run.stats.engine_seconds}};
  return j.dump(1);
}

void print_summary(std::ostream& out, const ExperimentResult& r) {
  const Metrics& m = r.metrics;
  out << fmt::format("policy {}  backend {}  device {}  seed {}\n", r.run.policy, r.run.backend, r.run.device, r.run.seed);
  out << fmt::format("{:<20} {:>3} {:>12} {:>12} {:>7} {:>11} {:>11} {:>6}\n", "tenant", "cls", "alone ms", "shared ms", "NP",
                     "p50 ms", "p99 ms", "SLO");
  for (const auto& t : m.tenants) {
    const bool lc = t.cls == TenantClass::latency_critical;
    out << fmt::format("{:<20} {:>3} {:>12.3f} {:>12.3f} {:>7.3f} {:>11.3f} {:>11.3f} {:>6}\n", t.name, to_string(t.cls),
                       t.alone * 1e3, t.shared * 1e3, t.np, t.latency_p50 * 1e3, t.latency_p99 * 1e3,
                       lc ? fmt::format("{:.0f}%", t.slo_attainment * 100) : std::string("-"));
  }
  out << fmt::format("STP {:.3f} (co-run window {:.3f} over {:.3f} ms)  ANTT {:.3f}  FI {:.3f}  HS {:.3f}  makespan {:.3f} ms",
                     m.stp, m.stp_window, m.window * 1e3, m.antt, m.fi, m.hs, m.makespan * 1e3);
  if (m.speedup_over_serial) out << fmt::format("  speedup over serial {:.3f}x", *m.speedup_over_serial);
  out << "\n";
}

void ChromeTraceObserver::on_dispatch_end(const DispatchRecord& d) {
  std::string name;
  for (size_t k = 0; k < d.launches.size(); ++k) {
    if (k > 0) name += '+';
    name += 'L';
    name += std::to_string(d.launches[k].value);
  }
  const std::string args = fmt::format(R"({{"dispatch":{},"sms":"{}","tlp":{},"cache":"{}","form":"{}","preempted":{},"after":{}}})",
                                       d.id.value, d.placement.sms.to_string(), d.placement.tlp, to_string(d.placement.cache),
                                       to_string(d.placement.form), d.preempted ? "true" : "false",
                                       d.after.valid() ? std::to_string(d.after.value) : "null");
  for (TenantId t : d.tenants) events_.push_back({name, 1, t.value, d.start * 1e6, (d.end - d.start) * 1e6, args});
  std::set<int> gpcs;
  for (int sm : d.placement.sms.ids()) {
    if (sm < device_.sm_count) gpcs.insert(device_.gpc_of_sm[static_cast<size_t>(sm)]);
  }
  for (int g : gpcs) events_.push_back({name, 2, g, d.start * 1e6, (d.end - d.start) * 1e6, args});
}

void ChromeTraceObserver::on_request_end(TenantId tenant, const RequestRecord& q) {
  events_.push_back({"request", 3, tenant.value, q.arrival * 1e6, (q.end - q.arrival) * 1e6, "{}"});
}

Status ChromeTraceObserver::write(const std::string& path) const {
  json events = json::array();
  auto meta = [&](int pid, int64_t tid, const std::string& pname, const std::string& tname) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", pname}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", tname}}}});
  };
  for (size_t t = 0; t < tenant_names_.size(); ++t) {
    meta(1, static_cast<int64_t>(t), "tenants (kernels)", tenant_names_[t]);
    meta(3, static_cast<int64_t>(t), "tenants (requests)", tenant_names_[t]);
  }
  for (int g = 0; g < device_.gpc_count(); ++g) meta(2, g, "SM groups", "GPC " + std::to_string(g));
  for (const Event& e : events_) {
    events.push_back({{"ph", "X"}, {"name", e.name}, {"pid", e.pid}, {"tid", e.tid}, {"ts", e.start_us},
                      {"dur", e.dur_us}, {"args", json::parse(e.args)}});
  }
  std::ofstream out(path);
  if (!out) return Status::not_found(path + ": cannot write trace");
  out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
  return out ? Status::ok() : Status::internal(path + ": write failed");
}

}  // namespace concord
