// The PBS bench (docs/running.md, "The PBS bench"): per mix, in this one process (the GPU's
// context made once), each tenant alone on its share of SMs at each oracle TLP level (its best
// alone rate is what its slowdown is measured against, Table III's SD; its best level is
// ++bestTLP's), then every scheme on the whole mix, then the oracle: every combination of the
// levels as fixed TLPs (the `besttlp` policy with every tlp.T given) on the mix's work scaled by
// --oracle-work. Each run's
// figures go to DIR/<mix>/{alone-I-L,SCHEME,oracle-L1_L2[_L3]}.json as soon as it ends; a file
// already there is kept (a rerun goes on where one stopped). Rates are kernels per second over
// the co-run window (all tenants running), and for the PBS schemes also over the part of it
// after the search first settled. bench/pbs/summarize.py makes the tables.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/registration.h"
#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/cli_parse.h"
#include "concord/policy.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "be_while_lc.h"
#include "concord/spec_source.h"
#include "concord/backend_factory.h"
#include "lsbe_runner.h"
#include "pbs_measure.h"
#include "runner/processes.h"

using namespace concord;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::vector<std::string> mixes;
  std::vector<std::string> schemes{"maxtlp", "besttlp", "dyncta", "modbypass", "pbs-ws", "pbs-fi", "pbs-hs"};
  std::vector<std::string> pbs_params;  // k=v, added to every pbs scheme
  std::vector<int> levels2{1, 2, 4, 0};
  std::vector<int> levels3{1, 4, 0};
  double oracle_work = 0.5;
  double alone_work = 0.5;
  bool oracle = true;
  std::string sms = "split";
  std::string backend = "sim";
  std::string device = "h100";
  std::string profiles;
  uint64_t seed = 1;
  Seconds time_limit = 60;
  std::string out_dir = "pbs";
};

int fail(const Status& s) {
  std::cerr << "pbs_bench: " << s.to_string() << "\n";
  return 1;
}

std::optional<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

Status save(const std::string& path, const nlohmann::json& j) { return write_file_atomically(path, j.dump(1) + "\n"); }

// A scheme's label and policy: "pbs-ws" is `pbs` with metric=ws; any other label names a
// policy, optionally with ":k=v;k=v".
Result<PolicySpec> scheme_policy(const std::string& label, const Options& o) {
  PolicySpec p;
  if (label.rfind("pbs-", 0) == 0 && label.find(':') == std::string::npos) {
    p.name = "pbs";
    p.params["metric"] = label.substr(4);
  } else {
    auto s = parse_policy_spec(label);
    if (!s) return s.status();
    p = *s;
  }
  p.params["sms"] = o.sms;
  if (p.name == "pbs") {
    for (const std::string& kv : o.pbs_params) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) return Status::invalid_argument("--pbs-param '" + kv + "': not key=value");
      p.params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  auto made = builtin_policies().make(p.name, p.params);
  if (!made) return Status(made.status().code(), "scheme '" + label + "': " + made.status().message());
  return p;
}

using lsbe::Ran;
// One run that ends with the co-run window: once a tenant has ended all its requests, the others
// start none (their requests in flight finish), so no run goes on alone to its end.
Ran run_once(const Workload& w, const BackendConfig& cfg, const PolicySpec& policy, const Options& o) {
  std::vector<int64_t> ended(w.tenants.size(), 0);
  return lsbe::run_one(w, cfg, policy, o.seed, o.time_limit, nullptr, [&](TenantId t) {
    const auto i = static_cast<size_t>(t.value);
    return i < ended.size() && ++ended[i] >= w.tenants[i].requests;
  });
}

nlohmann::json sd_json(const Result<pbs_bench::SdMetrics>& m) {
  if (!m) return nullptr;
  return {{"sd", m->sd}, {"ws", m->ws}, {"fi", m->fi}, {"hs", m->hs}};
}

