// The `concord` command: run a workload under a policy, list policies and kernels, validate specs.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <iostream>

#include "concord/backend.h"
#include "concord/device.h"
#include "concord/experiment.h"
#include "concord/policy.h"
#include "concord/report.h"
#include "concord/suite.h"
#include "concord/workload.h"

#ifdef CONCORD_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "profile/ncu_worker.h"
#endif
#include "concord/profile.h"
#include "profile/ncu.h"
#include "profile/profiler.h"

#ifndef CONCORD_GIT_COMMIT
#define CONCORD_GIT_COMMIT "unknown"
#endif

namespace {

using namespace concord;

int fail(const Status& s) {
  std::cerr << "concord: " << s.to_string() << "\n";
  return 1;
}

Result<DeviceSpec> resolve_device(const std::string& name) {
  if (std::filesystem::exists(name)) return load_device_file(name);
  return builtin_device(name);
}

Result<PolicyParams> parse_params(const std::vector<std::string>& items) {
  PolicyParams p;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalid_argument("--param '" + item + "': expected key=value");
    }
    p[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return p;
}

// Every kernel step of the given workload specs, in order (errors name the file, line, field).
Result<std::vector<KernelSpec>> kernels_of_workloads(const std::vector<std::string>& paths) {
  std::vector<KernelSpec> out;
  for (const std::string& w : paths) {
    auto wl = load_workload_file(w);
    if (!wl) return wl.status();
    for (const auto& t : wl->tenants) {
      for (const auto& st : t.steps) out.push_back(st.kernel);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef CONCORD_WITH_CUDA
  concord::cuda::register_backend();
#endif
  CLI::App app{"Concord: kernel-level GPU co-location runtime"};
  app.require_subcommand(1);

  std::string spec, policy = "streams", backend = "sim", device = "h200", out_path, trace_path;
  uint64_t seed = 1;
  bool no_serial = false;
  std::vector<std::string> params;
  CLI::App* run = app.add_subcommand("run", "Run a workload spec under a policy and report STP, ANTT, FI, latency");
  run->add_option("spec", spec, "Workload spec (YAML)")->required();
  run->add_option("--policy,-p", policy, "Policy name (see `concord policies`)")->capture_default_str();
  run->add_option("--backend,-b", backend, "Backend: sim or cuda")->capture_default_str();
  run->add_option("--device,-d", device, "Simulated device: h100, h200, or a device JSON file")->capture_default_str();
  run->add_option("--seed,-s", seed, "Random seed (arrivals, random policies)")->capture_default_str();
  run->add_option("--out,-o", out_path, "Write the results JSON here");
  run->add_option("--trace,-t", trace_path, "Write a Chrome/Perfetto trace JSON here");
  run->add_option("--param", params, "Policy parameter key=value (repeatable)");
  run->add_flag("--no-serial", no_serial, "Skip the serial reference run (no speedup over serial)");
  std::string profiles_db;
  run->add_option("--profiles", profiles_db, "Profile store: measured SM curves replace the simulator's rooflines");

  CLI::App* profile = app.add_subcommand("profile", "Measure kernels on the GPU and manage the profile store");
  profile->require_subcommand(1);
  std::string db = "profiles.db";
  profile->add_option("--db", db, "Profile store (SQLite)")->capture_default_str();
  CLI::App* profile_run =
      profile->add_subcommand("run", "Profile suite kernels through a backend (resumable: only missing fields are measured)");
  std::vector<std::string> profile_kernels, profile_sizes;
  std::string profile_backend = "cuda", profile_device = "h200";
  profile_run->add_option("--backend,-b", profile_backend, "Backend: cuda (the GPU) or sim")->capture_default_str();
  profile_run->add_option("--device,-d", profile_device, "With --backend sim: h100, h200, or a device JSON file")
      ->capture_default_str();
  bool profile_full = false, profile_all_variants = false, profile_no_pressure = false;
  double profile_minutes = 0;
  int profile_reps = 3;
  profile_run->add_option("--kernels", profile_kernels, "Kernels to profile (default: the whole suite)")->delimiter(',');
  std::vector<std::string> run_workloads;
  profile_run->add_option("--workload", run_workloads, "Profile the kernels (and sizes) of these workload specs");
  profile_run->add_option("--size", profile_sizes, "NAME=SIZE: profile NAME at SIZE (repeatable)");
  profile_run->add_flag("--full", profile_full, "Every TPC step instead of the sampled plan");
  profile_run->add_flag("--all-variants", profile_all_variants, "Every block-size variant, not just the default");
  profile_run->add_option("--max-minutes", profile_minutes, "Stop starting kernels after this long");
  profile_run->add_flag("--no-pressure", profile_no_pressure,
                        "Skip timing the cache policies beside a streaming kernel (FEDCM's bypass filter then uses alone times)");
  profile_run->add_option("--reps", profile_reps, "Timed repetitions per point (median)")->capture_default_str();
  CLI::App* profile_raise = profile->add_subcommand(
      "raise", "Measure RAISE's eight metrics of every block-size variant with Nsight Compute (ncu)");
  std::vector<std::string> raise_workloads;
  std::string raise_ncu = "ncu", raise_dir = ".", raise_gpu, raise_driver;
  std::vector<std::string> raise_csv;
  int raise_passes = 3;
  profile_raise->add_option("--workload", raise_workloads, "Profile the kernels (and sizes) of these workload specs");
  profile_raise->add_option("--kernels", profile_kernels, "Suite kernels at their default sizes (default: the whole suite)")
      ->delimiter(',');
  profile_raise->add_option("--size", profile_sizes, "NAME=SIZE: profile NAME at SIZE (repeatable)");
  profile_raise->add_option("--ncu", raise_ncu, "The ncu executable")->capture_default_str();
  profile_raise->add_option("--work-dir", raise_dir, "Where the job list and ncu's CSV go")->capture_default_str();
  profile_raise->add_option("--passes", raise_passes, "ncu passes; each variant's metrics are their mean")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  profile_raise->add_option("--from-csv", raise_csv,
                            "Parse these CSVs of earlier ncu runs (one pass each, averaged) instead of running ncu");
  profile_raise->add_option("--gpu", raise_gpu, "With --from-csv: the GPU name of the profile key");
  profile_raise->add_option("--driver", raise_driver, "With --from-csv: the driver version of the profile key");
  std::string worker_jobs;
  CLI::App* profile_worker = profile->add_subcommand("raise-worker", "Internal: the program ncu profiles");
  profile_worker->group("");  // hidden
  profile_worker->add_option("--jobs", worker_jobs, "Job list")->required();
  profile->add_subcommand("show", "List stored profiles (the default)");
  std::string export_path, import_path;
  CLI::App* profile_export = profile->add_subcommand("export", "Write every stored profile to a JSON file");
  profile_export->add_option("file", export_path, "JSON file")->required();
  CLI::App* profile_import = profile->add_subcommand("import", "Add the profiles of a JSON export to the store");
  profile_import->add_option("file", import_path, "JSON file")->required();
  for (CLI::App* sub : profile->get_subcommands({})) sub->fallthrough();  // --db after the subcommand too

  CLI::App* policies = app.add_subcommand("policies", "List the policies");
  CLI::App* kernels = app.add_subcommand("kernels", "List the workload suite's kernels");
  CLI::App* backends = app.add_subcommand("backends", "List the backends built into this binary");
  std::string validate_spec;
  CLI::App* validate = app.add_subcommand("validate", "Check a workload spec and report every problem");
  validate->add_option("spec", validate_spec, "Workload spec (YAML)")->required();

  CLI11_PARSE(app, argc, argv);

  if (policies->parsed()) {
    for (const auto& e : builtin_policies().list()) std::cout << e.name << "\t" << e.summary << "\n";
    return 0;
  }
  if (backends->parsed()) {
    for (const auto& b : available_backends()) std::cout << b << "\n";
    return 0;
  }
  if (kernels->parsed()) {
    for (const auto& e : suite_catalog()) {
      std::cout << e.name << "\t" << (e.elastic ? "elastic" : "opaque") << "\t" << e.origin << "\t" << e.description
                << " (default " << e.default_size << ")\n";
    }
    return 0;
  }
  if (validate->parsed()) {
    auto w = load_workload_file(validate_spec);
    if (!w) return fail(w.status());
    int64_t launches = 0;
    for (const auto& t : w->tenants) launches += t.launches_per_request() * t.requests;
    std::cout << validate_spec << ": ok (" << w->tenants.size() << " tenants, " << launches << " launches)\n";
    return 0;
  }

  // NAME=SIZE items of --size.
  auto parse_sizes = [&]() -> Result<std::map<std::string, int64_t>> {
    std::map<std::string, int64_t> sizes;
    for (const auto& item : profile_sizes) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) return Status::invalid_argument("--size '" + item + "': expected NAME=SIZE");
      try {
        sizes[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
      } catch (const std::exception&) {
        return Status::invalid_argument("--size '" + item + "': SIZE is not an integer");
      }
    }
    return sizes;
  };

  if (profile->parsed()) {
    if (profile_worker->parsed()) {
#ifdef CONCORD_WITH_CUDA
      if (Status s = profile::run_ncu_worker(worker_jobs); !s) return fail(s);
      return 0;
#else
      return fail(Status::unsupported("`concord profile raise-worker` needs a CUDA build"));
#endif
    }
    if (profile_raise->parsed()) {
#ifdef CONCORD_WITH_CUDA
      auto sizes = parse_sizes();
      if (!sizes) return fail(sizes.status());
      auto from_specs = kernels_of_workloads(raise_workloads);
      if (!from_specs) return fail(from_specs.status());
      std::vector<KernelSpec> kernels = std::move(*from_specs);
      if (raise_workloads.empty()) {
        for (const SuiteEntry& e : suite_catalog()) {
          if (!profile_kernels.empty() &&
              std::find(profile_kernels.begin(), profile_kernels.end(), e.name) == profile_kernels.end()) {
            continue;
          }
          const auto it = sizes->find(e.name);
          auto k = make_suite_kernel(e.name, it != sizes->end() ? it->second : e.default_size);
          if (!k) return fail(k.status());
          kernels.push_back(*k);
        }
      }
      if (kernels.empty()) return fail(Status::invalid_argument("profile raise: no kernels to profile"));
      profile::NcuOptions o;
      if (raise_gpu.empty() || raise_driver.empty()) {
        // The key's device from the CUDA backend, released before ncu runs the worker.
        auto b = make_backend(BackendConfig{"cuda", {}, 1});
        if (!b) return fail(b.status());
        const ProfileKey k = profile::device_key(**b);
        if (raise_gpu.empty()) raise_gpu = k.gpu;
        if (raise_driver.empty()) raise_driver = k.driver;
      }
      auto store = ProfileStore::open(db);
      if (!store) return fail(store.status());
      o.ncu = raise_ncu;
      o.work_dir = raise_dir;
      o.from_csv = raise_csv;
      o.passes = raise_passes;
      o.gpu = raise_gpu;
      o.driver = raise_driver;
      auto n = profile::profile_raise(**store, profile::ncu_jobs(kernels), o, std::cerr);
      if (!n) return fail(n.status());
      std::cerr << "stored RAISE metrics of " << *n << " kernel variants in " << db << "\n";
      return 0;
#else
      return fail(Status::unsupported("`concord profile raise` needs a CUDA build (configure with CONCORD_CUDA=ON)"));
#endif
    }
    if (profile_run->parsed()) {
      BackendConfig config{profile_backend, {}, 1};
      if (profile_backend == "sim") {
        auto dev = resolve_device(profile_device);
        if (!dev) return fail(dev.status());
        config.device = *dev;
      }
      auto store = ProfileStore::open(db);
      if (!store) return fail(store.status());
      profile::ProfileOptions o;
      o.kernels = profile_kernels;
      o.full = profile_full;
      o.all_variants = profile_all_variants;
      o.max_minutes = profile_minutes;
      o.reps = std::max(1, profile_reps);
      o.pressure = !profile_no_pressure;
      auto sizes = parse_sizes();
      if (!sizes) return fail(sizes.status());
      o.sizes = *sizes;
      auto from_specs = kernels_of_workloads(run_workloads);
      if (!from_specs) return fail(from_specs.status());
      for (const KernelSpec& k : *from_specs) {
        auto same = [&](const KernelSpec& o) {
          if (o.name != k.name || o.size != k.size || o.variants.size() != k.variants.size()) return false;
          for (size_t i = 0; i < k.variants.size(); ++i) {
            if (o.variants[i].name != k.variants[i].name) return false;  // names carry block sizes
          }
          return true;
        };
        if (std::none_of(o.specs.begin(), o.specs.end(), same)) o.specs.push_back(k);
      }
      auto report = profile::profile_kernels(**store, config, o, std::cerr);
      if (!report) return fail(report.status());
      return 0;
    }
    auto store = ProfileStore::open(db, /*read_only=*/!profile_import->parsed());
    if (!store) return fail(store.status());
    if (profile_export->parsed()) {
      auto skipped = (*store)->export_json(export_path);
      if (!skipped) return fail(skipped.status());
      for (const auto& problem : *skipped) std::cerr << "concord: skipped: " << problem << "\n";
      std::cout << "exported to " << export_path << (skipped->empty() ? "" : " (damaged rows skipped: see above)") << "\n";
      return 0;
    }
    if (profile_import->parsed()) {
      auto n = (*store)->import_json(import_path);
      if (!n) return fail(n.status());
      std::cout << "imported " << *n << " profiles and facets into " << db << "\n";
      return 0;
    }
    for (const auto& problem : (*store)->integrity_problems()) std::cerr << "concord: damaged store: " << problem << "\n";
    auto all = (*store)->all();
    if (!all) return fail(all.status());
    std::cout << "gpu\tdriver\tkernel\tvariant\tsize\tall-SM ms\td (SMs)\tcompute util\tmemory util\tlinear fit error"
                 "\tmissing\n";
    for (const auto& p : all->profiles) {
      std::cout << p.key.gpu << "\t" << p.key.driver << "\t" << p.key.kernel << "\t" << p.key.variant << "\t" << p.key.size
                << "\t" << p.all_sm_seconds() * 1e3 << "\t" << p.demand_sms << "\t" << p.compute_utilization << "\t"
                << p.memory_utilization << "\t" << p.linear_fit_error << "\t"
                << ProfileFields::all().without(measured_fields(p)).to_string() << "\n";
    }
    auto facets = (*store)->all_facets();
    if (!facets) return fail(facets.status());
    for (const auto& f : facets->facets) {
      std::cout << "facet " << f.name << "\t" << f.key.gpu << "\t" << f.key.driver << "\t" << f.key.kernel << "\t"
                << f.key.variant << "\t" << f.key.size << "\t" << f.json << "\n";
    }
    for (const auto& problem : all->problems) std::cerr << "concord: skipped: " << problem << "\n";
    for (const auto& problem : facets->problems) std::cerr << "concord: skipped: " << problem << "\n";
    auto sessions = (*store)->sessions();
    if (!sessions) return fail(sessions.status());
    for (const auto& s : *sessions) {
      std::cout << "session " << s.finished_at << " on " << s.gpu << " (driver " << s.driver << "): " << s.profiles
                << " profiles in " << s.seconds << " s\n";
    }
    return 0;
  }

  auto workload = load_workload_file(spec);
  if (!workload) return fail(workload.status());
  if (!profiles_db.empty()) {
    auto store = ProfileStore::open(profiles_db, /*read_only=*/true);
    if (!store) return fail(store.status());
    auto n = attach_profiles(*workload, **store);
    if (!n) return fail(n.status());
    std::cout << "profiles: measured curves for " << *n << " kernel steps\n";
  }
  auto dev = resolve_device(device);
  if (!dev) return fail(dev.status());
  auto pp = parse_params(params);
  if (!pp) return fail(pp.status());
  if (!builtin_policies().contains(policy)) return fail(builtin_policies().make(policy, {}).status());

  ExperimentConfig config;
  config.backend = BackendConfig{backend, *dev, seed};
  config.policy = policy;
  config.params = *pp;
  config.seed = seed;
  config.compare_serial = !no_serial;
  ChromeTraceObserver tracer(*dev);
  if (!trace_path.empty()) config.observer = &tracer;
  ReferenceCache cache;
  auto result = run_experiment(*workload, config, cache);
  if (!result) return fail(result.status());
  print_summary(std::cout, *result);
  if (!out_path.empty()) {
    std::ofstream out(out_path);
    if (!out) return fail(Status::not_found(out_path + ": cannot write results"));
    out << experiment_json(*result, RunContext{spec, *pp, CONCORD_GIT_COMMIT}) << "\n";
    std::cout << "results: " << out_path << "\n";
  }
  if (!trace_path.empty()) {
    std::vector<std::string> names;
    for (const auto& t : workload->tenants) names.push_back(t.name);
    tracer.set_tenant_names(names);
    if (Status s = tracer.write(trace_path); !s) return fail(s);
    std::cout << "trace: " << trace_path << "\n";
  }
  return 0;
}
