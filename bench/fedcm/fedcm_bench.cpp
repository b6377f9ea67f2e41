// FEDCM's evaluation (FEDCM paper, Section IV-V) on the simulator or the GPU:
//   run   every workload under serial, streams, krisp, fedc and fedcm in one process (one run of
//         each, alone-times and the serial makespan shared), plus fedcm's sigma sweep; STP, ANTT,
//         end-to-end time and the policy's share of the run;
//   mps   the MPS peer: each tenant in its own process under the MPS daemon (started and stopped
//         here), with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100/N and without a limit; the processes
//         meet at a file barrier after their set-up, so their clocks start together;
//   peer  one such process (internal).
// bench/fedcm/summarize.py turns both JSON files into the tables of docs/results.md.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/cli_parse.h"
#include "concord/device.h"
#include "concord/spec_source.h"
#include "concord/experiment.h"
#include "concord/policy.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"

#include "backend/registration.h"
#include "runner/processes.h"

using namespace concord;
namespace fs = std::filesystem;

namespace {

int fail(const Status& s) {
  std::cerr << "fedcm_bench: " << s.to_string() << "\n";
  return 1;
}

Status write_json(const std::string& path, const nlohmann::json& j) { return write_file_atomically(path, j.dump(1) + "\n"); }

int cmd_run(const std::vector<std::string>& workloads, const std::vector<std::string>& schemes,
            const std::vector<double>& sigmas, const std::vector<double>& gammas, const std::string& backend, const std::string& device,
            const std::string& profiles, const std::string& out) {
  std::unique_ptr<ProfileStore> store;
  if (!profiles.empty()) {
    auto s = ProfileStore::open(profiles, /*read_only=*/true);
    if (!s) return fail(s.status());
    store = std::move(*s);
  }
  BackendConfig cfg;
  cfg.kind = backend;
  if (backend == "sim") {
    auto d = builtin_device(device);
    if (!d) return fail(d.status());
    cfg.device = *d;
  }
  nlohmann::json results{{"backend", backend}, {"complete", false}, {"runs", nlohmann::json::array()}};
  ReferenceCache cache;
  for (const std::string& path : workloads) {
    auto w = load_workload_file(path);
    if (!w) return fail(w.status());
    int attached = 0;
    if (store) {
      auto n = attach_profiles(*w, *store);
      if (!n) return fail(n.status());
      attached = *n;
    }
    struct Item {
      std::string scheme;
      PolicyParams params;
      double sigma;
    };
    std::vector<Item> items;
    for (const auto& s : schemes) {
      // "policy" or "policy:key=value;key=value" (a variant in the same run, e.g. fedcm:gamma=1.2).
      auto spec = parse_policy_spec(s);
      if (!spec) return fail(Status::invalid_argument("--schemes: " + spec.status().message()));
      Item it{s, spec->params, 0};
      const std::string policy = spec->name;
      it.sigma = policy == "fedcm" || policy == "fedc" ? 0.1 : 0;
      if (it.params.count("sigma")) it.sigma = std::strtod(it.params.at("sigma").c_str(), nullptr);  // the policy checks it
      items.push_back(it);
    }
    const size_t named = items.size();
    for (double sg : sigmas) items.push_back({"fedcm", {{"sigma", std::to_string(sg)}}, sg});
    for (double g : gammas) items.push_back({"fedcm", {{"gamma", std::to_string(g)}}, 0.1});
    for (size_t idx = 0; idx < items.size(); ++idx) {
      const Item& it = items[idx];
      const bool sweep = idx >= named;
      ExperimentConfig c;
      c.backend = cfg;
      c.policy = it.scheme.substr(0, it.scheme.find(':'));
      c.params = it.params;
      const auto t0 = std::chrono::steady_clock::now();
      auto r = run_experiment(*w, c, cache);
      if (!r) {
        // Keep what was measured: the runs so far and the failure go to the file, then exit non-zero.
        const Status failure(r.status().code(), path + " " + it.scheme + ": " + r.status().message());
        results["error"] = failure.to_string();
        if (Status s = write_json(out, results); !s) std::cerr << "fedcm_bench: " << s.to_string() << "\n";
        return fail(failure);
      }
      if (!results.contains("device")) {
        results["device"] = r->run.device;
        // The device as a backend of this configuration states it (a GPU: name, clocks, versions).
        auto probe = make_backend(cfg);
        if (!probe) return fail(probe.status());
        results.update(nlohmann::json::parse(provenance_json((*probe)->device(), (*probe)->name(), concord::build_version(), concord::build_commit())));
      }
      nlohmann::json tenants = nlohmann::json::array();
      for (size_t i = 0; i < r->run.tenants.size(); ++i) {
        nlohmann::json requests = nlohmann::json::array();
        for (const auto& q : r->run.tenants[i].requests) requests.push_back({q.start, q.end});
        tenants.push_back({{"name", r->run.tenants[i].name},
                           {"alone_s", r->alone[i]},
                           {"shared_s", r->run.tenants[i].elapsed()},
                           {"begin_s", r->run.tenants[i].begin},
                           {"np_window", r->metrics.tenants[i].np_window},
                           {"requests", requests}});
      }
      const auto& st = r->run.stats;
      results["runs"].push_back({{"workload", w->name},
                                 {"profiled_kernels", attached},
                                 {"tenants_n", w->tenants.size()},
                                 {"scheme", it.scheme},
                                 {"sweep", sweep},
                                 {"params", it.params},
                                 {"sigma", it.sigma},
                                 {"gamma", it.params.count("gamma") ? std::strtod(it.params.at("gamma").c_str(), nullptr) : 1.1},
                                 {"stp", r->metrics.np_sum},
                                 {"stp_window", r->metrics.stp_window},
                                 {"window_s", r->metrics.window},
                                 {"antt", r->metrics.antt},
                                 {"makespan_s", r->metrics.makespan},
                                 {"serial_makespan_s", r->metrics.serial_makespan.value_or(0)},
                                 {"speedup_over_serial", r->metrics.speedup_over_serial.value_or(0)},
                                 {"policy_s", st.policy_seconds},
                                 {"backend_s", st.backend_seconds},
                                 {"engine_s", st.engine_seconds},
                                 {"policy_calls", st.policy_calls},
                                 {"dispatches", st.dispatches},
                                 {"tenants", tenants}});
 std::cerr << w->name << " " << it.scheme << (sweep ? " sigma=" + std::to_string(it.sigma) : "") << ": STP "
                << r->metrics.np_sum << ", window STP " << r->metrics.stp_window << ", makespan " << r->metrics.makespan * 1e3 << " ms ("
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s)\n";
    }
    // After every workload: a bench stopped later (a time limit) keeps what it measured.
    if (Status s = write_json(out, results); !s) return fail(s);
  }
  results["complete"] = true;
  if (Status s = write_json(out, results); !s) return fail(s);
  return 0;
}

