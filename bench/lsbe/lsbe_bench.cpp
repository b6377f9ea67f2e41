// The LC/BE bench (docs/running.md, "The LC/BE bench"): mixes of one latency-critical tenant
// (inference-like request chains) and best-effort tenants (HPC, training-like; closed loop), on
// the simulator or the GPU:
//   run   per mix: the LC alone in a closed loop (its capacity in requests per second and its
//         isolated p99), each BE tenant alone (kernels per second); then per load (a share of the
//         LC's capacity, Poisson arrivals, one seed for every run) the LC alone at that rate and
//         every scheme with the BE tenants running while the LC has requests; SLO attainment
//         (target: a multiple of the isolated p99), LC p99 over the isolated p99, BE throughput
//         over BE alone, overall throughput, and the SMs the BE tenants held on average;
//   mps   the MPS peer (GPU): the LC tenant and each BE tenant in its own process under the MPS
//         daemon (started and stopped here) at the rates and targets of a `run` results file, BE
//         without a thread limit, at 50%, and at the share the sgdrc scheme gave BE in that run;
//   peer  one such process (internal).
// bench/lsbe/summarize.py makes the tables from both JSON files.
#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/registration.h"
#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/cli_parse.h"
#include "concord/device.h"
#include "concord/policy.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "concord/backend_factory.h"
#include "lsbe_bench.h"
#include "lsbe_runner.h"
#include "mix_bench.h"
#include "runner/processes.h"

using namespace concord;
using namespace concord::lsbe;