// A shared run's figures against the best alone rates.
nlohmann::json shared_json(const Workload& w, const Ran& r, const std::vector<double>& alone, const std::string& trace,
                           const std::vector<std::string>& sms) {
  nlohmann::json j{{"ok", static_cast<bool>(r.status)}};
  if (!r.status) j["error"] = r.status.to_string();
  const lsbe::Window whole = pbs_bench::co_run_window(r.record);
  std::optional<pbs_bench::Settle> settle;
  if (!trace.empty()) settle = pbs_bench::first_settle(trace);
  std::optional<lsbe::Window> after;
  if (settle && settle->t < whole.end) after = lsbe::Window{std::max(whole.begin, settle->t), whole.end};
  std::vector<double> rw, ra;
  j["tenants"] = nlohmann::json::array();
  for (size_t i = 0; i < w.tenants.size(); ++i) {
    const TenantId id{static_cast<int64_t>(i)};
    rw.push_back(pbs_bench::rate_in(r.record, id, whole));
    if (after) ra.push_back(pbs_bench::rate_in(r.record, id, *after));
    j["tenants"].push_back({{"name", w.tenants[i].name},
                            {"sms", sms[i]},
                            {"finish_s", i < r.record.tenants.size() ? r.record.tenants[i].finish : 0.0},
                            {"rate_whole", rw.back()},
                            {"rate_after_settle", after ? nlohmann::json(ra.back()) : nlohmann::json(nullptr)},
                            {"alone_rate", alone[i]}});
  }
  j["window_s"] = {whole.begin, whole.end};
  j["settle_s"] = settle ? nlohmann::json(settle->t) : nlohmann::json(nullptr);
  j["samples"] = settle ? nlohmann::json(settle->samples) : nlohmann::json(nullptr);
  j["tlp_changes"] = settle ? nlohmann::json(settle->tlp_changes) : nlohmann::json(nullptr);
  j["after_settle_window_s"] = after ? nlohmann::json({after->begin, after->end}) : nlohmann::json(nullptr);
  const bool measured = r.status && whole.length() > 0;
  j["whole"] = measured ? sd_json(pbs_bench::sd_metrics(rw, alone)) : nlohmann::json(nullptr);
  j["after_settle"] = measured && after ? sd_json(pbs_bench::sd_metrics(ra, alone)) : nlohmann::json(nullptr);
  j["policy_stats"] = r.record.stats.policy;
  j["engine"] = lsbe::engine_json(r.record);
  return j;
}

