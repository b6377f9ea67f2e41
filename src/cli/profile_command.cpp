// `concord profile run|raise|aker|show|export|import`: measures kernels and manages the profile store.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/workload.h"

#include "concord/backend.h"
#include "concord/backend_factory.h"
#include "profile/ncu.h"
#include "policy/aker/aker_profiler.h"
#include "policy/ncu_facets.h"
#include "profile/profiler.h"


namespace concord::cli {

namespace {

struct ProfileOptions {
  std::string db = "profiles.db";
  std::vector<std::string> kernels, sizes;
  bool facets = false;  // show: the facets table instead of the profiles
  std::string backend = "cuda", device;  // run: where to measure (sim: h200 by default; cuda: GPU 0)
  // run
  std::vector<std::string> run_workloads;
  bool full = false, all_variants = false, no_pressure = false;
  double max_minutes = 0;
  int reps = 3;
  // raise
  std::vector<std::string> raise_workloads, raise_csv;
  std::string ncu = "ncu", work_dir = ".", gpu, driver;
  int passes = 3;
  bool default_variants = false;  // only each kernel's default variant (the one PBS launches)
  // aker
  std::vector<std::string> aker_workloads, aker_pairs, aker_ratios;
  std::string aker_variants = "chosen";
  // raise-worker, export, import
  std::string worker_jobs, export_path, import_path;
};

struct ProfileApps {
  CLI::App* run = nullptr;
  CLI::App* raise = nullptr;
  CLI::App* aker = nullptr;
  CLI::App* worker = nullptr;
  CLI::App* show = nullptr;
  CLI::App* exporter = nullptr;
  CLI::App* importer = nullptr;
};

// NAME=SIZE items of --size.
Result<std::map<std::string, int64_t>> parse_sizes(const std::vector<std::string>& items) {
  std::map<std::string, int64_t> sizes;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return Status::invalid_argument("--size '" + item + "': expected NAME=SIZE");
    try {
      sizes[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      return Status::invalid_argument("--size '" + item + "': SIZE is not an integer");
    }
  }
  return sizes;
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

int profile_raise(ProfileOptions o) {
  auto sizes = parse_sizes(o.sizes);
  if (!sizes) return usage_error(sizes.status().message());
  auto from_specs = kernels_of_workloads(o.raise_workloads);
  if (!from_specs) return fail(from_specs.status());
  std::vector<KernelSpec> kernels = std::move(*from_specs);
  if (o.raise_workloads.empty()) {
    for (const SuiteEntry& e : suite_catalog()) {
      if (!o.kernels.empty() && std::find(o.kernels.begin(), o.kernels.end(), e.name) == o.kernels.end()) continue;
      const auto it = sizes->find(e.name);
      auto k = make_suite_kernel(e.name, it != sizes->end() ? it->second : e.default_size);
      if (!k) return fail(k.status());
      kernels.push_back(*k);
    }
  }
  if (kernels.empty()) return fail(Status::invalid_argument("profile raise: no kernels to profile"));
  if (o.default_variants) {
    for (KernelSpec& k : kernels) {
      k.variants = {k.variant(k.default_variant)};
      k.default_variant = 0;
    }
  }
  if (o.gpu.empty() || o.driver.empty()) {
    // The key's device from the CUDA backend, released before ncu runs the worker.
    auto b = make_backend(BackendConfig{"cuda", {}, 1});
    if (!b) return fail(b.status());
    const ProfileKey k = profile::device_key(**b);
    if (o.gpu.empty()) o.gpu = k.gpu;
    if (o.driver.empty()) o.driver = k.driver;
  }
  auto store = ProfileStore::open(o.db);
  if (!store) return fail(store.status());
  profile::NcuOptions n;
  n.ncu = o.ncu;
  n.work_dir = o.work_dir;
  n.from_csv = o.raise_csv;
  n.passes = o.passes;
  n.gpu = o.gpu;
  n.driver = o.driver;
  const std::vector<profile::NcuFacet> facets = policy::ncu_facets();
  const std::vector<SuiteJob> jobs = suite_jobs(kernels);
  auto stored = profile::profile_ncu(**store, jobs, facets, n, std::cerr);
  if (!stored) return fail(stored.status());
  for (size_t i = 0; i < facets.size(); ++i) {
    spdlog::info("stored the {} facet of {} of {} kernel variants in {}", facets[i].name, (*stored)[i].written, jobs.size(), o.db);
  }
  return kExitOk;
}

Result<BackendConfig> backend_config(const ProfileOptions& o) {
  BackendConfig config{o.backend, {}, 1};
  if (o.backend == "sim") {
    auto dev = resolve_device(o.device.empty() ? "h200" : o.device);
    if (!dev) return dev.status();
    config.device = *dev;
  } else if (!o.device.empty()) {
    auto index = parse_device_index(o.device);
    if (!index) return Status::invalid_argument("--device '" + o.device + "': the cuda backend takes a GPU index");
    config.device_index = *index;
  }
  return config;
}

// Aker's facet: the kernels of --kernels and of the workloads; pairs from --pairs, and from each
// workload every LC kernel with every BE kernel and every two BE kernels of different tenants,
// both ways (the policy decides which pairs of classes fuse).
int profile_aker(const ProfileOptions& o) {
  auto config = backend_config(o);
  if (!config) return usage_error(config.status().message());
  auto sizes = parse_sizes(o.sizes);
  if (!sizes) return usage_error(sizes.status().message());
  profile::AkerProfileOptions a;
  a.reps = std::max(1, o.reps);
  auto add = [&](const KernelSpec& k) {
    if (std::none_of(a.kernels.begin(), a.kernels.end(), [&](const KernelSpec& x) { return x.name == k.name; })) a.kernels.push_back(k);
  };
  auto add_pair = [&](const std::string& x, const std::string& y) {
    if (x != y && std::find(a.pairs.begin(), a.pairs.end(), std::make_pair(x, y)) == a.pairs.end()) a.pairs.emplace_back(x, y);
  };
  for (const std::string& w : o.aker_workloads) {
    auto wl = load_workload_file(w);
    if (!wl) return fail(wl.status());
    for (const auto& t : wl->tenants) {
      for (const auto& st : t.steps) add(st.kernel);
    }
    for (size_t i = 0; i < wl->tenants.size(); ++i) {
      for (size_t j = 0; j < wl->tenants.size(); ++j) {
        const TenantSpec& x = wl->tenants[i];
        const TenantSpec& y = wl->tenants[j];
        if (i == j || y.cls != TenantClass::best_effort) continue;
        for (const auto& sx : x.steps) {
          for (const auto& sy : y.steps) add_pair(sx.kernel.name, sy.kernel.name);
        }
      }
    }
  }
  std::vector<std::string> names = o.kernels;
  for (const std::string& p : o.aker_pairs) {
    const auto plus = p.find('+');
    if (plus == std::string::npos || plus == 0 || plus + 1 == p.size()) return usage_error("--pairs '" + p + "': expected K1+K2");
    names.push_back(p.substr(0, plus));
    names.push_back(p.substr(plus + 1));
    add_pair(p.substr(0, plus), p.substr(plus + 1));
  }
  for (const std::string& n : names) {
    if (std::any_of(a.kernels.begin(), a.kernels.end(), [&](const KernelSpec& k) { return k.name == n; })) continue;
    const auto it = std::find_if(suite_catalog().begin(), suite_catalog().end(), [&](const SuiteEntry& e) { return e.name == n; });
    if (it == suite_catalog().end()) return usage_error("aker: unknown kernel '" + n + "'");
    const auto size = sizes->find(n);
    auto k = make_suite_kernel(n, size != sizes->end() ? size->second : it->default_size);
    if (!k) return fail(k.status());
    add(*k);
  }
  if (!o.aker_ratios.empty()) {
    a.ratios.clear();
    for (const std::string& r : o.aker_ratios) {
      int x = 0, y = 0;
      char colon = 0;
      std::istringstream in(r);
      if (!(in >> x >> colon >> y) || colon != ':' || !in.eof() || x < 1 || y < 1) {
        return usage_error("--ratios '" + r + "': expected a:b with a, b >= 1");
      }
      a.ratios.emplace_back(x, y);
    }
  }
  if (o.aker_variants != "chosen" && o.aker_variants != "default") {
    return usage_error("--variants '" + o.aker_variants + "': expected chosen or default");
  }
  a.default_variants = o.aker_variants == "default";
  if (a.kernels.empty()) return usage_error("profile aker: no kernels (give --workload, --kernels or --pairs)");
  auto store = ProfileStore::open(o.db);
  if (!store) return fail(store.status());
  auto report = profile::profile_aker(**store, *config, a, std::cerr);
  if (!report) return fail(report.status());
  return kExitOk;
}

int profile_run(const ProfileOptions& o) {
  auto config = backend_config(o);
  if (!config) return usage_error(config.status().message());
  auto store = ProfileStore::open(o.db);
  if (!store) return fail(store.status());
  profile::ProfileOptions p;
  p.kernels = o.kernels;
  p.full = o.full;
  p.all_variants = o.all_variants;
  p.max_minutes = o.max_minutes;
  p.reps = std::max(1, o.reps);
  p.pressure = !o.no_pressure;
  auto sizes = parse_sizes(o.sizes);
  if (!sizes) return usage_error(sizes.status().message());
  p.sizes = *sizes;
  auto from_specs = kernels_of_workloads(o.run_workloads);
  if (!from_specs) return fail(from_specs.status());
  for (const KernelSpec& k : *from_specs) {
    auto same = [&](const KernelSpec& other) {
      if (other.name != k.name || other.size != k.size || other.variants.size() != k.variants.size()) return false;
      for (size_t i = 0; i < k.variants.size(); ++i) {
        if (other.variants[i].name != k.variants[i].name) return false;  // names carry block sizes
      }
      return true;
    };
    if (std::none_of(p.specs.begin(), p.specs.end(), same)) p.specs.push_back(k);
  }
  auto report = profile::profile_kernels(**store, *config, p, std::cerr);
  if (!report) return fail(report.status());
  return kExitOk;
}

// Tab-separated, one stored profile per line after a header line (or, with --facets, one
// policy facet per line); problems and the store's sessions go to stderr, so standard output stays
// one table.
// A damaged store still shows what can be read, and exits 1 (stderr names each problem).
int profile_show(const ProfileStore& store, const std::string& db, bool facets) {
  size_t problems = store.integrity_problems().size();
  for (const auto& problem : store.integrity_problems()) spdlog::warn("{}: damaged store: {}", db, problem);
  if (facets) {
    auto all = store.all_facets();
    if (!all) return fail(all.status());
    std::cout << "facet\tgpu\tdriver\tkernel\tvariant\tsize\tjson\n";
    for (const auto& f : all->facets) {
      std::cout << f.name << "\t" << f.key.gpu << "\t" << f.key.driver << "\t" << f.key.kernel << "\t" << f.key.variant
                << "\t" << f.key.size << "\t" << f.json << "\n";
    }
    for (const auto& problem : all->problems) spdlog::warn("{}: skipped: {}", db, problem);
    problems += all->problems.size();
  } else {
    auto all = store.all();
    if (!all) return fail(all.status());
    std::cout << "gpu\tdriver\tkernel\tvariant\tsize\tall-SM ms\td (SMs)\tcompute util\tmemory util\tlinear fit error"
                 "\tmissing\n";
    for (const auto& p : all->profiles) {
      std::cout << p.key.gpu << "\t" << p.key.driver << "\t" << p.key.kernel << "\t" << p.key.variant << "\t" << p.key.size
                << "\t" << p.all_sm_seconds() * 1e3 << "\t" << p.demand_sms << "\t" << p.compute_utilization << "\t"
                << p.memory_utilization << "\t" << p.linear_fit_error << "\t"
                << ProfileFields::all().without(measured_fields(p)).to_string() << "\n";
    }
    for (const auto& problem : all->problems) spdlog::warn("{}: skipped: {}", db, problem);
    problems += all->problems.size();
  }
  std::cout.flush();
  if (!std::cout) return fail(Status::io_error("profile show: writing to standard output failed"));
  auto sessions = store.sessions();
  if (!sessions) return fail(sessions.status());
  for (const auto& s : *sessions) {
    spdlog::info("{}: session {} on {} (driver {}): {} profiles in {} s", db, s.finished_at, s.gpu, s.driver, s.profiles,
                 s.seconds);
  }
  if (problems > 0) {
    return fail(Status::io_error(fmt::format("{}: damaged store: {} problems (above); the readable rows are shown", db, problems)));
  }
  return kExitOk;
}

int run_profile(ProfileOptions o, const ProfileApps& apps, const Config& config) {
  CLI::App* profile = apps.run->get_parent();
  apply_setting(*profile, "--db", config, "store", o.db);
  if (apps.worker->parsed()) {
    if (Status s = run_ncu_worker(o.worker_jobs); !s) return fail(s);
    return kExitOk;
  }
  if (apps.raise->parsed()) return profile_raise(o);
  if (apps.aker->parsed()) return profile_aker(o);
  if (apps.run->parsed()) return profile_run(o);
  auto store = ProfileStore::open(o.db, /*read_only=*/!apps.importer->parsed());
  if (!store) return fail(store.status());
  if (apps.exporter->parsed()) {
    auto skipped = (*store)->export_json(o.export_path);
    if (!skipped) return fail(skipped.status());
    for (const auto& problem : *skipped) spdlog::warn("{}: skipped: {}", o.db, problem);
    const size_t damaged = skipped->size() + (*store)->integrity_problems().size();
    for (const auto& problem : (*store)->integrity_problems()) spdlog::warn("{}: damaged store: {}", o.db, problem);
    if (damaged > 0) {
      return fail(Status::io_error(
          fmt::format("{}: damaged store: {} problems (above); the readable rows were exported to {}", o.db, damaged, o.export_path)));
    }
    spdlog::info("exported {} to {}", o.db, o.export_path);
    return kExitOk;
  }
  if (apps.importer->parsed()) {
    auto n = (*store)->import_json(o.import_path);
    if (!n) return fail(n.status());
    spdlog::info("imported {} profiles from {} into {}", *n, o.import_path, o.db);
    return kExitOk;
  }
  return profile_show(**store, o.db, o.facets);
}

}  // namespace

Subcommand add_profile_command(CLI::App& parent) {
  auto o = std::make_shared<ProfileOptions>();
  ProfileApps apps;
  CLI::App* profile = parent.add_subcommand("profile", "Measure kernels on the GPU and manage the profile store");
  profile->require_subcommand(1);
  profile->add_option("--db", o->db, "Profile store (SQLite); config: store")->capture_default_str();

  apps.run = profile->add_subcommand("run", "Profile suite kernels through a backend (resumable: measured fields are skipped)");
  apps.run->add_option("-b,--backend", o->backend, "Backend: cuda, or sim (the simulator's model, for tests)")
      ->capture_default_str();
  apps.run->add_option("-d,--device", o->device,
                       "cuda: the GPU's index among those CUDA_VISIBLE_DEVICES leaves (default 0); sim: h100, h200 "
                       "(default) or a device JSON file");
  apps.run->add_option("--kernels", o->kernels, "Kernels to profile (default: the whole suite)")->delimiter(',');
  apps.run->add_option("--workload", o->run_workloads, "Profile the kernels (and sizes) of these workload specs");
  apps.run->add_option("--size", o->sizes, "NAME=SIZE: profile NAME at SIZE (repeatable)");
  apps.run->add_flag("--full", o->full, "Every TPC step instead of the sampled plan");
  apps.run->add_flag("--all-variants", o->all_variants, "Every block-size variant, not just the default");
  apps.run->add_option("--max-minutes", o->max_minutes, "Stop starting kernels after this long");
  apps.run->add_flag("--no-pressure", o->no_pressure,
                     "Skip timing the cache policies beside a streaming kernel (FEDCM's bypass filter then uses alone times)");
  apps.run->add_option("--reps", o->reps, "Timed repetitions per point (median)")->capture_default_str();

  apps.raise = profile->add_subcommand(
      "raise", "Measure RAISE's eight metrics and PBS's miss rates of every block-size variant with Nsight Compute (ncu)");
  apps.raise->alias("ncu");
  apps.raise->add_option("--workload", o->raise_workloads, "Profile the kernels (and sizes) of these workload specs");
  apps.raise->add_option("--kernels", o->kernels, "Suite kernels at their default sizes (default: the whole suite)")
      ->delimiter(',');
  apps.raise->add_option("--size", o->sizes, "NAME=SIZE: profile NAME at SIZE (repeatable)");
  apps.raise->add_option("--ncu", o->ncu, "The ncu executable")->capture_default_str();
  apps.raise->add_option("--work-dir", o->work_dir, "Where the job list and ncu's CSV go")->capture_default_str();
  apps.raise->add_option("--passes", o->passes, "ncu passes; each variant's metrics are their mean")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  apps.raise->add_option("--from-csv", o->raise_csv,
                         "Parse these CSVs of earlier ncu runs (one pass each, averaged) instead of running ncu");
  apps.raise->add_flag("--default-variants", o->default_variants,
                       "Only each kernel's default variant (the one PBS and its baselines launch)");
  apps.raise->add_option("--gpu", o->gpu, "The GPU name of the profile key (default: the CUDA device's)");
  apps.raise->add_option("--driver", o->driver, "The driver version of the profile key (default: the CUDA device's)");

  apps.aker = profile->add_subcommand(
      "aker", "Measure Aker's facet through a backend: classes, solo lines, fused versions over a sweep of load ratios");
  apps.aker->add_option("-b,--backend", o->backend, "Backend: cuda, or sim")->capture_default_str();
  apps.aker->add_option("-d,--device", o->device, "cuda: the GPU's index (default 0); sim: h100, h200 (default) or a device JSON file");
  apps.aker->add_option("--workload", o->aker_workloads,
                        "Its kernels, and as pairs every kernel with every BE tenant's kernel of another tenant");
  apps.aker->add_option("--kernels", o->kernels, "Suite kernels at their default sizes (or --size)")->delimiter(',');
  apps.aker->add_option("--pairs", o->aker_pairs, "K1+K2: fuse K2's sub-ranges beside all of K1")->delimiter(',');
  apps.aker->add_option("--ratios", o->aker_ratios, "Fused versions a:b to try per pair (default 1:1,2:1,1:2)")->delimiter(',');
  apps.aker->add_option("--variants", o->aker_variants,
                        "chosen: per ratio the block-size variants that leave several fused blocks per SM; default: the kernels' defaults")
      ->capture_default_str();
  apps.aker->add_option("--size", o->sizes, "NAME=SIZE (repeatable)");
  apps.aker->add_option("--reps", o->reps, "Timed repetitions per point (median)")->capture_default_str();

  apps.worker = profile->add_subcommand("raise-worker", "Internal: the program ncu profiles");
  apps.worker->group("");  // hidden
  apps.worker->add_option("--jobs", o->worker_jobs, "Job list")->required();

  apps.show = profile->add_subcommand("show", "List stored profiles, tab-separated (sessions on stderr)");
  apps.show->add_flag("--facets", o->facets, "List the policies' facets (RAISE's metrics, ...) instead");
  apps.exporter = profile->add_subcommand("export", "Write every stored profile to a JSON file");
  apps.exporter->add_option("file", o->export_path, "JSON file")->required();
  apps.importer = profile->add_subcommand("import", "Add the profiles of a JSON export to the store");
  apps.importer->add_option("file", o->import_path, "JSON file")->required();

  return {profile, [o, apps](const Config& config) { return run_profile(*o, apps, config); }};
}

}  // namespace concord::cli
