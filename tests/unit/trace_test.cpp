// Chrome/Perfetto traces: every shipped example, traced on the simulator, has no two complete
// slices on one track that overlap without nesting (Chrome and Perfetto misdraw those), names
// each kernel slice by tenant and kernel, holds an SM counter per tenant and a process per GPC.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "concord/device.h"
#include "concord/experiment.h"
#include "concord/trace.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"

namespace concord {
namespace {

using nlohmann::json;

struct Interval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::string name;
};

// Complete slices of each (pid, tid) track, in integer nanoseconds as written.
std::map<std::pair<int64_t, int64_t>, std::vector<Interval>> tracks_of(const json& trace) {
  std::map<std::pair<int64_t, int64_t>, std::vector<Interval>> tracks;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const int64_t begin = std::llround(e.at("ts").get<double>() * 1e3);
    const int64_t dur = std::llround(e.at("dur").get<double>() * 1e3);
    tracks[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}].push_back({begin, begin + dur, e.at("name")});
  }
  return tracks;
}

// The first pair of slices on one track that overlap without one containing the other, as text;
// empty when there is none.
std::string first_improper_overlap(const std::map<std::pair<int64_t, int64_t>, std::vector<Interval>>& tracks) {
  for (auto [key, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const Interval& a, const Interval& b) {
      return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
    });
    std::vector<const Interval*> open;  // the enclosing slices of the current one
    for (const Interval& s : slices) {
      while (!open.empty() && open.back()->end_ns <= s.begin_ns) open.pop_back();
      if (!open.empty() && s.end_ns > open.back()->end_ns) {
        return "pid " + std::to_string(key.first) + " tid " + std::to_string(key.second) + ": '" + open.back()->name +
               "' [" + std::to_string(open.back()->begin_ns) + ", " + std::to_string(open.back()->end_ns) + ") and '" +
               s.name + "' [" + std::to_string(s.begin_ns) + ", " + std::to_string(s.end_ns) + ")";
      }
      open.push_back(&s);
    }
  }
  return "";
}

TEST(TraceCheck, FindsSlicesThatOverlapWithoutNesting) {
  // The checker itself: nested and back-to-back slices pass, a partial overlap is found.
  const json ok = {{"traceEvents",
                    {{{"ph", "X"}, {"name", "outer"}, {"pid", 1}, {"tid", 1}, {"ts", 0.0}, {"dur", 10.0}},
                     {{"ph", "X"}, {"name", "inner"}, {"pid", 1}, {"tid", 1}, {"ts", 2.0}, {"dur", 3.0}},
                     {{"ph", "X"}, {"name", "next"}, {"pid", 1}, {"tid", 1}, {"ts", 10.0}, {"dur", 1.0}},
                     {{"ph", "X"}, {"name", "other track"}, {"pid", 1}, {"tid", 2}, {"ts", 5.0}, {"dur", 10.0}}}}};
  EXPECT_EQ(first_improper_overlap(tracks_of(ok)), "");
  json bad = ok;
  bad["traceEvents"].push_back({{"ph", "X"}, {"name", "straddles"}, {"pid", 1}, {"tid", 1}, {"ts", 9.0}, {"dur", 2.0}});
  EXPECT_NE(first_improper_overlap(tracks_of(bad)), "");
}

// A run record by hand: two dispatches of tenant 0 that overlap in time and share SMs 0-3, and a
// fused dispatch of both tenants.
RunRecord overlapping_run() {
  RunRecord run;
  run.policy = "hand";
  run.backend = "sim";
  for (const char* name : {"a", "b"}) {
    TenantRecord t;
    t.name = name;
    t.requests = {{0.0, 0.0, 3e-3}, {1e-3, 1e-3, 4e-3}};  // overlapping requests too
    run.tenants.push_back(t);
  }
  auto launch = [&](int64_t id, int64_t tenant, const char* kernel) {
    LaunchRecord l;
    l.id = LaunchId{id};
    l.tenant = TenantId{tenant};
    l.kernel = kernel;
    run.launches.push_back(l);
  };
  launch(0, 0, "gemm");
  launch(1, 0, "triad");
  launch(2, 1, "bfs");
  auto dispatch = [&](int64_t id, std::vector<int64_t> launches, SmSet sms, double start, double end) {
    DispatchRecord d;
    d.id = DispatchId{id};
    for (int64_t l : launches) {
      d.launches.push_back(LaunchId{l});
      d.tenants.push_back(run.launches[static_cast<size_t>(l)].tenant);
      d.ranges.push_back({0, 10});
    }
    d.placement.sms = sms;
    d.start = start;
    d.end = end;
    run.dispatches.push_back(d);
  };
  dispatch(0, {0}, SmSet::range(0, 8), 0.0, 2e-3);       // SMs 0-7
  dispatch(1, {1}, SmSet::range(4, 8), 1e-3, 3e-3);      // SMs 4-11: overlaps dispatch 0 in time
  dispatch(2, {1, 2}, SmSet::range(100, 4), 3e-3, 4e-3);  // fused: triad of a with bfs of b
  return run;
}

