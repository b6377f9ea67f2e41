// The Aker bench (docs/running.md, "The Aker bench"): LC tenants as inference-like request chains
// (tensor-core GEMM and im2col convolution bodies, or cuBLAS) beside best-effort HPC and
// training-like tenants, on the simulator or the GPU:
//   run    per mix: the LC alone in a closed loop (its query's solo time: the median request
//          latency without queueing, and its capacity) and each BE tenant alone; then per load (a
//          share of the LC's capacity, Poisson arrivals, one seed for every run) and per QoS target
//          (a factor of the solo time, 1.5 and 1.15 by default; or of the LC's p99 alone at that
//          rate, --target-basis alone-p99) the LC alone at that rate and every
//          scheme with the BE tenants running while the LC has requests. Per scheme: LC p99 over
//          the target, SLO attainment, BE throughput over BE alone and over the baymax scheme's.
//   pairs  fused versions of kernel pairs at ratios a:b against each kernel's solo time, and the
//          opportune (knee) load ratio of each version (aker_pairs.cpp).
// bench/aker/summarize.py makes the tables from both JSON files.
#include "aker_bench.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/registration.h"
#include "concord/build_info.h"
#include "concord/cli_parse.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "concord/backend_factory.h"
#include "lsbe_runner.h"
#include "mix_bench.h"

using namespace concord;
using namespace concord::lsbe;