int cmd_peer(const std::string& workload, int index, const std::string& dir, int n, const std::string& out) {
  auto w = load_workload_file(workload);
  if (!w) return fail(w.status());
  if (index < 0 || index >= static_cast<int>(w->tenants.size())) return fail(Status::invalid_argument("peer: no tenant " + std::to_string(index)));
  Workload one = *w;
  one.tenants = {w->tenants[static_cast<size_t>(index)]};
  BackendConfig cfg;
  cfg.kind = "cuda";
  auto b = make_backend(cfg);
  if (!b) return fail(b.status());
  auto policy = builtin_policies().make("streams", {});
  if (!policy) return fail(policy.status());
  double start = 0;
  EngineOptions o;
  o.before_clock = [&]() -> Status {
    CONCORD_RETURN_IF_ERROR(wait_at_barrier(dir, index, n));
    start = wall_clock_seconds();
    return Status::ok();
  };
  auto rec = run_workload(one, **b, **policy, o);
  if (!rec) return fail(rec.status());
  const double end = wall_clock_seconds();
  const char* pct = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  nlohmann::json requests = nlohmann::json::array();  // [start, end] on this process's clock (0 = wall_start)
  for (const auto& q : rec->tenants[0].requests) requests.push_back({q.start, q.end});
  if (Status s = write_json(out, {{"tenant", rec->tenants[0].name},
                                   {"provenance", nlohmann::json::parse(provenance_json((*b)->device(), (*b)->name(),
                                                                                        concord::build_version(), concord::build_commit()))},
                                   {"begin_s", rec->tenants[0].begin},
                                   {"requests", requests},
                                   {"elapsed_s", rec->tenants[0].elapsed()},
                                   {"wall_start", start},
                                   {"wall_end", end},
                                   {"thread_percentage", pct ? pct : "none"}});
      !s) {
    return fail(s);
  }
  return 0;
}

