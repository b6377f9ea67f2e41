#include "concord/trace.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace concord {

using nlohmann::json;

namespace {

// Process ids: tenants from 1, GPCs after them; threads within a tenant: kernel lanes from 1,
// request lanes from kRequestLane.
constexpr int kTenantPid = 1;
constexpr int64_t kRequestLane = 1000;

// Times are written in microseconds with nanosecond resolution; lanes are assigned on the same
// integer nanoseconds, so what is written never overlaps through rounding.
int64_t to_ns(Seconds s) { return std::llround(s * 1e9); }
double to_us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

struct Slice {
  int64_t begin = 0;
  int64_t end = 0;
  std::string name;
  json args;
};

// Lane of each slice: the lowest-numbered lane free at its start (greedy interval partitioning,
// which uses as few lanes as the most slices running at one instant).
std::vector<int> assign_lanes(const std::vector<Slice>& slices) {
  std::vector<size_t> order(slices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (slices[a].begin != slices[b].begin) return slices[a].begin < slices[b].begin;
    return slices[a].end > slices[b].end;
  });
  std::vector<int> lane(slices.size(), 0);
  std::vector<int64_t> lane_end;
  for (size_t i : order) {
    size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > slices[i].begin) ++l;
    if (l == lane_end.size()) lane_end.push_back(0);
    lane_end[l] = slices[i].end;
    lane[i] = static_cast<int>(l);
  }
  return lane;
}