namespace {

struct RunOptions {
  std::vector<std::string> mixes;
  std::vector<std::string> schemes{"aker", "baymax", "tacker", "streams", "sgdrc", "static-partition"};
  std::vector<double> loads{0.3};
  std::vector<double> target_factors{1.5, 1.15};
  // What a target factor multiplies: "solo", the LC query's solo time (Aker's definition), and/or
  // "alone-p99", the LC's p99 latency alone at the same Poisson rate (bench/lsbe's).
  std::vector<std::string> target_basis{"solo"};
  int lc_requests = 0;  // 0: the mix's own
  int be_alone_requests = 30;
  uint64_t seed = 1;
  std::string backend = "sim";
  std::string device = "h100";
  std::string profiles;
  Seconds time_limit = 120;
  std::string out = "aker.json";
  bool skip_unknown = false;
};

// The scheme whose BE throughput the others are measured against (Aker's Equation 6).
constexpr const char* kBaseline = "baymax";

// BE throughput over the baseline scheme's, per run of one (load, target), where the baseline ran.
void add_over_baseline(nlohmann::json& runs) {
  const nlohmann::json* base = nullptr;
  for (const nlohmann::json& r : runs) {
    if (r["policy"] == kBaseline && r["ok"].get<bool>()) base = &r;
  }
  for (nlohmann::json& r : runs) {
    if (!r["ok"].get<bool>()) continue;
    if (base == nullptr || !((*base)["be_norm"].get<double>() > 0)) {
      r["be_over_baseline"] = nullptr;
      continue;
    }
    r["be_over_baseline"] = r["be_norm"].get<double>() / (*base)["be_norm"].get<double>();
  }
}

int cmd_run(const RunOptions& opt) {
  // Every input checked before the first run: a bad one fails at once, not after minutes on the GPU.
  if (opt.mixes.empty()) return aker_bench::fail(Status::invalid_argument("run: no mix given"));
  if (opt.loads.empty()) return aker_bench::fail(Status::invalid_argument("--loads: no load given"));
  for (double l : opt.loads) {
    if (!(l > 0 && l <= 1)) return aker_bench::fail(Status::invalid_argument("--loads: " + std::to_string(l) + " is not in (0, 1]"));
  }
  if (opt.target_factors.empty()) return aker_bench::fail(Status::invalid_argument("--target-factors: none given"));
  if (opt.target_basis.empty()) return aker_bench::fail(Status::invalid_argument("--target-basis: none given"));
  for (const std::string& b : opt.target_basis) {
    if (b != "solo" && b != "alone-p99") {
      return aker_bench::fail(Status::invalid_argument("--target-basis: '" + b + "' is not solo or alone-p99"));
    }
  }
  for (double f : opt.target_factors) {
    if (!(f >= 1)) {
      return aker_bench::fail(Status::invalid_argument("--target-factors: " + std::to_string(f) +
                                                       " is below 1 (a target under the solo time cannot be met)"));
    }
  }
  if (opt.lc_requests < 0) return aker_bench::fail(Status::invalid_argument("--lc-requests must be >= 0 (0: the mix's own)"));
  if (opt.be_alone_requests < 1) return aker_bench::fail(Status::invalid_argument("--be-alone-requests must be >= 1"));
  if (!(opt.time_limit > 0)) return aker_bench::fail(Status::invalid_argument("--time-limit must be > 0"));
  auto parsed = parse_schemes(opt.schemes, opt.skip_unknown, "aker_bench");
  if (!parsed) return aker_bench::fail(parsed.status());
  std::vector<Mix> mixes;
  for (const std::string& path : opt.mixes) {
    auto m = load_mix(path);
    if (!m) return aker_bench::fail(m.status());
    mixes.push_back(std::move(*m));
  }
  std::unique_ptr<ProfileStore> store;
  if (!opt.profiles.empty()) {
    auto s = ProfileStore::open(opt.profiles, /*read_only=*/true);
    if (!s) return aker_bench::fail(s.status());
    store = std::move(*s);
  }
  auto config = backend_config(opt.backend, opt.device);
  if (!config) return aker_bench::fail(config.status());
  const BackendConfig& cfg = *config;
  auto probe = make_backend(cfg);
  if (!probe) return aker_bench::fail(probe.status());
  const DeviceSpec device = (*probe)->device();
  nlohmann::json results =
      nlohmann::json::parse(provenance_json(device, (*probe)->name(), concord::build_version(), concord::build_commit()));
  probe->reset();
  results["bench"] = "aker";
  results["backend"] = opt.backend;
  results["device"] = device.name;
  results["config"] = {{"schemes", opt.schemes},
                       {"loads", opt.loads},
                       {"target_factors", opt.target_factors},
                       {"target_basis", opt.target_basis},
                       {"lc_requests", opt.lc_requests},
                       {"be_alone_requests", opt.be_alone_requests},
                       {"seed", opt.seed},
                       {"time_limit_s", opt.time_limit},
                       {"profiles", opt.profiles},
                       {"baseline", kBaseline},
                       {"skipped_schemes", parsed->skipped}};
  results["mixes"] = nlohmann::json::array();

  int rc = 0;
  lsbe::ResultsFile file(opt.out, results, rc, aker_bench::fail);
  for (Mix& mix : mixes) {
    int profiled = 0;
    if (store) {
      auto n = attach_profiles(mix.workload, *store);
      if (!n) return aker_bench::fail(n.status());
      profiled = *n;
    }
    const int n = opt.lc_requests > 0 ? opt.lc_requests : mix.lc().requests;
    nlohmann::json mj = lsbe::ResultsFile::mix_json(mix, n, profiled);
    auto failed = [&](const std::string& what, const Status& s) { return file.fail_mix(mj, mix, what, s); };

    // The query's solo time: its median latency alone without queueing (Aker's T_ori_solo).
    auto alone = lc_alone_closed(mix, n, cfg, opt.seed, opt.time_limit);
    if (!alone) return failed("LC alone (closed loop)", alone.status());
    const Seconds solo = alone->figures.p50;
    mj["lc_alone"] = alone->json;
    mj["lc_solo_s"] = solo;
    std::cerr << mix.workload.name << ": LC solo " << solo * 1e3 << " ms, " << alone->capacity_rps << " requests/s\n";
    auto be_refs = be_alone_all(mix, opt.be_alone_requests, cfg, opt.seed, opt.time_limit);
    if (!be_refs) return failed("BE alone", be_refs.status());
    mj["be_alone"] = be_refs->json;

    // Every QoS target: each basis (solo, alone-p99) at each factor.
    std::vector<std::pair<std::string, double>> targets;
    for (const std::string& basis : opt.target_basis) {
      for (double factor : opt.target_factors) targets.emplace_back(basis, factor);
    }
    mj["loads"] = nlohmann::json::array();
    for (double load : opt.loads) {
      const double rate = load * alone->capacity_rps;
      const std::string at = "load " + std::to_string(load);
      auto lc_at = lc_alone_at(mix, n, rate, cfg, opt.seed, opt.time_limit);
      if (!lc_at) return failed(at + " LC alone (Poisson)", lc_at.status());
      const TenantRecord& lc_alone_tenant = lc_at->tenants.front();
      const Window alone_window = request_window(lc_alone_tenant.requests);
      Reference ref;
      ref.lc_capacity_rps = alone->capacity_rps;
      ref.lc_alone_p99 = lc_figures(lc_alone_tenant.requests, std::numeric_limits<double>::infinity(), alone_window).p99;
      ref.be_kernels_per_s = be_refs->kernels_per_s;
      nlohmann::json lj{{"load", load}, {"rate_rps", rate}, {"lc_alone_p99_s", ref.lc_alone_p99},
                        {"be_requests_ceiling", be_refs->ceilings}};
      lj["targets"] = nlohmann::json::array();
      for (const auto& [basis, factor] : targets) {
        const Seconds basis_s = basis == "solo" ? solo : ref.lc_alone_p99;
        const Seconds target = factor * basis_s;
        const std::string where = at + " target " + std::to_string(factor) + "x " + basis;
        // The LC alone at this rate against this target: the queueing alone costs it (no scheme
        // does better; with the alone-p99 basis it keeps at least 99% by construction).
        nlohmann::json tj{{"factor", factor}, {"basis", basis}, {"basis_s", basis_s}, {"target_s", target}};
        tj["lc_alone"] = shared_figures(lc_figures(lc_alone_tenant.requests, target, alone_window), alone_window, {}, ref);
        tj["lc_alone"]["lc"]["p99_over_target"] = tj["lc_alone"]["lc"]["p99_s"].get<double>() / target;
        tj["runs"] = nlohmann::json::array();
        const Workload w = shared(mix, n, rate, target, be_refs->ceilings);
        for (const Scheme& s : parsed->run) {
          ResizeLog resizes;
          Ran r = run_one(w, cfg, s.policy, opt.seed, opt.time_limit, &resizes);
          nlohmann::json run{{"scheme", s.spec}, {"policy", s.policy.name}, {"params", s.policy.params}, {"ok", r.status.is_ok()}};
          if (!r.status) {
            // One scheme's failure leaves the others' runs to be measured; a device fault ends the bench.
            run["error"] = r.status.to_string();
            tj["runs"].push_back(run);
            std::cerr << mix.workload.name << " " << where << " " << s.spec << ": FAILED: " << r.status.to_string() << "\n";
            rc = 1;
            if (r.status.code() == StatusCode::device_error) {
              lj["targets"].push_back(tj);
              mj["loads"].push_back(lj);
              return failed(where + " " + s.spec, r.status);
            }
            continue;
          }
          run.update(shared_run_figures(mix, r, target, ref, resizes, device.sm_count));
          run["lc"]["p99_over_target"] = run["lc"]["p99_s"].get<double>() / target;
          std::cerr << mix.workload.name << " " << where << " " << s.spec << ": SLO "
                    << run["lc"]["slo_attainment"].get<double>() << ", p99/target " << run["lc"]["p99_over_target"].get<double>()
                    << ", BE " << run["be_norm"].get<double>() << "\n";
          tj["runs"].push_back(run);
        }
        add_over_baseline(tj["runs"]);
        lj["targets"].push_back(std::move(tj));
      }
      mj["loads"].push_back(std::move(lj));
    }
    if (!file.add_mix(std::move(mj))) return rc;
  }
  return file.finish();
}

}  // namespace

