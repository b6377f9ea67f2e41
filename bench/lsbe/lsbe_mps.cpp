// The MPS peer of the LC/BE bench: the LC tenant and each BE tenant in its own process (this
// program's `peer`), all MPS clients of one daemon, meeting at a file barrier so that their clocks
// start together (the system clock places their runs against each other). The LC process serves
// its Poisson requests at the rate of the `run` results it is given and then creates a stop file;
// each BE process runs closed loop until that file exists. BE gets no thread limit, 50%, and the
// share of the SMs the sgdrc scheme gave BE on average in the same `run` (or --be-share); with
// several BE tenants each process gets an equal part of the limit. The LC process has no limit.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/device.h"
#include "concord/policy.h"
#include "concord/report.h"
#include "concord/backend_factory.h"
#include "lsbe_bench.h"
#include "runner/processes.h"

namespace concord::lsbe {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kThreadPercentage = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
constexpr int kBarrierSeconds = 120;  // how long a peer waits for the others to be ready

Result<json> read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::not_found(path + ": cannot open");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded()) return Status::parse_error(path + ": not JSON");
  return j;
}

// A field of the `run` results, or an error naming the file and where the field is missing.
template <typename T>
Result<T> field(const json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return Status::parse_error(where + ": no field '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    return Status::parse_error(where + ": field '" + key + "': " + e.what());
  }
}

// One MPS variant: BE's thread percentage (0: no limit) and where it came from.
struct Variant {
  std::string scheme;
  int be_percentage = 0;
  std::string source;
};

// What the processes of one variant need and measure against, from the `run` results.
struct LoadPlan {
  const Mix* mix = nullptr;
  int lc_requests = 0;
  double rate = 0;
  Seconds target = 0;
  uint64_t seed = 1;
  std::vector<int> be_requests;
  Reference ref;
};

std::vector<std::pair<Seconds, Seconds>> pairs_shifted(const json& list, double by) {
  std::vector<std::pair<Seconds, Seconds>> out;
  for (const json& p : list) out.emplace_back(p.at(0).get<double>() + by, p.at(1).get<double>() + by);
  return out;
}