namespace {

struct RunOptions {
  std::vector<std::string> mixes;
  std::vector<std::string> schemes{"sgdrc", "orion", "priority-streams", "streams", "static-partition", "serial"};
  std::vector<double> loads{0.3, 0.5, 0.7};
  double target_factor = 1.5;
  int lc_requests = 0;  // 0: the mix's own
  int be_alone_requests = 30;
  // Each alone run (the LC closed loop, each BE tenant, the LC at each load) is repeated this many
  // times and its median taken: on the H100 a single alone run was once 2.7x slower than the
  // others (a BE reference that made MPS's BE look twice as fast as alone), and the LC's p99 alone
  // moved by up to 5.9x between runs.
  int alone_repeats = 3;
  uint64_t seed = 1;
  std::string backend = "sim";
  std::string device = "h100";
  std::string profiles;
  Seconds time_limit = 120;
  std::string out = "lsbe.json";
  bool skip_unknown = false;  // leave out schemes no policy is registered for (named in the results)
};

int cmd_run(const RunOptions& opt) {
  // Every input checked before the first run: a bad one fails at once, not after minutes on the GPU.
  if (opt.mixes.empty()) return fail(Status::invalid_argument("run: no mix given"));
  if (opt.loads.empty()) return fail(Status::invalid_argument("--loads: no load given"));
  for (double l : opt.loads) {
    if (!(l > 0 && l <= 1)) return fail(Status::invalid_argument("--loads: " + std::to_string(l) + " is not in (0, 1]"));
  }
  if (!(opt.target_factor > 0)) return fail(Status::invalid_argument("--target-factor must be > 0"));
  if (opt.lc_requests < 0) return fail(Status::invalid_argument("--lc-requests must be >= 0 (0: the mix's own)"));
  if (opt.be_alone_requests < 1) return fail(Status::invalid_argument("--be-alone-requests must be >= 1"));
  if (opt.alone_repeats < 1) return fail(Status::invalid_argument("--alone-repeats must be >= 1"));
  if (!(opt.time_limit > 0)) return fail(Status::invalid_argument("--time-limit must be > 0"));
  auto parsed = parse_schemes(opt.schemes, opt.skip_unknown, "lsbe_bench");
  if (!parsed) return fail(parsed.status());
  const std::vector<Scheme>& schemes = parsed->run;
  const std::vector<std::string>& skipped = parsed->skipped;
  std::vector<Mix> mixes;
  for (const std::string& path : opt.mixes) {
    auto m = load_mix(path);
    if (!m) return fail(m.status());
    mixes.push_back(std::move(*m));
  }
  std::unique_ptr<ProfileStore> store;
  if (!opt.profiles.empty()) {
    auto s = ProfileStore::open(opt.profiles, /*read_only=*/true);
    if (!s) return fail(s.status());
    store = std::move(*s);
  }
  auto config = backend_config(opt.backend, opt.device);
  if (!config) return fail(config.status());
  const BackendConfig& cfg = *config;
  auto probe = make_backend(cfg);
  if (!probe) return fail(probe.status());
  const DeviceSpec device = (*probe)->device();
  nlohmann::json results = nlohmann::json::parse(provenance_json(device, (*probe)->name(), concord::build_version(), concord::build_commit()));
  probe->reset();
  results["bench"] = "lsbe";
  results["backend"] = opt.backend;
  results["device"] = device.name;
  results["config"] = {{"schemes", opt.schemes},         {"loads", opt.loads},     {"target_factor", opt.target_factor},
                       {"lc_requests", opt.lc_requests}, {"be_alone_requests", opt.be_alone_requests}, {"alone_repeats", opt.alone_repeats},
                       {"seed", opt.seed},               {"time_limit_s", opt.time_limit}, {"profiles", opt.profiles},
                       {"skipped_schemes", skipped}};
  results["mixes"] = nlohmann::json::array();

  int rc = 0;
  lsbe::ResultsFile file(opt.out, results, rc, fail);
  for (Mix& mix : mixes) {
    int profiled = 0;
    if (store) {
      auto n = attach_profiles(mix.workload, *store);
      if (!n) return fail(n.status());
      profiled = *n;
    }
    const int n = opt.lc_requests > 0 ? opt.lc_requests : mix.lc().requests;
    nlohmann::json mj = lsbe::ResultsFile::mix_json(mix, n, profiled);
    auto failed = [&](const std::string& what, const Status& s) { return file.fail_mix(mj, mix, what, s); };

    // The LC alone in a closed loop: its capacity and its isolated latency (the repetition with
    // the median capacity; every repetition's figures are kept).
    Reference ref;
    {
      auto alone = lc_alone_closed(mix, n, cfg, opt.seed, opt.time_limit, opt.alone_repeats);
      if (!alone) return failed("LC alone (closed loop)", alone.status());
      ref.lc_capacity_rps = alone->capacity_rps;
      ref.lc_alone_p99 = alone->figures.p99;
      mj["lc_alone"] = alone->json;
      std::cerr << mix.workload.name << ": LC alone " << ref.lc_capacity_rps << " requests/s, p99 " << ref.lc_alone_p99 * 1e3
                << " ms (median of " << opt.alone_repeats << ")\n";
    }
    // Each BE tenant alone in a closed loop.
    auto be_refs = be_alone_all(mix, opt.be_alone_requests, cfg, opt.seed, opt.time_limit, opt.alone_repeats);
    if (!be_refs) return failed("BE alone", be_refs.status());
    mj["be_alone"] = be_refs->json;
    ref.be_kernels_per_s = be_refs->kernels_per_s;
    const std::vector<int>& ceilings = be_refs->ceilings;

    mj["loads"] = nlohmann::json::array();
    for (double load : opt.loads) {
      const double rate = load * ref.lc_capacity_rps;
      const std::string at = "load " + std::to_string(load);
      // The LC alone at this rate, with the same arrivals: what queueing alone costs it (no scheme
      // does better). Its p99 is the isolated p99 at this load: the target is a multiple of it,
      // and each scheme's p99 is reported over it (the closed-loop p99 above is a request's
      // service time without queueing, which a Poisson stream of one tenant cannot keep).
      Reference at_load = ref;
      Seconds target = 0;
      nlohmann::json lj_alone;
      {
        // The repetition with the median p99 sets the target; every repetition's p99 is kept.
        std::vector<nlohmann::json> reps;
        std::vector<double> p99s;
        for (int k = 0; k < opt.alone_repeats; ++k) {
          auto alone = lc_alone_at(mix, n, rate, cfg, opt.seed, opt.time_limit);
          if (!alone) return failed(at + " LC alone (Poisson)", alone.status());
          const TenantRecord& t = alone->tenants.front();
          const Window w = request_window(t.requests);
          Reference rep_ref = ref;
          rep_ref.lc_alone_p99 = lc_figures(t.requests, std::numeric_limits<double>::infinity(), w).p99;
          nlohmann::json j = shared_figures(lc_figures(t.requests, opt.target_factor * rep_ref.lc_alone_p99, w), w, {}, rep_ref);
          j["engine"] = engine_json(*alone);
          j["p99_s"] = rep_ref.lc_alone_p99;
          p99s.push_back(rep_ref.lc_alone_p99);
          reps.push_back(std::move(j));
        }
        auto median = median_by(reps, "p99_s");
        if (!median) return failed(at + " LC alone (Poisson)", median.status());
        lj_alone = *median;
        at_load.lc_alone_p99 = lj_alone["p99_s"].get<double>();
        target = opt.target_factor * at_load.lc_alone_p99;
        lj_alone.erase("p99_s");
        lj_alone["repetitions_p99_s"] = p99s;
      }
      nlohmann::json lj{{"load", load},           {"rate_rps", rate},
                        {"target_s", target},     {"lc_alone_p99_s", at_load.lc_alone_p99},
                        {"be_requests_ceiling", ceilings}, {"lc_alone", lj_alone}};
      lj["runs"] = nlohmann::json::array();
      const Workload w = shared(mix, n, rate, target, ceilings);
      for (const Scheme& s : schemes) {
        ResizeLog resizes;
        Ran r = run_one(w, cfg, s.policy, opt.seed, opt.time_limit, &resizes);
        nlohmann::json run{{"scheme", s.spec}, {"policy", s.policy.name}, {"params", s.policy.params}, {"ok", r.status.is_ok()}};
        if (!r.status) {
          // One scheme's failure leaves the others' runs to be measured; a device fault ends the bench.
          run["error"] = r.status.to_string();
          lj["runs"].push_back(run);
          std::cerr << mix.workload.name << " " << at << " " << s.spec << ": FAILED: " << r.status.to_string() << "\n";
          rc = 1;
          if (r.status.code() == StatusCode::device_error) {
            mj["loads"].push_back(lj);
            return failed(at + " " + s.spec, r.status);
          }
          continue;
        }
        run.update(shared_run_figures(mix, r, target, at_load, resizes, device.sm_count));
        std::cerr << mix.workload.name << " " << at << " " << s.spec << ": SLO " << run["lc"]["slo_attainment"].get<double>()
                  << ", p99/alone " << run["lc"]["p99_over_alone"].get<double>() << ", BE " << run["be_norm"].get<double>()
                  << ", overall " << run["overall_norm"].get<double>() << "\n";
        lj["runs"].push_back(run);
      }
      mj["loads"].push_back(lj);
    }
    if (!file.add_mix(std::move(mj))) return rc;
  }
  return file.finish();
}

}  // namespace