int cmd_mps(const std::vector<std::string>& workloads, const std::string& work, bool start_daemon, const std::string& out) {
  auto self = this_executable();
  if (!self) return fail(self.status());
  fs::create_directories(work);
  std::unique_ptr<MpsDaemon> daemon;
  if (start_daemon) {
    auto d = MpsDaemon::start(work);
    if (!d) return fail(d.status());
    daemon = std::move(*d);
    std::cerr << "MPS daemon started (pipe " << daemon->pipe_dir() << ")\n";
  }
  nlohmann::json results{{"mode", "mps"}, {"complete", false}, {"runs", nlohmann::json::array()}};
  int rc = 0;
  for (const std::string& path : workloads) {
    auto w = load_workload_file(path);
    if (!w) {
      rc = fail(w.status());
      break;
    }
    const int n = static_cast<int>(w->tenants.size());
    for (const bool limited : {true, false}) {
      const std::string dir = work + "/" + w->name + (limited ? "-limited" : "-unlimited");
      fs::remove_all(dir);
      fs::create_directories(dir);
      std::vector<pid_t> pids;
      for (int i = 0; i < n; ++i) {
        std::map<std::string, std::string> set;
        if (limited) set["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(100 / n);
        auto pid = spawn_process({*self, "peer", "--workload", path, "--tenant", std::to_string(i), "--barrier", dir, "--n",
                                  std::to_string(n), "--out", dir + "/peer." + std::to_string(i) + ".json"},
                                 set, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"});
        if (!pid) return fail(pid.status());
        pids.push_back(*pid);
      }
      bool ok = true;
      for (bool peer_ok : wait_processes(pids)) ok = ok && peer_ok;
      nlohmann::json run{{"workload", w->name}, {"tenants_n", n}, {"scheme", limited ? "mps-limited" : "mps"},
                         {"thread_percentage", limited ? 100 / n : 100}, {"ok", ok}, {"tenants", nlohmann::json::array()}};
      double first = 1e300, last = 0;
      for (int i = 0; ok && i < n; ++i) {
        std::ifstream f(dir + "/peer." + std::to_string(i) + ".json");
        nlohmann::json p = nlohmann::json::parse(f, nullptr, false);
        if (p.is_discarded()) {
          ok = false;
          break;
        }
        // Build and device as the peers' backends stated them (the first peer's).
        if (!results.contains("device_info") && p.contains("provenance")) results.update(p["provenance"]);
        first = std::min(first, p["wall_start"].get<double>());
        last = std::max(last, p["wall_end"].get<double>());
        run["tenants"].push_back({{"name", p["tenant"]}, {"shared_s", p["elapsed_s"]}, {"wall_start", p["wall_start"]},
                                  {"begin_s", p.value("begin_s", 0.0)}, {"requests", p.value("requests", nlohmann::json::array())}});
      }
      run["ok"] = ok;
      if (ok) run["makespan_s"] = last - first;
      std::cerr << w->name << " " << run["scheme"].get<std::string>() << ": " << (ok ? "ok" : "FAILED")
                << (ok ? ", makespan " + std::to_string((last - first) * 1e3) + " ms" : "") << "\n";
      results["runs"].push_back(run);
      if (!ok) rc = 1;
    }
    // After every workload, so a bench stopped by a time limit keeps the peers it measured.
    if (Status s = write_json(out, results); !s) return fail(s);
  }
  results["complete"] = rc == 0;
  if (daemon) results["mps_control_log"] = daemon->quit();
  if (Status s = write_json(out, results); !s) return fail(s);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  register_builtin_backends();
  CLI::App app{"FEDCM evaluation: serial, streams, MPS, KRISP, FedC, FEDCM on N = 2, 3, 4 tenants"};
  app.require_subcommand(1);
  std::vector<std::string> workloads;
  std::string backend = "sim", device = "h200", out = "fedcm_bench.json", work = "/tmp/concord-mps";
  std::vector<std::string> schemes{"serial", "streams", "krisp", "fedc", "fedcm"};
  std::vector<double> sigmas{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
  CLI::App* run = app.add_subcommand("run", "Every scheme in one process, plus the sigma sweep");
  run->add_option("workloads", workloads, "Workload specs")->required();
  run->add_option("--backend", backend, "sim or cuda")->capture_default_str();
  run->add_option("--device", device, "Simulated device")->capture_default_str();
  run->add_option("--schemes", schemes, "Policies")->delimiter(',');
  std::vector<std::string> sigma_args;
  run->add_option("--sigmas", sigma_args, "fedcm sigma sweep (default 0.1,0.2,..,1; '' or none: no sweep)")->delimiter(',');
  std::vector<double> gammas;
  run->add_option("--gammas", gammas, "fedcm gamma sweep at sigma 0.1 (the bypass filter; default: none)")->delimiter(',');
  run->add_option("--out", out, "Results JSON")->capture_default_str();
  std::string profiles;
  run->add_option("--profiles", profiles, "Profile store: policies estimate from measured curves");
  bool start_daemon = true;
  CLI::App* mps = app.add_subcommand("mps", "Each tenant its own process under MPS (GPU only)");
  mps->add_option("workloads", workloads, "Workload specs")->required();
  mps->add_option("--work-dir", work, "Barrier files, MPS pipe and log")->capture_default_str();
  mps->add_flag("!--no-daemon", start_daemon, "Use an MPS daemon that is already running");
  mps->add_option("--out", out, "Results JSON")->capture_default_str();
  std::string peer_workload, peer_dir, peer_out;
  int peer_index = 0, peer_n = 1;
  CLI::App* peer = app.add_subcommand("peer", "Internal: one tenant's process");
  peer->group("");
  peer->add_option("--workload", peer_workload)->required();
  peer->add_option("--tenant", peer_index)->required();
  peer->add_option("--barrier", peer_dir)->required();
  peer->add_option("--n", peer_n)->required();
  peer->add_option("--out", peer_out)->required();
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);
  if (run->parsed() && !sigma_args.empty()) {
    sigmas.clear();
    for (const std::string& a : sigma_args) {
      if (a.empty() || a == "none") continue;
      char* end = nullptr;
      const double v = std::strtod(a.c_str(), &end);
      if (end == a.c_str() || *end != '\0') return fail(Status::invalid_argument("--sigmas: not a number: '" + a + "'"));
      sigmas.push_back(v);
    }
  }
  if (run->parsed()) return cmd_run(workloads, schemes, sigmas, gammas, backend, device, profiles, out);
  if (mps->parsed()) return cmd_mps(workloads, work, start_daemon, out);
  return cmd_peer(peer_workload, peer_index, peer_dir, peer_n, peer_out);
}