// Runs the peers of one variant and returns its figures (the peers' own files under "peers").
json run_variant(const std::string& self, const MpsOptions& opt, const LoadPlan& plan, const Variant& v,
                 const std::string& dir, json& provenance) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string stop = dir + "/lc-done";
  const Mix& mix = *plan.mix;
  const int n = 1 + static_cast<int>(mix.be_count());
  json run{{"scheme", v.scheme}, {"be_thread_percentage", v.be_percentage > 0 ? json(v.be_percentage) : json(nullptr)},
           {"be_share_source", v.source}, {"ok", false}};
  auto common = [&](const std::string& tenant, int requests, int index) {
    return std::vector<std::string>{self, "peer", "--mix", mix.file, "--tenant", tenant, "--requests", std::to_string(requests),
                                    "--seed", std::to_string(plan.seed), "--backend", opt.backend, "--time-limit",
                                    std::to_string(opt.time_limit), "--barrier", dir, "--index", std::to_string(index), "--n", std::to_string(n), "--stop-file", stop,
                                    "--out", dir + "/peer." + std::to_string(index) + ".json"};
  };
  std::vector<std::string> lc_args = common(mix.lc().name, plan.lc_requests, 0);
  for (const std::string& a : {std::string("--rate"), std::to_string(plan.rate), std::string("--target"), std::to_string(plan.target)}) {
    lc_args.push_back(a);
  }
  auto lc_pid = spawn_process(lc_args, {}, {kThreadPercentage});
  if (!lc_pid) {
    run["error"] = lc_pid.status().to_string();
    return run;
  }
  std::vector<pid_t> be_pids;
  // The BE tenants share the limit: each of their processes gets an equal part of it (MPS limits
  // each client's SMs, not which SMs; the parts together hold BE to the limit at most).
  std::map<std::string, std::string> be_env;
  const int per_process = v.be_percentage > 0 ? std::max(1, static_cast<int>(std::lround(
                                                                 static_cast<double>(v.be_percentage) / static_cast<double>(mix.be_count()))))
                                              : 0;
  if (per_process > 0) be_env[kThreadPercentage] = std::to_string(per_process);
  run["be_thread_percentage_per_process"] = per_process > 0 ? json(per_process) : json(nullptr);
  std::string spawn_error;
  for (size_t i = 0; i < mix.be_count(); ++i) {
    auto pid = spawn_process(common(mix.be(i).name, plan.be_requests[i], static_cast<int>(i + 1)), be_env, {kThreadPercentage});
    if (!pid) {
      spawn_error = pid.status().to_string();
      break;
    }
    be_pids.push_back(*pid);
  }
  const bool lc_ok = wait_processes({*lc_pid}).front();
  // A failed LC process may not have created the stop file: the BE processes must not run on.
  if (!fs::exists(stop)) std::ofstream(stop) << "stopped by the bench: the LC process ended without it\n";
  bool ok = lc_ok && spawn_error.empty();
  for (bool b : wait_processes(be_pids)) ok = ok && b;
  if (!spawn_error.empty()) run["error"] = spawn_error;
  run["peers"] = json::array();
  for (int i = 0; i < n; ++i) {
    auto p = read_json(dir + "/peer." + std::to_string(i) + ".json");
    if (!p) {
      ok = false;
      run["peers"].push_back({{"error", p.status().to_string()}});
      continue;
    }
    if (provenance.is_null() && p->contains("provenance")) provenance = (*p)["provenance"];
    p->erase("provenance");
    if (p->value("status", "") != "ok" && !run.contains("error")) {
      run["error"] = "peer '" + p->value("tenant", "?") + "': " + p->value("status", "no status");
    }
    run["peers"].push_back(*p);
  }
  if (!ok) {
    if (!run.contains("error")) run["error"] = "a peer failed (its log is on stderr; its file under " + dir + ")";
    return run;
  }
  // Everything on the system clock: each peer's times plus its wall_start.
  const json& lc = run["peers"][0];
  const double lc_wall = lc.at("wall_start").get<double>();
  std::vector<RequestRecord> requests;
  for (const json& r : lc.at("requests")) requests.push_back({r.at(0).get<double>(), r.at(1).get<double>(), r.at(2).get<double>()});
  const Window lc_window = request_window(requests);
  const Window wall{lc_window.begin + lc_wall, lc_window.end + lc_wall};
  std::vector<BeWork> be;
  for (size_t i = 0; i < mix.be_count(); ++i) {
    const json& p = run["peers"][i + 1];
    const double at = p.at("wall_start").get<double>();
    be.push_back({mix.be(i).name, kernels_in_window(pairs_shifted(p.at("launches"), at), wall),
                  p.at("finish_s").get<double>() + at < wall.end});
  }
  run.update(shared_figures(lc_figures(requests, plan.target, lc_window), wall, be, plan.ref));
  run["ok"] = true;
  return run;
}

Result<Reference> reference_of(const json& mj, const std::string& where) {
  Reference ref;
  auto lc = field<json>(mj, "lc_alone", where);
  if (!lc) return lc.status();
  auto cap = field<double>(*lc, "capacity_rps", where + ".lc_alone");
  auto p99 = field<double>(*lc, "p99_s", where + ".lc_alone");
  if (!cap) return cap.status();
  if (!p99) return p99.status();
  ref.lc_capacity_rps = *cap;
  ref.lc_alone_p99 = *p99;
  auto be = field<json>(mj, "be_alone", where);
  if (!be) return be.status();
  for (const json& b : *be) {
    auto k = field<double>(b, "kernels_per_s", where + ".be_alone");
    if (!k) return k.status();
    ref.be_kernels_per_s.push_back(*k);
  }
  return ref;
}

// sgdrc's mean BE SM share in this load's runs, if it ran there.
std::optional<double> sgdrc_share(const json& lj) {
  for (const json& r : lj.value("runs", json::array())) {
    if (r.value("policy", "") == "sgdrc" && r.value("ok", false) && r.contains("be_sm_share_mean")) {
      return r["be_sm_share_mean"].get<double>();
    }
  }
  return std::nullopt;
}

}  // namespace