int concord::lsbe::fail(const Status& s) {
  std::cerr << "lsbe_bench: " << s.to_string() << "\n";
  return 1;
}

int main(int argc, char** argv) {
  register_builtin_backends();
  CLI::App app{"LC/BE bench: an LC tenant at 30/50/70% of its capacity beside BE tenants, every scheme and MPS"};
  app.require_subcommand(1);
  RunOptions ro;
  CLI::App* run = app.add_subcommand("run", "Every scheme in one process, per mix and load");
  run->add_option("--target-factor", ro.target_factor, "LC target = this x its alone p99")->capture_default_str();
  run->add_option("--alone-repeats", ro.alone_repeats, "Repetitions of each alone run; the median is the reference")
      ->capture_default_str();
  add_mix_run_options(run, ro);
  MpsOptions mo;
  CLI::App* mps = app.add_subcommand("mps", "The LC and each BE tenant in its own process under MPS (GPU)");
  mps->add_option("--from", mo.from, "Results JSON of `run` (rates, targets, references, sgdrc's BE share)")->required();
  mps->add_option("--be-share", mo.be_share, "BE thread share (0-1] when the run has no sgdrc result (or to override it)");
  mps->add_option("--loads", mo.loads, "Only these loads (default: all of the run's)")->delimiter(',');
  mps->add_option("--backend", mo.backend, "cuda (sim runs the process plumbing only: separate simulated clocks)")->capture_default_str();
  mps->add_option("--work-dir", mo.work_dir, "Barrier and stop files, MPS pipe and log")->capture_default_str();
  mps->add_flag("!--no-daemon", mo.start_daemon, "Use an MPS daemon that is already running");
  mps->add_option("--time-limit", mo.time_limit, "Each peer's limit, seconds")->capture_default_str();
  mps->add_option("--out", mo.out, "Results JSON")->capture_default_str();
  PeerOptions po;
  CLI::App* peer = app.add_subcommand("peer", "Internal: one tenant's process");
  peer->group("");
  peer->add_option("--mix", po.mix)->required();
  peer->add_option("--tenant", po.tenant)->required();
  peer->add_option("--requests", po.requests)->required();
  peer->add_option("--rate", po.rate);
  peer->add_option("--target", po.target);
  peer->add_option("--seed", po.seed);
  peer->add_option("--backend", po.backend);
  peer->add_option("--time-limit", po.time_limit);
  peer->add_option("--barrier", po.barrier)->required();
  peer->add_option("--index", po.index)->required();
  peer->add_option("--n", po.n)->required();
  peer->add_option("--stop-file", po.stop_file)->required();
  peer->add_option("--out", po.out)->required();
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);
  if (run->parsed()) return cmd_run(ro);
  if (mps->parsed()) return cmd_mps(mo);
  return cmd_peer(po);
}
