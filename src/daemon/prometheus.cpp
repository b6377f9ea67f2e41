#include "daemon/prometheus.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace concord::daemon {

void LatencyWindow::add(Clock::time_point at, double seconds) {
  entries_.emplace_back(at, seconds);
  while (entries_.size() > max_entries_) entries_.pop_front();
}

void LatencyWindow::expire(Clock::time_point now) {
  while (!entries_.empty() && now - entries_.front().first > window_) entries_.pop_front();
}

double LatencyWindow::quantile(double q, Clock::time_point now) {
  expire(now);
  if (entries_.empty()) return 0;
  std::vector<double> v;
  v.reserve(entries_.size());
  for (const auto& e : entries_) v.push_back(e.second);
  // Nearest rank: the smallest value with at least q of the values at or below it.
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  const size_t k = rank == 0 ? 0 : rank - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

size_t LatencyWindow::count(Clock::time_point now) {
  expire(now);
  return entries_.size();
}

double LatencyWindow::sum(Clock::time_point now) {
  expire(now);
  double s = 0;
  for (const auto& e : entries_) s += e.second;
  return s;
}

void MetricsBoard::publish(size_t lane, DaemonSnapshot snapshot) {
  std::lock_guard lock(mu_);
  if (lane >= lanes_.size()) lanes_.resize(lane + 1);
  lanes_[lane] = std::move(snapshot);
}

DaemonSnapshot MetricsBoard::read() const {
  std::lock_guard lock(mu_);
  DaemonSnapshot out;
  std::vector<std::string> models;
  for (const DaemonSnapshot& l : lanes_) {
    if (out.policy.empty()) out.policy = l.policy;
    if (!l.device.empty() && std::find(models.begin(), models.end(), l.device) == models.end()) models.push_back(l.device);
    out.rejected = std::max(out.rejected, l.rejected);
    out.dropped = std::max(out.dropped, l.dropped);
    out.lc_refused = std::max(out.lc_refused, l.lc_refused);
    out.lc_flags_cleared += l.lc_flags_cleared;
    out.decisions += l.decisions;
    out.devices.insert(out.devices.end(), l.devices.begin(), l.devices.end());
    out.tenants.insert(out.tenants.end(), l.tenants.begin(), l.tenants.end());
  }
  out.device = fmt::format("{}", fmt::join(models, ","));
  return out;
}

namespace {

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string labels(const TenantSnapshot& t) {
  return fmt::format("tenant=\"{}\",device=\"{}\",name=\"{}\",class=\"{}\",uid=\"{}\"", t.id, escape(t.device), escape(t.name),
                     t.cls == TenantClass::latency_critical ? "lc" : "be", t.uid);
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string prometheus_text(const DaemonSnapshot& all, const MetricsView& view) {
  // The tenants this reader may see by name; the totals count every tenant.
  DaemonSnapshot s = all;
  if (view.kind != MetricsView::Kind::all) {
    std::erase_if(s.tenants, [&](const TenantSnapshot& t) { return view.kind == MetricsView::Kind::aggregate || t.uid != view.uid; });
  }
  std::string out;
  family(out, "concord_info", "gauge", "The daemon's policy and device (value 1).");
  out += fmt::format("concord_info{{policy=\"{}\",device=\"{}\"}} 1\n", escape(s.policy), escape(s.device));
  family(out, "concord_tenants", "gauge", "Tenants registered now.");
  out += fmt::format("concord_tenants {}\n", all.tenants.size());
  // Per GPU (no names): its model and bus id, its tenants and the decisions its engine made.
  family(out, "concord_device_info", "gauge", "A GPU the daemon manages: its label, PCI bus id and the spec its policy plans for (value 1).");
  for (const DeviceSnapshot& d : all.devices) {
    out += fmt::format("concord_device_info{{device=\"{}\",bus_id=\"{}\",spec=\"{}\"}} 1\n", escape(d.label), escape(d.bus_id),
                       escape(d.spec));
  }
  family(out, "concord_device_tenants", "gauge", "Tenants registered now on each GPU.");
  for (const DeviceSnapshot& d : all.devices) {
    const auto n = std::count_if(all.tenants.begin(), all.tenants.end(), [&](const TenantSnapshot& t) { return t.device == d.label; });
    out += fmt::format("concord_device_tenants{{device=\"{}\"}} {}\n", escape(d.label), n);
  }
  family(out, "concord_device_decisions_total", "counter", "Decisions sent, or leases published, by each GPU's engine.");
  for (const DeviceSnapshot& d : all.devices) {
    out += fmt::format("concord_device_decisions_total{{device=\"{}\"}} {}\n", escape(d.label), d.decisions);
  }
  family(out, "concord_device_memory_total_bytes", "gauge",
         "A GPU's memory as the daemon's books take it (--memory-total, else the smallest total its tenants reported); absent while not known.");
  for (const DeviceSnapshot& d : all.devices) {
    if (d.memory_total > 0) out += fmt::format("concord_device_memory_total_bytes{{device=\"{}\"}} {}\n", escape(d.label), d.memory_total);
  }
  family(out, "concord_device_memory_granted_bytes", "gauge", "The memory quotas the tenants registered on a GPU hold, in all.");
  for (const DeviceSnapshot& d : all.devices) {
    out += fmt::format("concord_device_memory_granted_bytes{{device=\"{}\"}} {}\n", escape(d.label), d.memory_granted);
  }
  family(out, "concord_device_memory_reserved_bytes", "gauge", "Of the quotas on a GPU, the LC tenants' reservations.");
  for (const DeviceSnapshot& d : all.devices) {
    out += fmt::format("concord_device_memory_reserved_bytes{{device=\"{}\"}} {}\n", escape(d.label), d.memory_reserved);
  }
  // Per class, over every tenant (no names): what any reader may see.
  struct ClassTotal {
    size_t tenants = 0;
    uint64_t launches = 0, completions = 0, requests = 0;
  };
  ClassTotal lc, be;
  for (const TenantSnapshot& t : all.tenants) {
    ClassTotal& c = t.cls == TenantClass::latency_critical ? lc : be;
    ++c.tenants;
    c.launches += t.launches;
    c.completions += t.completions;
    c.requests += t.requests;
  }
  family(out, "concord_class_tenants", "gauge", "Tenants registered now, per class.");
  out += fmt::format("concord_class_tenants{{class=\"lc\"}} {}\nconcord_class_tenants{{class=\"be\"}} {}\n", lc.tenants, be.tenants);
  family(out, "concord_class_launches", "gauge", "Launch notices taken from the tenants of a class registered now (falls when one leaves).");
  out += fmt::format("concord_class_launches{{class=\"lc\"}} {}\nconcord_class_launches{{class=\"be\"}} {}\n", lc.launches,
                     be.launches);
  family(out, "concord_class_completions", "gauge", "Launch completions taken from the tenants of a class registered now (falls when one leaves).");
  out += fmt::format("concord_class_completions{{class=\"lc\"}} {}\nconcord_class_completions{{class=\"be\"}} {}\n",
                     lc.completions, be.completions);
  family(out, "concord_class_requests", "gauge", "LC requests ended, over the LC tenants registered now (falls when one leaves).");
  out += fmt::format("concord_class_requests{{class=\"lc\"}} {}\n", lc.requests);
  family(out, "concord_decisions_total", "counter", "Decisions sent to tenants (release and hold), or leases published.");
  out += fmt::format("concord_decisions_total {}\n", s.decisions);
  family(out, "concord_rejected_total", "counter", "Messages refused: malformed, foreign or out of order.");
  out += fmt::format("concord_rejected_total {}\n", s.rejected);
  family(out, "concord_dropped_total", "counter", "Tenants dropped because their process ended without a goodbye.");
  out += fmt::format("concord_dropped_total {}\n", s.dropped);
  family(out, "concord_lc_refused_total", "counter",
         "Latency-critical registrations refused (the user may not register LC): answered with the reason, or admitted as BE.");
  out += fmt::format("concord_lc_refused_total {}\n", s.lc_refused);
  family(out, "concord_lc_flags_cleared_total", "counter",
         "LC flags the daemon lowered: raised while their tenant had no launch in flight and no request open.");
  out += fmt::format("concord_lc_flags_cleared_total {}\n", s.lc_flags_cleared);

  struct Counter {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const TenantSnapshot&);
  };
  static const Counter counters[] = {
      {"concord_tenant_launches_total", "counter", "Launch notices taken from the tenant.",
       [](const TenantSnapshot& t) { return double(t.launches); }},
      {"concord_tenant_completions_total", "counter", "Launch completions taken from the tenant.",
       [](const TenantSnapshot& t) { return double(t.completions); }},
      {"concord_tenant_failed_total", "counter", "Completions the tenant reported as failed.",
       [](const TenantSnapshot& t) { return double(t.failed); }},
      {"concord_tenant_releases_total", "counter", "Release decisions sent to the tenant.",
       [](const TenantSnapshot& t) { return double(t.releases); }},
      {"concord_tenant_holds_total", "counter", "Hold decisions sent to the tenant.",
       [](const TenantSnapshot& t) { return double(t.holds); }},
      {"concord_tenant_held_seconds_total", "counter", "Time the tenant's launches spent held before release.",
       [](const TenantSnapshot& t) { return t.held_seconds; }},
      {"concord_tenant_requests_total", "counter", "LC requests ended.",
       [](const TenantSnapshot& t) { return double(t.requests); }},
      {"concord_tenant_throughput", "gauge", "Completions per second over the last interval.",
       [](const TenantSnapshot& t) { return t.throughput; }},
  };
  for (const Counter& c : counters) {
    family(out, c.name, c.type, c.help);
    for (const TenantSnapshot& t : s.tenants) out += fmt::format("{}{{{}}} {}\n", c.name, labels(t), c.get(t));
  }
  family(out, "concord_tenant_memory_bytes", "gauge", "GPU memory the tenant has allocated now, as its library counts it.");
  for (const TenantSnapshot& t : s.tenants) out += fmt::format("concord_tenant_memory_bytes{{{}}} {}\n", labels(t), t.memory_live);
  family(out, "concord_tenant_memory_peak_bytes", "gauge", "The most GPU memory the tenant has had allocated at once.");
  for (const TenantSnapshot& t : s.tenants) out += fmt::format("concord_tenant_memory_peak_bytes{{{}}} {}\n", labels(t), t.memory_peak);
  family(out, "concord_tenant_memory_quota_bytes", "gauge",
         "The tenant's memory quota: an LC tenant's reservation, a BE tenant's limit; absent for a tenant without one.");
  for (const TenantSnapshot& t : s.tenants) {
    if (!t.memory.limited()) continue;
    out += fmt::format("concord_tenant_memory_quota_bytes{{{},kind=\"{}\"}} {}\n", labels(t),
                       t.memory.reserved_bytes > 0 ? "reservation" : "limit", t.memory.limit_bytes);
  }
  family(out, "concord_tenant_lc_in_flight", "gauge", "An LC tenant's work-in-flight flag on its GPU's board (1: up).");
  for (const TenantSnapshot& t : s.tenants) {
    if (t.cls == TenantClass::latency_critical) out += fmt::format("concord_tenant_lc_in_flight{{{}}} {}\n", labels(t), t.lc_in_flight ? 1 : 0);
  }
  family(out, "concord_tenant_gpu_bound_share", "gauge",
         "An LC tenant's GPU-bound share: of its recent bursts, the part the GPU ran on after the host's last launch.");
  for (const TenantSnapshot& t : s.tenants) {
    if (t.cls == TenantClass::latency_critical && t.gpu_bound_share >= 0) {
      out += fmt::format("concord_tenant_gpu_bound_share{{{}}} {}\n", labels(t), t.gpu_bound_share);
    }
  }
  family(out, "concord_tenant_lease", "gauge",
         "A BE tenant's lease beside LC work: yield (none, close, cap, room, per-launch), its in-flight cap and room "
         "(SMs, blocks per SM; 0: no cap); the value is 1 while an LC flag it yields to is up.");
  for (const TenantSnapshot& t : s.tenants) {
    if (t.cls != TenantClass::best_effort) continue;
    out += fmt::format("concord_tenant_lease{{{},yield=\"{}\",in_flight_cap=\"{}\",room_sms=\"{}\",room_blocks_per_sm=\"{}\"}} {}\n",
                       labels(t), ipc::to_string(t.lease.yield), t.lease.in_flight_cap, t.lease.room_sms,
                       t.lease.room_blocks_per_sm, t.lease.yielding ? 1 : 0);
  }
  family(out, "concord_tenant_request_latency_seconds", "summary",
         "LC request latency (begin to the end of its last launch) over the recent window.");
  for (const TenantSnapshot& t : s.tenants) {
    if (t.cls != TenantClass::latency_critical) continue;
    out += fmt::format("concord_tenant_request_latency_seconds{{{},quantile=\"0.5\"}} {}\n", labels(t), t.p50);
    out += fmt::format("concord_tenant_request_latency_seconds{{{},quantile=\"0.99\"}} {}\n", labels(t), t.p99);
    out += fmt::format("concord_tenant_request_latency_seconds_sum{{{}}} {}\n", labels(t), t.window_latency_sum);
    out += fmt::format("concord_tenant_request_latency_seconds_count{{{}}} {}\n", labels(t), t.window_requests);
  }
  return out;
}

}  // namespace concord::daemon