int cmd_mps(const MpsOptions& opt) {
  if (opt.be_share != 0 && !(opt.be_share > 0 && opt.be_share <= 1)) {
    return fail(Status::invalid_argument("--be-share: " + std::to_string(opt.be_share) + " is not in (0, 1]"));
  }
  if (opt.backend != "cuda" && opt.backend != "sim") return fail(Status::invalid_argument("--backend: '" + opt.backend + "' is not cuda or sim"));
  if (!(opt.time_limit > 0)) return fail(Status::invalid_argument("--time-limit must be > 0"));
  auto from = read_json(opt.from);
  if (!from) return fail(from.status());
  if (from->value("bench", "") != "lsbe") return fail(Status::invalid_argument(opt.from + ": not results of concord_lsbe_bench run"));
  auto self = this_executable();
  if (!self) return fail(self.status());
  // Every mix read before any process starts.
  std::vector<Mix> mixes;
  const json mixes_json = from->value("mixes", json::array());
  for (const json& mj : mixes_json) {
    auto file = field<std::string>(mj, "file", opt.from);
    if (!file) return fail(file.status());
    auto m = load_mix(*file);
    if (!m) return fail(m.status());
    mixes.push_back(std::move(*m));
  }
  std::error_code ec;
  fs::create_directories(opt.work_dir, ec);
  if (ec) return fail(Status::io_error("--work-dir " + opt.work_dir + ": " + ec.message()));
  std::unique_ptr<MpsDaemon> daemon;
  if (opt.backend == "cuda" && opt.start_daemon) {
    auto d = MpsDaemon::start(opt.work_dir);
    if (!d) return fail(d.status());
    daemon = std::move(*d);
    std::cerr << "MPS daemon started (pipe " << daemon->pipe_dir() << ")\n";
  }
  json results{{"bench", "lsbe-mps"}, {"from", opt.from}, {"backend", opt.backend}, {"complete", false},
               {"time_limit_s", opt.time_limit}, {"mixes", json::array()}};
  json provenance;
  int rc = 0;
  auto save = [&]() {
    if (provenance.is_object()) results.update(provenance);
    if (Status s = write_file_atomically(opt.out, results.dump(1) + "\n"); !s) rc = fail(s);
  };
  const uint64_t seed = (*from)["config"].value("seed", uint64_t{1});
  for (size_t m = 0; m < mixes.size(); ++m) {
    const json& mj = mixes_json[m];
    const std::string where = opt.from + ": mix " + mixes[m].workload.name;
    json out_mix{{"mix", mixes[m].workload.name}, {"loads", json::array()}};
    if (mj.contains("error")) {
      out_mix["skipped"] = "the run of this mix failed";
      results["mixes"].push_back(out_mix);
      continue;
    }
    auto ref = reference_of(mj, where);
    if (!ref) return fail(ref.status());
    auto lc_requests = field<int>(mj, "lc_requests", where);
    if (!lc_requests) return fail(lc_requests.status());
    std::vector<int> be_requests;
    for (const json& b : mj["be_alone"]) be_requests.push_back(be_request_ceiling(b.value("requests_per_s", 0.0), opt.time_limit));
    for (const json& lj : mj.value("loads", json::array())) {
      const double load = lj.value("load", 0.0);
      if (!opt.loads.empty() &&
          std::none_of(opt.loads.begin(), opt.loads.end(), [&](double l) { return std::abs(l - load) < 1e-9; })) {
        continue;
      }
      // The isolated p99 at this load (the LC alone at the same rate), as `run` measured it.
      Reference at_load = *ref;
      at_load.lc_alone_p99 = lj.value("lc_alone_p99_s", ref->lc_alone_p99);
      LoadPlan plan{&mixes[m], *lc_requests, lj.value("rate_rps", 0.0), lj.value("target_s", 0.0), seed, be_requests, at_load};
      json out_load{{"load", load}, {"rate_rps", plan.rate}, {"target_s", plan.target}, {"runs", json::array()}};
      std::vector<Variant> variants{{"mps", 0, "none"}, {"mps-be50", 50, "fixed"}};
      const std::optional<double> sgdrc = sgdrc_share(lj);
      if (opt.be_share > 0 || sgdrc) {
        const double share = opt.be_share > 0 ? opt.be_share : *sgdrc;
        const int pct = std::clamp(static_cast<int>(std::lround(share * 100)), 1, 100);
        variants.push_back({"mps-be-share", pct, opt.be_share > 0 ? "--be-share" : "sgdrc be_sm_share_mean"});
      } else {
        out_load["skipped"] = "mps-be-share: no sgdrc result at this load and no --be-share";
      }
      for (const Variant& v : variants) {
        std::ostringstream tag;
        tag << mixes[m].workload.name << "-" << load << "-" << v.scheme;
        json run = run_variant(*self, opt, plan, v, opt.work_dir + "/" + tag.str(), provenance);
        if (!run["ok"].get<bool>()) rc = 1;
        std::cerr << tag.str() << ": " << (run["ok"].get<bool>() ? "SLO " + std::to_string(run["lc"]["slo_attainment"].get<double>()) +
                                                                       ", BE " + std::to_string(run["be_norm"].get<double>())
                                                                 : "FAILED: " + run.value("error", std::string()))
                  << "\n";
        out_load["runs"].push_back(run);
      }
      out_mix["loads"].push_back(out_load);
    }
    results["mixes"].push_back(out_mix);
    save();  // after every mix, so a bench stopped by a time limit keeps what it measured
  }
  results["complete"] = rc == 0;
  if (daemon) results["mps_control_log"] = daemon->quit();
  save();
  return rc;
}