TEST(Trace, OverlappingDispatchesGoToSeparateLanesWithTenantAndKernelNames) {
  const DeviceSpec device = h200_spec();
  const json trace = json::parse(chrome_trace_json(overlapping_run(), device));
  const auto tracks = tracks_of(trace);
  EXPECT_EQ(first_improper_overlap(tracks), "");
  std::set<std::string> names;
  std::set<std::pair<int64_t, int64_t>> gemm_or_triad_tracks;
  for (const auto& [key, slices] : tracks) {
    for (const Interval& s : slices) {
      names.insert(s.name);
      if (key.first == 1 && (s.name == "a:gemm" || s.name == "a:triad")) gemm_or_triad_tracks.insert(key);
    }
  }
  EXPECT_TRUE(names.count("a:gemm"));
  EXPECT_TRUE(names.count("a:triad"));
  EXPECT_TRUE(names.count("a:triad + b:bfs"));
  EXPECT_TRUE(names.count("a request 1"));
  EXPECT_EQ(gemm_or_triad_tracks.size(), 2u) << "the two overlapping dispatches of tenant a share a lane";

  // SMs held by tenant a, from time 0: 8 (0-7), then 12 (0-11, the union), 8 (4-11), 4 (the fused one), 0.
  std::vector<int> held_by_a;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "C" && e.at("pid") == 1) held_by_a.push_back(e.at("args").at("sms").get<int>());
  }
  EXPECT_EQ(held_by_a, (std::vector<int>{8, 12, 8, 4, 0}));

  // One process per GPC of the device's topology, named with its SM count.
  std::set<int> gpc_ids(device.gpc_of_sm.begin(), device.gpc_of_sm.end());
  int gpc_processes = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name" &&
        e.at("args").at("name").get<std::string>().rfind("GPC ", 0) == 0) {
      ++gpc_processes;
    }
  }
  EXPECT_EQ(gpc_processes, static_cast<int>(gpc_ids.size()));
}

TEST(Trace, GpcTracksFollowTheDevicesTopology) {
  // A device whose SMs 0-3 form GPC 0 and the rest GPC 1: a dispatch on SMs 0-1 shows on GPC 0 only.
  DeviceSpec device = h200_spec();
  for (int sm = 0; sm < device.sm_count; ++sm) device.gpc_of_sm[static_cast<size_t>(sm)] = sm < 4 ? 0 : 1;
  RunRecord run = overlapping_run();
  run.dispatches.resize(1);
  run.dispatches[0].placement.sms = SmSet::range(0, 2);
  const json trace = json::parse(chrome_trace_json(run, device));
  std::map<int64_t, std::string> process;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") process[e.at("pid")] = e.at("args").at("name");
  }
  std::vector<std::string> gpcs_with_gemm;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name") == "a:gemm" && process[e.at("pid")].rfind("GPC", 0) == 0) {
      gpcs_with_gemm.push_back(process[e.at("pid")]);
      EXPECT_EQ(e.at("args").at("sms_in_gpc"), 2);
    }
  }
  EXPECT_EQ(gpcs_with_gemm, (std::vector<std::string>{"GPC 0 (4 SMs)"}));
}

// Every shipped example under plain streams and under an SM-set policy, on the simulator.
class ExampleTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleTrace, NoSlicesOverlapOnATrackAndEverySliceNamesItsTenant) {
  const std::vector<std::filesystem::path> examples = [] {
    std::vector<std::filesystem::path> v;
    for (const auto& e : std::filesystem::directory_iterator(CONCORD_EXAMPLES_DIR)) {
      if (e.path().extension() == ".yaml") v.push_back(e.path());
    }
    std::sort(v.begin(), v.end());
    return v;
  }();
  ASSERT_FALSE(examples.empty()) << "no examples in " << CONCORD_EXAMPLES_DIR;
  const DeviceSpec device = h200_spec();
  for (const auto& path : examples) {
    SCOPED_TRACE(path.string() + " under " + GetParam());
    auto workload = load_workload_file(path.string());
    ASSERT_TRUE(workload.is_ok()) << workload.status().to_string();
    ExperimentConfig config;
    config.backend = BackendConfig{"sim", device, 1};
    config.policy = GetParam();
    config.compare_serial = false;
    ReferenceCache cache;
    auto result = run_experiment(*workload, config, cache);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    const json trace = json::parse(chrome_trace_json(result->run, device));
    const auto tracks = tracks_of(trace);
    ASSERT_FALSE(tracks.empty());
    EXPECT_EQ(first_improper_overlap(tracks), "");
    EXPECT_TRUE(trace.at("otherData").at("status").at("complete").get<bool>());

    std::set<std::string> tenants, kernels;
    for (const auto& t : workload->tenants) {
      tenants.insert(t.name);
      for (const auto& s : t.steps) kernels.insert(s.kernel.name);
    }
    int kernel_slices = 0;
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") != "X") continue;
      const json& args = e.at("args");
      const std::string name = e.at("name");
      if (args.contains("kernel")) {
        ++kernel_slices;
        ASSERT_EQ(args.at("tenant").size(), args.at("kernel").size()) << name;
        for (size_t k = 0; k < args.at("kernel").size(); ++k) {
          const std::string tenant = args.at("tenant")[k], kernel = args.at("kernel")[k];
          EXPECT_TRUE(tenants.count(tenant)) << name;
          EXPECT_TRUE(kernels.count(kernel)) << name;
          EXPECT_NE(name.find(tenant + ":" + kernel), std::string::npos) << name;
        }
      } else {
        EXPECT_TRUE(tenants.count(args.at("tenant").get<std::string>())) << name;  // a request
      }
    }
    EXPECT_GT(kernel_slices, 0);

    std::set<int64_t> counters;
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") != "C") continue;
      const int sms = e.at("args").at("sms");
      EXPECT_GE(sms, 0);
      EXPECT_LE(sms, device.sm_count);
      counters.insert(e.at("pid").get<int64_t>());
    }
    EXPECT_EQ(counters.size(), workload->tenants.size()) << "an SMs-held counter per tenant";
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ExampleTrace, ::testing::Values("streams", "static-partition"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace concord