int run_mix(const std::string& file, const Options& o, const BackendConfig& cfg, int sm_count, const ProfileStore* store,
            std::map<std::string, double>& alone_cache) {
  auto loaded = load_workload_file(file);
  if (!loaded) return fail(loaded.status());
  Workload w = std::move(*loaded);
  if (store) {
    auto n = attach_profiles(w, *store);
    if (!n) return fail(n.status());
  }
  const int k = static_cast<int>(w.tenants.size());
  if (k < 2) return fail(Status::invalid_argument(file + ": a mix needs at least two tenants"));
  const std::vector<int>& levels = k == 2 ? o.levels2 : o.levels3;
  const std::string dir = o.out_dir + "/" + w.name;
  fs::create_directories(dir);
  const bool split = o.sms == "split";
  std::vector<std::string> sms;
  for (int i = 0; i < k; ++i) sms.push_back(pbs_bench::share_of(i, k, sm_count, split));

  // Each tenant alone on its share at each level; its best rate and level.
  std::vector<double> best_rate(static_cast<size_t>(k), 0);
  std::vector<int> best_level(static_cast<size_t>(k), 0);
  for (int i = 0; i < k; ++i) {
    Workload one;
    one.name = w.name + "/" + w.tenants[static_cast<size_t>(i)].name + "-alone";
    one.source = w.source;
    one.tenants = {w.tenants[static_cast<size_t>(i)]};
    auto small = pbs_bench::scaled(one, o.alone_work);
    if (!small) return fail(small.status());
    for (int l : levels) {
      const std::string path = dir + "/alone-" + std::to_string(i) + "-" + std::to_string(l) + ".json";
      const std::string key = tenant_fingerprint(one.tenants.front()) + "|" + sms[static_cast<size_t>(i)] + "|" + std::to_string(l);
      double rate = 0;
      if (auto j = read_json(path); j && j->value("ok", false)) {
        rate = (*j)["rate"].get<double>();
      } else if (auto it = alone_cache.find(key); it != alone_cache.end()) {
        rate = it->second;
      } else {
        PolicySpec manual{"manual", {{"form", "persistent"}, {"sms.0", sms[static_cast<size_t>(i)]}}};
        if (l != 0) manual.params["tlp.0"] = std::to_string(l);
        const Ran r = run_once(*small, cfg, manual, o);
        rate = r.status ? pbs_bench::rate_in(r.record, TenantId{0}, pbs_bench::co_run_window(r.record)) : 0;
        nlohmann::json j{{"bench", "pbs"}, {"kind", "alone"},  {"mix", w.name}, {"tenant", i}, {"level", l},
                         {"sms", sms[static_cast<size_t>(i)]}, {"work_scale", o.alone_work}, {"ok", static_cast<bool>(r.status)},
                         {"rate", rate}, {"engine", lsbe::engine_json(r.record)}};
        if (!r.status) j["error"] = r.status.to_string();
        if (Status s = save(path, j); !s) return fail(s);
        if (!r.status) return fail(Status(r.status.code(), w.name + " tenant " + std::to_string(i) + " alone: " + r.status.message()));
        alone_cache[key] = rate;
      }
      if (rate > best_rate[static_cast<size_t>(i)]) {
        best_rate[static_cast<size_t>(i)] = rate;
        best_level[static_cast<size_t>(i)] = l;
      }
    }
  }

  auto run_shared = [&](const std::string& name, const Workload& work, PolicySpec policy, const std::string& trace,
                        nlohmann::json extra) -> Status {
    const std::string path = dir + "/" + name + ".json";
    if (auto j = read_json(path); j && j->value("ok", false)) return Status::ok();
    if (!trace.empty()) {
      fs::remove(trace);
      policy.params["trace"] = trace;
    }
    const Ran r = run_once(work, cfg, policy, o);
    nlohmann::json j = shared_json(work, r, best_rate, trace, sms);
    j.update({{"bench", "pbs"}, {"mix", w.name}, {"scheme", name}, {"policy", policy.name}, {"params", policy.params}});
    j.update(extra);
    if (!r.status) std::cerr << "pbs_bench: " << w.name << " " << name << ": " << r.status.to_string() << "\n";
    return save(path, j);
  };

  for (const std::string& label : o.schemes) {
    auto policy = scheme_policy(label, o);
    if (!policy) return fail(policy.status());
    if (policy->name == "besttlp") {
      for (int i = 0; i < k; ++i) {
        if (best_level[static_cast<size_t>(i)] != 0) policy->params["tlp." + std::to_string(i)] = std::to_string(best_level[static_cast<size_t>(i)]);
      }
    }
    const std::string trace = policy->name == "pbs" ? dir + "/" + label + ".trace.jsonl" : "";
    if (Status s = run_shared(label, w, *policy, trace, {{"kind", "scheme"}, {"work_scale", 1.0}}); !s) return fail(s);
  }
  if (o.oracle) {
    auto small = pbs_bench::scaled(w, o.oracle_work);
    if (!small) return fail(small.status());
    for (const std::vector<int>& c : pbs_bench::combinations(levels, k)) {
      // Through the policy ++bestTLP runs with (the same SM sharing, form and runner), so that an
      // oracle combination and a scheme holding the same TLPs run alike.
      PolicySpec fixed{"besttlp", {{"sms", o.sms}}};
      for (int i = 0; i < k; ++i) {
        if (c[static_cast<size_t>(i)] != 0) fixed.params["tlp." + std::to_string(i)] = std::to_string(c[static_cast<size_t>(i)]);
      }
      if (Status s = run_shared("oracle-" + pbs_bench::combination_name(c), *small, fixed, "",
                                {{"kind", "oracle"}, {"work_scale", o.oracle_work}, {"tlp", c}});
          !s) {
        return fail(s);
      }
    }
  }
  std::cerr << w.name << " done\n";
  return 0;
}