class TraceBuilder {
 public:
  void process(int pid, const std::string& name, int sort_index) {
    events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    events_.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", sort_index}}}});
  }
  // Writes `slices` as complete events on lanes of `pid` starting at thread `first_tid`, named
  // `lane_name`, `lane_name #2`, ...
  void slices(int pid, int64_t first_tid, const std::string& lane_name, const std::vector<Slice>& slices) {
    const std::vector<int> lane = assign_lanes(slices);
    const int lanes = slices.empty() ? 0 : *std::max_element(lane.begin(), lane.end()) + 1;
    for (int l = 0; l < lanes; ++l) {
      const int64_t tid = first_tid + l;
      const std::string name = l == 0 ? lane_name : lane_name + " #" + std::to_string(l + 1);
      events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
      events_.push_back(
          {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      const Slice& s = slices[i];
      events_.push_back({{"ph", "X"}, {"name", s.name}, {"pid", pid}, {"tid", first_tid + lane[i]}, {"ts", to_us(s.begin)},
                         {"dur", to_us(s.end - s.begin)}, {"args", s.args}});
    }
  }
  void counter(int pid, const std::string& name, int64_t at_ns, int value) {
    events_.push_back({{"ph", "C"}, {"name", name}, {"pid", pid}, {"tid", 0}, {"ts", to_us(at_ns)}, {"args", {{"sms", value}}}});
  }
  json take() { return std::move(events_); }

 private:
  json events_ = json::array();
};

}  // namespace

std::string chrome_trace_json(const RunRecord& run, const DeviceSpec& device, const Status& status, const std::string& stage) {
  std::unordered_map<int64_t, const LaunchRecord*> launch_of;
  for (const LaunchRecord& l : run.launches) launch_of[l.id.value] = &l;
  auto tenant_name = [&](TenantId t) {
    return t.value >= 0 && static_cast<size_t>(t.value) < run.tenants.size() ? run.tenants[static_cast<size_t>(t.value)].name
                                                                           : "tenant " + std::to_string(t.value);
  };

  // One slice per dispatch, named by its parts' tenants and kernels. A dispatch that never ended
  // (a run that ended early and could not stop it) has no slice.
  auto ended = [&](size_t i) { return run.dispatches[i].start >= 0 && run.dispatches[i].end >= 0; };
  std::vector<Slice> dispatches;
  dispatches.reserve(run.dispatches.size());
  for (const DispatchRecord& d : run.dispatches) {
    Slice s;
    s.begin = to_ns(d.start);
    s.end = std::max(s.begin, to_ns(d.end));
    json tenants = json::array(), kernels = json::array(), launches = json::array(), requests = json::array(),
         ranges = json::array();
    for (size_t k = 0; k < d.launches.size(); ++k) {
      const auto it = launch_of.find(d.launches[k].value);
      const TenantId tenant = it != launch_of.end() ? it->second->tenant : (k < d.tenants.size() ? d.tenants[k] : TenantId{});
      const std::string kernel = it != launch_of.end() ? it->second->kernel : "launch " + std::to_string(d.launches[k].value);
      if (k > 0) s.name += " + ";
      s.name += tenant_name(tenant) + ":" + kernel;
      tenants.push_back(tenant_name(tenant));
      kernels.push_back(kernel);
      launches.push_back(d.launches[k].value);
      requests.push_back(it != launch_of.end() ? json(it->second->request) : json(nullptr));
      if (k < d.ranges.size()) ranges.push_back({d.ranges[k].begin, d.ranges[k].end});
    }
    s.args = {{"tenant", tenants},
              {"kernel", kernels},
              {"launch", launches},
              {"request", requests},
              {"logical_blocks", ranges},
              {"dispatch", d.id.value},
              {"sms", d.placement.sms.to_string()},
              {"sm_count", d.placement.sms.count()},
              {"tlp", d.placement.tlp},
              {"cache", to_string(d.placement.cache)},
              {"form", to_string(d.placement.form)},
              {"preempted", d.preempted},
              {"after", d.after.valid() ? json(d.after.value) : json(nullptr)}};
    if (!d.error.empty()) s.args["error"] = d.error;
    dispatches.push_back(std::move(s));
  }

  TraceBuilder trace;
  const int tenant_count = static_cast<int>(run.tenants.size());
  for (int t = 0; t < tenant_count; ++t) {
    const TenantRecord& rec = run.tenants[static_cast<size_t>(t)];
    const int pid = kTenantPid + t;
    trace.process(pid, "tenant " + rec.name + " (" + to_string(rec.cls) + ")", t);

    std::vector<Slice> kernels;
    std::vector<size_t> held;  // dispatches of this tenant, for its SM counter
    for (size_t i = 0; i < run.dispatches.size(); ++i) {
      const auto& ts = run.dispatches[i].tenants;
      if (!ended(i) || std::find(ts.begin(), ts.end(), TenantId{static_cast<int64_t>(t)}) == ts.end()) continue;
      kernels.push_back(dispatches[i]);
      held.push_back(i);
    }
    trace.slices(pid, 1, "kernels", kernels);

    std::vector<Slice> requests;
    for (size_t q = 0; q < rec.requests.size(); ++q) {
      const RequestRecord& r = rec.requests[q];
      if (r.end < 0) continue;  // unfinished when the run ended early
      Slice s;
      s.begin = to_ns(r.arrival);
      s.end = std::max(s.begin, to_ns(r.end));
      s.name = rec.name + " request " + std::to_string(q);
      s.args = {{"tenant", rec.name}, {"request", q}, {"latency_ms", r.latency() * 1e3},
                {"queued_ms", (r.start - r.arrival) * 1e3}};
      if (rec.latency_target > 0) s.args["within_target"] = r.latency() <= rec.latency_target;
      requests.push_back(std::move(s));
    }
    trace.slices(pid, kRequestLane, "requests", requests);

    // SMs held: the union of the SM sets of the tenant's running dispatches, at every start and end.
    std::map<int64_t, std::vector<std::pair<size_t, bool>>> changes;  // time -> (dispatch, starts)
    for (size_t i : held) {
      changes[dispatches[i].begin].push_back({i, true});
      changes[dispatches[i].end].push_back({i, false});
    }
    if (changes.empty() || changes.begin()->first > 0) trace.counter(pid, "SMs held", 0, 0);
    std::multiset<size_t> running;
    int last = 0;
    for (const auto& [at, list] : changes) {
      for (const auto& [i, starts] : list) {
        if (starts) running.insert(i);
      }
      for (const auto& [i, starts] : list) {
        if (!starts) running.erase(running.find(i));
      }
      SmSet sms;
      for (size_t i : running) sms = sms | run.dispatches[i].placement.sms;
      if (sms.count() != last || at == changes.begin()->first) {
        last = sms.count();
        trace.counter(pid, "SMs held", at, last);
      }
    }
  }

  // GPCs: every dispatch on each GPC it has an SM in.
  const std::set<int> gpc_ids(device.gpc_of_sm.begin(), device.gpc_of_sm.end());
  int gpc_index = 0;
  for (int g : gpc_ids) {
    const SmSet gpc = device.sms_of_gpc(g);
    const int pid = kTenantPid + tenant_count + gpc_index;
    trace.process(pid, "GPC " + std::to_string(g) + " (" + std::to_string(gpc.count()) + " SMs)", tenant_count + gpc_index);
    ++gpc_index;
    std::vector<Slice> on_gpc;
    for (size_t i = 0; i < run.dispatches.size(); ++i) {
      const int here = (run.dispatches[i].placement.sms & gpc).count();
      if (here == 0 || !ended(i)) continue;
      Slice s = dispatches[i];
      s.args["sms_in_gpc"] = here;
      on_gpc.push_back(std::move(s));
    }
    trace.slices(pid, 1, "dispatches", on_gpc);
  }

  json other = {{"policy", run.policy}, {"backend", run.backend}, {"device", device.name}, {"sm_count", device.sm_count},
                {"gpcs", gpc_ids.size()}, {"seed", run.seed}};
  other["status"] = {{"complete", status.is_ok()},
                     {"code", to_string(status.code())},
                     {"stage", status.is_ok() ? json(nullptr) : json(stage)},
                     {"reason", status.is_ok() ? json(nullptr) : json(status.message())}};
  return json{{"traceEvents", trace.take()}, {"displayTimeUnit", "ms"}, {"otherData", other}}.dump();
}

}  // namespace concord
