// RAISE's evaluation (RAISE paper, Section VI): task counts 12..120 (each of the twelve task types 1..10
// times, in a seeded random order), policies raise, sq, rr, rd on N_str task streams, several
// seeds; then, on 36 tasks, every policy at one fixed variant (the order's effect alone) and the
// sensitivity to alpha, beta, N_str and fixed dimensions. Runs on the
// simulator or the GPU (--backend cuda) and writes every run's makespan to a JSON file that
// bench/raise/summarize.py turns into tables.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/cli_parse.h"
#include "concord/device.h"
#include "concord/spec_source.h"
#include "concord/estimator.h"
#include "concord/policy.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"
#include "policy/raise/raise_policy.h"
#include "mechanism/task_streams.h"

#include "backend/registration.h"

using namespace concord;

namespace {

// `per_type` copies of every template tenant, in an order shuffled by `seed`.
Workload compose(const Workload& templates, int per_type, uint64_t seed) {
  Workload w;
  w.name = templates.name + "-" + std::to_string(per_type * static_cast<int>(templates.tenants.size()));
  w.source = templates.source;
  for (const TenantSpec& t : templates.tenants) {
    for (int i = 0; i < per_type; ++i) {
      TenantSpec c = t;
      c.name = t.name + "#" + std::to_string(i);
      w.tenants.push_back(std::move(c));
    }
  }
  std::mt19937_64 rng(seed);
  std::shuffle(w.tenants.begin(), w.tenants.end(), rng);
  return w;
}

struct Run {
  std::string group;   // main, order, alpha, beta, streams, dims, tie
  std::string policy;
  PolicyParams params;
  int tasks = 0;
  uint64_t seed = 0;
};

// A run this many times the median makespan of the runs before it with the same group, policy,
// parameters and task count is an outlier: its dispatches go to a file of their own.
constexpr double kOutlierFactor = 2.0;
constexpr size_t kOutlierMinRuns = 3;  // runs needed before a median is trusted

// Every dispatch of an outlier run, with the host's and the GPU's times, so a stall can be placed:
// dispatched -> start (waiting for the GPU), start -> end (running), end -> seen (the host noticing).
nlohmann::json dispatch_record(const RunRecord& rec) {
  nlohmann::json ds = nlohmann::json::array();
  for (const DispatchRecord& d : rec.dispatches) {
    const LaunchRecord& l = rec.launches.at(static_cast<size_t>(d.launches.front().value));
    ds.push_back({{"tenant", rec.tenants.at(static_cast<size_t>(l.tenant.value)).name}, {"kernel", l.kernel},
                  {"variant", d.placement.variant}, {"launches", d.launches.size()}, {"dispatched_s", d.dispatched},
                  {"start_s", d.start}, {"end_s", d.end}, {"seen_s", d.seen},
                  {"after", d.after.valid() ? nlohmann::json(d.after.value) : nlohmann::json(nullptr)}});
  }
  return ds;
}

}  // namespace

