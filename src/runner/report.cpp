#include "concord/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

namespace concord {
// A time of the results file, or null where it was not reached (-1), for fmt.
struct TimeOrNull {
  double t;
};
}  // namespace concord

template <>
struct fmt::formatter<concord::TimeOrNull> : fmt::formatter<double> {
  auto format(concord::TimeOrNull v, fmt::format_context& ctx) const {
    // Not reached (-1), or not a finite number (JSON has none): null, as nlohmann writes it.
    return v.t < 0 || !std::isfinite(v.t) ? fmt::format_to(ctx.out(), "null") : fmt::format_to(ctx.out(), "{}", v.t);
  }
};

namespace concord {

using nlohmann::json;

namespace {

json placement_json(const Placement& p) {
  json j{{"sms", p.sms.to_string()}, {"sm_count", p.sms.count()}, {"tlp", p.tlp},
         {"cache", to_string(p.cache)}, {"form", to_string(p.form)}, {"variant", p.variant}, {"priority", p.priority}};
  if (p.l2_persist) j["l2_persist"] = true;
  if (p.tight_tlp > 0) {
    j["tight_sms"] = p.tight_sms.to_string();
    j["tight_tlp"] = p.tight_tlp;
  }
  if (p.fusion) {
    j["fusion"] = {{"partner", p.fusion->partner.value}, {"self_parts", p.fusion->self_parts},
                   {"partner_parts", p.fusion->partner_parts}, {"partner_variant", p.fusion->partner_variant}};
  }
  return j;
}

json device_info_json(const DeviceSpec& d, const std::string& backend) {
  auto known = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  auto positive = [](double v) { return v > 0 ? json(v) : json(nullptr); };
  return {{"name", d.name},
          {"simulated", backend == "sim"},
          {"sm_count", d.sm_count},
          {"gpcs", d.gpc_count()},
          {"l2_bytes", d.l2_bytes},
          {"clock_hz", positive(d.clock_hz)},
          {"memory_clock_hz", positive(d.memory_clock_hz)},
          {"driver_version", known(d.driver_version)},
          {"cuda_version", known(d.cuda_version)},
          {"cuda_driver_version", known(d.cuda_driver_version)}};
}

}  // namespace

std::string provenance_json(const DeviceSpec& device, const std::string& backend, const std::string& version,
                            const std::string& commit) {
  return json{{"build", {{"version", version}, {"commit", commit}}}, {"device_info", device_info_json(device, backend)}}.dump();
}

namespace {

// A time the record holds, or null where it has none (-1: not reached when the run ended early).
json time_or_null(Seconds s) { return s < 0 ? json(nullptr) : json(s); }

// The whole results file: `metrics` is null when the experiment ended before they could be
// computed; `status` says whether it is complete, and if not where it ended and why. Written to
// `sink` piece by piece: the small fields as one object, then the launches and dispatches one
// element at a time, so the file never exists whole in memory as a JSON tree (a run's records are
// about 1.3 KB per launch; a tree of them was about 5 KB more).
void results_json(const RunRecord& run, const Metrics* metrics, const json& status, const RunContext& ctx, const JsonSink& sink) {
  json j;
  j["schema_version"] = kResultsSchemaVersion;
  j["workload"] = ctx.workload_file;
  j["policy"] = run.policy;
  j["params"] = ctx.params;
  j["backend"] = run.backend;
  j["device"] = run.device;
  j["commit"] = ctx.commit;
  j["build"] = {{"version", ctx.version}, {"commit", ctx.commit}};
  j["device_info"] = device_info_json(ctx.device, run.backend);
  j["seed"] = run.seed;
  j["status"] = status;
  if (metrics) {
    const Metrics& m = *metrics;
    json headline{{"kind", to_string(m.headline.kind)}, {"name", m.headline.name}, {"value", m.headline.value},
                  {"text", headline_text(m.headline)}};
    if (m.headline.kind == Headline::Kind::open_loop) {
      headline["lc_goodput_per_s"] = m.headline.lc_goodput_per_s;
      headline["be_np_sum"] = m.headline.be_np_sum;
    }
    j["metrics"] = {{"headline", headline}, {"np_sum", m.np_sum}, {"stp_window", m.stp_window}, {"window_s", m.window}, {"antt", m.antt}, {"fi", m.fi}, {"hs", m.hs}, {"makespan_s", m.makespan},
                    {"lc_goodput_per_s", m.lc_goodput}, {"be_throughput_per_s", m.be_throughput},
                    {"overall_throughput_per_s", m.overall_throughput}};
    if (m.serial_makespan) {
      j["metrics"]["serial_makespan_s"] = *m.serial_makespan;
      j["metrics"]["speedup_over_serial"] = *m.speedup_over_serial;
    }
  } else {
    j["metrics"] = nullptr;
  }
  j["tenants"] = json::array();
  for (size_t i = 0; i < run.tenants.size(); ++i) {
    const TenantRecord& rec = run.tenants[i];
    json requests = json::array();
    int64_t finished = 0;
    for (const auto& q : rec.requests) {
      requests.push_back({{"arrival_s", time_or_null(q.arrival)}, {"start_s", time_or_null(q.start)}, {"end_s", time_or_null(q.end)}});
      if (q.end >= 0) ++finished;
    }
    json t{{"name", rec.name}, {"class", to_string(rec.cls)}, {"latency_target_s", rec.latency_target},
           {"logical_blocks", rec.logical_blocks}, {"requests_finished", finished}, {"requests", requests}};
    if (metrics && i < metrics->tenants.size()) {
      const TenantMetrics& m = metrics->tenants[i];
      t.update({{"alone_s", m.alone}, {"shared_s", m.shared}, {"np", m.np}, {"np_window", m.np_window},
                {"latency_p50_s", m.latency_p50}, {"latency_p99_s", m.latency_p99}, {"slo_attainment", m.slo_attainment},
                {"requests_per_s", m.requests_per_s}, {"blocks_per_s", m.blocks_per_s}});
    } else {
      for (const char* field : {"alone_s", "shared_s", "np", "np_window", "latency_p50_s", "latency_p99_s", "slo_attainment",
                                "requests_per_s", "blocks_per_s"}) {
        t[field] = nullptr;
      }
      if (rec.finish >= 0) t["shared_s"] = rec.elapsed();
    }
    j["tenants"].push_back(std::move(t));
  }
  j["engine"] = {{"policy_calls", run.stats.policy_calls}, {"dispatches", run.stats.dispatches},
                 {"policy_seconds", run.stats.policy_seconds},
                 {"backend_dispatch_seconds", run.stats.backend_seconds}, {"engine_seconds", run.stats.engine_seconds}};
  if (!run.stats.policy.empty()) j["engine"]["policy_stats"] = run.stats.policy;
  // The small fields, without the object's closing brace; then the two long arrays.
  std::string head = j.dump(1);
  head.pop_back();  // '}'
  while (!head.empty() && (head.back() == '\n' || head.back() == ' ')) head.pop_back();
  sink(head);
  // Each element written with fmt straight into one reused buffer: a JSON object per element
  // cost about 8 us each, which made writing a long run's results take longer than the run.
  fmt::memory_buffer buf;
  const auto flush = [&] { sink(std::string_view(buf.data(), buf.size())); };
  const auto time_text = [](Seconds t) { return TimeOrNull{t}; };
  std::map<std::string, std::string> quoted;  // kernel name -> its JSON string
  const auto quote = [&](const std::string& k) -> const std::string& {
    auto it = quoted.find(k);
    if (it == quoted.end()) it = quoted.emplace(k, json(k).dump()).first;
    return it->second;
  };
  sink(",\n \"launches\": [");
  bool first = true;
  for (const auto& l : run.launches) {
    buf.clear();
    fmt::format_to(fmt::appender(buf),
                   "{}{{\"id\":{},\"tenant\":{},\"kernel\":{},\"request\":{},\"index\":{},\"logical_blocks\":{},\"ready_s\":{},"
                   "\"start_s\":{},\"end_s\":{}}}",
                   first ? "\n  " : ",\n  ", l.id.value, l.tenant.value, quote(l.kernel), l.request, l.index, l.logical_blocks,
                   time_text(l.ready), time_text(l.start), time_text(l.end));
    flush();
    first = false;
  }
  sink("\n ],\n \"dispatches\": [");
  first = true;
  SmSet last_sms;  // placements repeat their SM set: its text made once per run of equal ones
  std::string last_sms_text = last_sms.to_string();
  const auto append = [&](std::string_view text) { buf.append(text.data(), text.data() + text.size()); };
  for (const auto& d : run.dispatches) {
    buf.clear();
    auto out = fmt::appender(buf);
    fmt::format_to(out, "{}{{\"id\":{},\"launches\":[", first ? "\n  " : ",\n  ", d.id.value);
    for (size_t k = 0; k < d.launches.size(); ++k) fmt::format_to(out, "{}{}", k ? "," : "", d.launches[k].value);
    append("],\"ranges\":[");
    for (size_t k = 0; k < d.ranges.size(); ++k) fmt::format_to(out, "{}[{},{}]", k ? "," : "", d.ranges[k].begin, d.ranges[k].end);
    const Placement& p = d.placement;
    append("],\"blocks_done\":[");
    for (size_t k = 0; k < d.blocks_done.size(); ++k) fmt::format_to(out, "{}{}", k ? "," : "", d.blocks_done[k]);
    fmt::format_to(out,
                   "],\"dispatched_s\":{},\"start_s\":{},\"end_s\":{},\"seen_s\":{},\"after\":{},"
                   "\"preempted\":{},\"placement\":",
                   time_text(d.dispatched), time_text(d.start), time_text(d.end), time_text(d.seen),
                   d.after.valid() ? std::to_string(d.after.value) : std::string("null"), d.preempted);
    if (p.fusion || p.l2_persist || p.tight_tlp > 0) {
      append(placement_json(p).dump());
    } else {
      if (!(p.sms == last_sms)) {
        last_sms = p.sms;
        last_sms_text = p.sms.to_string();
      }
      // Enum names are plain identifiers: no escaping needed.
      fmt::format_to(out, "{{\"sms\":\"{}\",\"sm_count\":{},\"tlp\":{},\"cache\":\"{}\",\"form\":\"{}\",\"variant\":{},\"priority\":{}}}",
                     last_sms_text, p.sms.count(), p.tlp, to_string(p.cache), to_string(p.form), p.variant, p.priority);
    }
    if (!d.error.empty()) append(",\"error\":" + json(d.error).dump());
    append("}");
    flush();
    first = false;
  }
  sink("\n ]\n}");
}

json complete_status() { return {{"complete", true}, {"code", to_string(StatusCode::ok)}, {"stage", nullptr}, {"reason", nullptr}}; }

json outcome_status(const ExperimentOutcome& o) {
  return {{"complete", false}, {"code", to_string(o.status.code())}, {"stage", o.stage}, {"reason", o.status.message()}};
}

std::string to_text(const std::function<void(const JsonSink&)>& write) {
  std::string text;
  write([&](std::string_view piece) { text.append(piece); });
  return text;
}

}  // namespace

void write_experiment_json(const ExperimentOutcome& o, const RunContext& ctx, const JsonSink& sink) {
  if (o.status) return results_json(o.result.run, &o.result.metrics, complete_status(), ctx, sink);
  results_json(o.result.run, nullptr, outcome_status(o), ctx, sink);
}

std::string experiment_json(const ExperimentResult& r, const RunContext& ctx) {
  return to_text([&](const JsonSink& sink) { results_json(r.run, &r.metrics, complete_status(), ctx, sink); });
}

std::string experiment_json(const ExperimentOutcome& o, const RunContext& ctx) {
  return to_text([&](const JsonSink& sink) { write_experiment_json(o, ctx, sink); });
}

void print_outcome(std::ostream& out, const ExperimentOutcome& o) {
  if (o.status) {
    print_summary(out, o.result);
    return;
  }
  const RunRecord& run = o.result.run;
  out << fmt::format("policy {}  backend {}  device {}  seed {}: ended early in the {}\n", run.policy, run.backend, run.device,
                     run.seed, o.stage);
  out << fmt::format("{:<20} {:>3} {:>26} {:>16}\n", "tenant", "cls", "requests finished", "logical blocks");
  for (const TenantRecord& t : run.tenants) {
    const auto finished = std::count_if(t.requests.begin(), t.requests.end(), [](const RequestRecord& q) { return q.end >= 0; });
    out << fmt::format("{:<20} {:>3} {:>26} {:>16}\n", t.name, to_string(t.cls),
                       fmt::format("{} of {} arrived", finished, t.requests.size()), t.logical_blocks);
  }
}

void print_summary(std::ostream& out, const ExperimentResult& r) {
  const Metrics& m = r.metrics;
  out << fmt::format("policy {}  backend {}  device {}  seed {}\n", r.run.policy, r.run.backend, r.run.device, r.run.seed);
  out << fmt::format("{:<20} {:>3} {:>12} {:>12} {:>7} {:>9} {:>11} {:>11} {:>6}\n", "tenant", "cls", "alone ms", "shared ms",
                     "NP", "window NP", "p50 ms", "p99 ms", "SLO");
  for (const auto& t : m.tenants) {
    const bool lc = t.cls == TenantClass::latency_critical;
    out << fmt::format("{:<20} {:>3} {:>12.3f} {:>12.3f} {:>7.3f} {:>9.3f} {:>11.3f} {:>11.3f} {:>6}\n", t.name,
                       to_string(t.cls), t.alone * 1e3, t.shared * 1e3, t.np, t.np_window, t.latency_p50 * 1e3,
                       t.latency_p99 * 1e3,
                       lc ? fmt::format("{:.0f}%", t.slo_attainment * 100) : std::string("-"));
  }
  // The headline by the kind of workload (metrics.h, Headline), as the results file's
  // metrics.headline has it; then the other figures, each named as its key is.
  out << headline_text(m.headline) << "\n";
  out << fmt::format("stp_window {:.3f} (the first {:.3f} ms, until a tenant finished)  np_sum {:.3f} (whole run)", m.stp_window,
                     m.window * 1e3, m.np_sum);
  if (m.speedup_over_serial) out << fmt::format("  speedup_over_serial {:.3f}x", *m.speedup_over_serial);
  out << fmt::format("\nantt {:.3f}  fi {:.3f}  hs {:.3f}  makespan {:.3f} ms\n", m.antt, m.fi, m.hs, m.makespan * 1e3);
}

}  // namespace concord