int concord::aker_bench::fail(const Status& s) {
  std::cerr << "aker_bench: " << s.to_string() << "\n";
  return 1;
}

int main(int argc, char** argv) {
  register_builtin_backends();
  CLI::App app{"Aker bench: LC request chains beside BE tenants at two QoS targets, every scheme; fused pairs at ratios"};
  app.require_subcommand(1);
  RunOptions ro;
  CLI::App* run = app.add_subcommand("run", "Every scheme in one process, per mix, load and QoS target");
  run->add_option("--target-factors", ro.target_factors, "QoS targets, factors (>= 1) of the LC query's solo time")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--target-basis", ro.target_basis,
                  "What the factors multiply: solo (the LC query's solo time, Aker's) and/or alone-p99 (the LC's p99 alone at the same rate)")
      ->delimiter(',')
      ->capture_default_str();
  lsbe::add_mix_run_options(run, ro);
  aker_bench::PairsOptions po;
  po.pairs = aker_bench::default_pairs();
  po.ratios = aker_bench::default_ratios();
  CLI::App* pairs = app.add_subcommand("pairs", "Fused versions of kernel pairs at ratios a:b, and their opportune load ratios");
  pairs->add_option("--pairs", po.pairs, "Pairs as kernel:size+kernel:size")->delimiter(',')->capture_default_str();
  pairs->add_option("--ratios", po.ratios, "Fusion ratios a:b (parts of each kernel per block)")->delimiter(',')->capture_default_str();
  pairs->add_option("--knee-points", po.knee_points, "Load ratios (B's solo time over A's) of the two-stage fit: two low, two high")
      ->delimiter(',')
      ->capture_default_str();
  pairs->add_option("--variants", po.variants,
                    "chosen: per ratio the block-size variants with the most resident warps (>= 2 fused blocks/SM where any fit); default: the kernels' default variants")
      ->capture_default_str();
  pairs->add_option("--reps", po.reps, "Timed repetitions per point (the median counts)")->capture_default_str();
  pairs->add_option("--backend", po.backend, "sim or cuda")->capture_default_str();
  pairs->add_option("--device", po.device, "Simulated device (sim)")->capture_default_str();
  pairs->add_option("--out", po.out, "Results JSON")->capture_default_str();
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);
  if (run->parsed()) return cmd_run(ro);
  return aker_bench::cmd_pairs(po);
}