int cmd_peer(const PeerOptions& opt) {
  // The LC process creates the stop file however it ends, so the BE processes never run on.
  struct StopFile {
    std::string path;
    bool owner = false;
    ~StopFile() {
      if (owner) std::ofstream(path) << "LC done\n";
    }
  } stop{opt.stop_file, false};
  auto mix = load_mix(opt.mix);
  if (!mix) return fail(mix.status());
  Workload w;
  if (mix->lc().name == opt.tenant) {
    stop.owner = true;
    w = lc_poisson(*mix, opt.requests, opt.rate, opt.target);
  } else {
    bool found = false;
    for (size_t i = 0; i < mix->be_count(); ++i) {
      if (mix->be(i).name == opt.tenant) {
        w = be_alone(*mix, i, opt.requests);
        found = true;
      }
    }
    if (!found) return fail(Status::not_found(opt.mix + ": no tenant '" + opt.tenant + "'"));
  }
  BackendConfig cfg;
  cfg.kind = opt.backend;
  if (opt.backend == "sim") {
    auto d = builtin_device("h100");
    if (!d) return fail(d.status());
    cfg.device = *d;
  }
  auto b = make_backend(cfg);
  if (!b) return fail(b.status());
  auto policy = builtin_policies().make("streams", {});
  if (!policy) return fail(policy.status());
  SpecSourceOptions source;
  source.seed = opt.seed;
  const std::string stop_file = opt.stop_file;
  BeWhileLc src(w, source, stop.owner ? BeWhileLc::StopBe() : [stop_file](TenantId) { return fs::exists(stop_file); });
  double wall_start = 0;
  EngineOptions o;
  o.seed = opt.seed;
  o.time_limit = opt.time_limit;
  o.before_clock = [&]() -> Status {
    // In steps of a second, so that a BE process gives up at once when the LC process ended
    // (failed) before the start: the bench then creates the stop file.
    for (int waited = 0;; ++waited) {
      const Status s = wait_at_barrier(opt.barrier, opt.index, opt.n, 1.0);
      if (s) break;
      if (!stop.owner && fs::exists(opt.stop_file)) return Status::cancelled("the LC process ended before the peers started");
      if (waited >= kBarrierSeconds) return s;
    }
    wall_start = wall_clock_seconds();
    return Status::ok();
  };
  RunOutcome r = run_engine_outcome(src, **b, **policy, o);
  const char* pct = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  const TenantRecord* t = r.record.tenants.empty() ? nullptr : &r.record.tenants.front();
  json requests = json::array(), launches = json::array();
  if (t) {
    for (const RequestRecord& q : t->requests) requests.push_back({q.arrival, q.start, q.end});
  }
  for (const LaunchRecord& l : r.record.launches) launches.push_back({l.start, l.end});
  json out{{"tenant", opt.tenant},
           {"role", stop.owner ? "LC" : "BE"},
           {"provenance", json::parse(provenance_json((*b)->device(), (*b)->name(), concord::build_version(), concord::build_commit()))},
           {"status", r.status.is_ok() ? "ok" : r.status.to_string()},
           {"wall_start", wall_start},
           {"begin_s", t ? t->begin : 0},
           {"finish_s", t ? t->finish : 0},
           {"requests", requests},
           {"launches", launches},
           {"stopped_by_lc", src.be_stopped()},
           {"thread_percentage", pct ? pct : "none"}};
  if (Status s = write_file_atomically(opt.out, out.dump() + "\n"); !s) return fail(s);
  if (!r.status) return fail(r.status);
  return 0;
}

}  // namespace concord::lsbe