int main(int argc, char** argv) {
  register_builtin_backends();
  CLI::App app{"RAISE evaluation: raise vs sq, rr, rd over task counts, plus sensitivity"};
  std::string backend = "sim", device = "h200", tasks_path = "bench/raise/tasks.yaml", profiles, out = "raise_bench.json";
  std::vector<int> counts{12, 24, 36, 48, 60, 72, 84, 96, 108, 120};
  std::vector<std::string> policies{"raise", "sq", "rr", "rd"};
  int seeds = 10, sens_tasks = 36, sens_seeds = 3;
  bool sensitivity = true;
  double max_minutes = 0;
  app.add_option("--backend", backend, "sim or cuda")->capture_default_str();
  app.add_option("--device", device, "Simulated device (sim)")->capture_default_str();
  app.add_option("--tasks", tasks_path, "Task templates (one tenant per task type)")->capture_default_str();
  app.add_option("--profiles", profiles, "Profile store with RAISE metrics (concord profile raise)");
  app.add_option("--counts", counts, "Task counts (multiples of the template count)")->delimiter(',');
  app.add_option("--policies", policies, "Policies of the main comparison (name or name:key=value;key=value)")->delimiter(',');
  app.add_option("--seeds", seeds, "Seeds per task count")->capture_default_str();
  app.add_option("--sens-tasks", sens_tasks, "Task count of the sensitivity runs")->capture_default_str();
  app.add_option("--sens-seeds", sens_seeds, "Seeds per sensitivity setting")->capture_default_str();
  app.add_flag("!--no-sensitivity", sensitivity, "Skip the sensitivity runs");
  app.add_option("--max-minutes", max_minutes, "Stop starting runs after this long (results so far are written)");
  app.add_option("--out", out, "Results JSON")->capture_default_str();
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);

  auto fail = [](const Status& s) {
    std::cerr << "raise_bench: " << s.to_string() << "\n";
    return 1;
  };
  auto templates = load_workload_file(tasks_path);
  if (!templates) return fail(templates.status());
  const int types = static_cast<int>(templates->tenants.size());
  int attached = 0;
  if (!profiles.empty()) {
    auto store = ProfileStore::open(profiles, /*read_only=*/true);
    if (!store) return fail(store.status());
    auto n = attach_profiles(*templates, **store);
    if (!n) return fail(n.status());
    attached = *n;
  }
  BackendConfig cfg;
  cfg.kind = backend;
  if (backend == "sim") {
    auto d = builtin_device(device);
    if (!d) return fail(d.status());
    cfg.device = *d;
  }

  for (const std::string& p : policies) {  // a bad spec fails before any run, not after minutes on the GPU
    auto spec = parse_policy_spec(p);
    if (!spec) return fail(Status::invalid_argument("--policies: " + spec.status().message()));
    auto made = builtin_policies().make(spec->name, spec->params);
    if (!made) return fail(Status(made.status().code(), "--policies: '" + p + "': " + made.status().message()));
  }
  std::vector<Run> plan;
  for (int n : counts) {
    if (n % types != 0) return fail(Status::invalid_argument("--counts: " + std::to_string(n) + " is not a multiple of " + std::to_string(types)));
    for (int s = 0; s < seeds; ++s) {
      for (const std::string& p : policies) plan.push_back({"main", p, {}, n, static_cast<uint64_t>(s + 1)});
    }
  }
  if (sensitivity) {
    // The order's effect apart from the dimensions': every policy with one fixed variant.
    for (int s = 0; s < sens_seeds; ++s) {
      for (const char* d : {"mid", "max"}) {
        for (const std::string& p : policies) plan.push_back({"order", p, {{"dims", d}}, sens_tasks, static_cast<uint64_t>(s + 1)});
      }
    }
    for (int s = 0; s < sens_seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s + 1);
      for (int v = 0; v <= 9; ++v) {
        plan.push_back({"alpha", "raise", {{"alpha", std::to_string(v)}}, sens_tasks, seed});
        plan.push_back({"beta", "raise", {{"beta", std::to_string(v)}}, sens_tasks, seed});
      }
      // The paper's own rule for its 3 (VI-A): a little above the tasks' mean IPC / DU.
      plan.push_back({"alpha", "raise", {{"alpha", "auto"}}, sens_tasks, seed});
      plan.push_back({"beta", "raise", {{"beta", "auto"}}, sens_tasks, seed});
      for (int k = 1; k <= 8; ++k) {
        plan.push_back({"streams", "raise", {{"streams", std::to_string(k)}}, sens_tasks, seed});
        plan.push_back({"streams", "rd", {{"streams", std::to_string(k)}}, sens_tasks, seed});
      }
      for (const char* d : {"min", "mid", "max", "dynamic"}) plan.push_back({"dims", "raise", {{"dims", d}}, sens_tasks, seed});
      for (const char* t : {"0", "0.05", "0.1", "0.2"}) plan.push_back({"tie", "raise", {{"tie", t}}, sens_tasks, seed});
    }
  }

  nlohmann::json results;
  results["backend"] = backend;
  results["tasks"] = tasks_path;
  results["task_types"] = types;
  results["profiled_task_types"] = attached;
  results["runs"] = nlohmann::json::array();
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  Status failure = Status::ok();
  std::map<std::string, std::vector<double>> seen_makespans;  // per group|policy|params|tasks
  int outliers = 0;
  for (const Run& r : plan) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (max_minutes > 0 && elapsed > max_minutes * 60) {
      std::cerr << "time budget reached after " << done << " of " << plan.size() << " runs\n";
      results["stopped_early"] = true;
      break;
    }
    const Workload w = compose(*templates, r.tasks / types, r.seed);
    auto b = make_backend(cfg);
    if (!b) return fail(b.status());
    if (!results.contains("device")) {
      results["device"] = (*b)->device().name;
      results.update(nlohmann::json::parse(provenance_json((*b)->device(), (*b)->name(), concord::build_version(), concord::build_commit())));
      // Each task type's RAISE class as the policies read it (`stated`: the tasks file's raise_type).
      const Estimator estimator((*b)->device());
      nlohmann::json classes = nlohmann::json::object();
      for (const TenantSpec& t : templates->tenants) {
        const auto label = t.labels.find("raise_type");
        const std::optional<RaiseClass> stated =
            label == t.labels.end() ? std::nullopt : raise_class_from_string(label->second);
        classes[t.name] = {{"class", to_string(policy::task_info(spec_hints(t).request, stated, estimator).cls)}, {"stated", stated.has_value()}};
      }
      results["task_classes"] = classes;
    }
    // r.policy is a spec ("raise" or "raise:tie=0"); the run's own params (dims, alpha, ...) win.
    auto spec = parse_policy_spec(r.policy);
    if (!spec) return fail(Status::invalid_argument("--policies: " + spec.status().message()));
    PolicyParams params = spec->params;
    for (const auto& [k, v] : r.params) params[k] = v;
    auto policy = builtin_policies().make(spec->name, params);
    if (!policy) return fail(policy.status());
    EngineOptions opts;
    opts.seed = r.seed;
    auto rec = run_workload(w, **b, **policy, opts);
    if (!rec) {
      // Keep what was measured: the runs so far and the failure go to the file, then exit non-zero.
      failure = Status(rec.status().code(), r.group + " " + r.policy + " " + std::to_string(r.tasks) + " tasks seed " +
                                                std::to_string(r.seed) + ": " + rec.status().message());
      results["error"] = failure.to_string();
      break;
    }
    nlohmann::json j{{"group", r.group}, {"policy", r.policy}, {"params", r.params}, {"tasks", r.tasks}, {"seed", r.seed},
                     {"makespan_s", rec->makespan}, {"policy_s", rec->stats.policy_seconds}};
    if (const auto* raise = dynamic_cast<const policy::RaisePolicy*>(policy->get())) {
      j["alpha"] = raise->alpha();  // the thresholds it ran with (`auto`: from these tasks)
      j["beta"] = raise->beta();
    }
    // An outlier keeps its dispatches, in a file beside `out` (the results JSON names it).
    const std::string key = r.group + "|" + r.policy + "|" + nlohmann::json(r.params).dump() + "|" + std::to_string(r.tasks);
    std::vector<double>& before = seen_makespans[key];
    if (before.size() >= kOutlierMinRuns) {
      std::vector<double> sorted = before;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
      const double median = sorted[sorted.size() / 2];
      if (rec->makespan > kOutlierFactor * median) {
        const std::string file = out + ".outlier-" + std::to_string(++outliers) + ".json";
        std::ofstream(file) << nlohmann::json{{"run", j}, {"median_makespan_s", median}, {"dispatches", dispatch_record(*rec)}}.dump(1) << "\n";
        j["outlier_file"] = file;
        std::cerr << "outlier: " << key << " seed " << r.seed << ": " << rec->makespan * 1e3 << " ms against a median of "
                  << median * 1e3 << " ms; dispatches in " << file << "\n";
      }
    }
    before.push_back(rec->makespan);
    results["runs"].push_back(j);
    ++done;
    if (done % 20 == 0 || done == static_cast<int>(plan.size())) {
      std::cerr << done << "/" << plan.size() << " runs, " << static_cast<int>(elapsed) << " s\n";
    }
  }
  results["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream f(out);
  f << results.dump(1) << "\n";
  if (!f) return fail(Status::io_error(out + ": cannot write"));
  std::cerr << "wrote " << out << "\n";
  if (!failure) return fail(failure);
  return 0;
}