int run(const Options& o) {
  if (o.mixes.empty()) return fail(Status::invalid_argument("no mix given"));
  if (o.sms != "split" && o.sms != "shared") return fail(Status::invalid_argument("--sms must be split or shared, is '" + o.sms + "'"));
  for (double f : {o.oracle_work, o.alone_work}) {
    if (!(f > 0 && f <= 1)) return fail(Status::invalid_argument("--oracle-work and --alone-work must be in (0, 1]"));
  }
  for (const auto* levels : {&o.levels2, &o.levels3}) {
    if (levels->empty()) return fail(Status::invalid_argument("--levels2/--levels3: no level given"));
    for (int l : *levels) {
      if (l < 0) return fail(Status::invalid_argument("--levels2/--levels3: a level is >= 1, or 0 for as many as fit"));
    }
  }
  if (!(o.time_limit > 0)) return fail(Status::invalid_argument("--time-limit must be > 0"));
  for (const std::string& s : o.schemes) {
    if (auto p = scheme_policy(s, o); !p) return fail(p.status());
  }
  for (const std::string& m : o.mixes) {
    if (!fs::exists(m)) return fail(Status::not_found(m + ": no such mix file"));
  }
  std::unique_ptr<ProfileStore> store;
  if (!o.profiles.empty()) {
    auto s = ProfileStore::open(o.profiles, /*read_only=*/true);
    if (!s) return fail(s.status());
    store = std::move(*s);
  }
  auto config = lsbe::backend_config(o.backend, o.device);
  if (!config) return fail(config.status());
  auto probe = make_backend(*config);
  if (!probe) return fail(probe.status());
  const DeviceSpec device = (*probe)->device();
  nlohmann::json info = nlohmann::json::parse(provenance_json(device, (*probe)->name(), concord::build_version(), concord::build_commit()));
  probe->reset();
  info["bench"] = "pbs";
  info["backend"] = o.backend;
  info["config"] = {{"schemes", o.schemes},         {"pbs_params", o.pbs_params}, {"levels2", o.levels2},
                    {"levels3", o.levels3},         {"oracle", o.oracle},         {"oracle_work", o.oracle_work},
                    {"alone_work", o.alone_work},   {"sms", o.sms},               {"profiles", o.profiles},
                    {"seed", o.seed},               {"time_limit_s", o.time_limit}};
  fs::create_directories(o.out_dir);
  if (Status s = save(o.out_dir + "/bench.json", info); !s) return fail(s);
  std::map<std::string, double> alone_cache;
  for (const std::string& m : o.mixes) {
    if (int rc = run_mix(m, o, *config, device.sm_count, store.get(), alone_cache); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  register_builtin_backends();
  Options o;
  CLI::App app{"PBS bench: each tenant alone per TLP level, every scheme, and the TLP oracle, per mix, in one process"};
  app.add_option("mixes", o.mixes, "Mix specs (two or three BE tenants)")->required();
  app.add_option("--schemes", o.schemes, "Schemes: pbs-ws|pbs-fi|pbs-hs or a policy (name or name:k=v;k=v)")
      ->delimiter(',')->capture_default_str();
  app.add_option("--pbs-param", o.pbs_params, "k=v added to every pbs scheme (window, warmup, tolerance, drift)");
  app.add_option("--levels2", o.levels2, "Oracle TLP levels for pairs (0: as many as fit)")->delimiter(',')->capture_default_str();
  app.add_option("--levels3", o.levels3, "Oracle TLP levels for triples")->delimiter(',')->capture_default_str();
  app.add_option("--oracle-work", o.oracle_work, "Share of the mix's work each oracle run does")->capture_default_str();
  app.add_option("--alone-work", o.alone_work, "Share of a tenant's work each alone run does")->capture_default_str();
  app.add_flag("!--no-oracle", o.oracle, "Leave the oracle out");
  app.add_option("--sms", o.sms, "split (an equal share per tenant) or shared")->capture_default_str();
  app.add_option("--backend", o.backend, "sim or cuda")->capture_default_str();
  app.add_option("--device", o.device, "Simulated device (sim)")->capture_default_str();
  app.add_option("--profiles", o.profiles, "Profile store whose facets (pbs) are attached to the mixes' kernels");
  app.add_option("--seed", o.seed, "Seed of every run")->capture_default_str();
  app.add_option("--time-limit", o.time_limit, "Each run's limit, seconds of its clock")->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "Where the per-mix folders go")->capture_default_str();
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);
  return run(o);
}
