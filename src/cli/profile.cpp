// `concord profile run|raise|show|export|import`: measures kernels and manages the profile store.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>

#include "cli/command.h"
#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/workload.h"

#include "concord/backend.h"
#include "profile/ncu.h"
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
  // raise-worker, export, import
  std::string worker_jobs, export_path, import_path;
};

struct ProfileApps {
  CLI::App* run = nullptr;
  CLI::App* raise = nullptr;
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
  auto stored = profile::profile_raise(**store, profile::ncu_jobs(kernels), n, std::cerr);
  if (!stored) return fail(stored.status());
  spdlog::info("stored RAISE metrics of {} kernel variants in {}", *stored, o.db);
  return kExitOk;
}

int profile_run(const ProfileOptions& o) {
  BackendConfig config{o.backend, {}, 1};
  if (o.backend == "sim") {
    auto dev = resolve_device(o.device.empty() ? "h200" : o.device);
    if (!dev) return usage_error(dev.status().message());
    config.device = *dev;
  } else if (!o.device.empty()) {
    auto index = parse_device_index(o.device);
    if (!index) return usage_error("--device '" + o.device + "': the cuda backend takes a GPU index");
    config.device_index = *index;
  }
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
  auto report = profile::profile_kernels(**store, config, p, std::cerr);
  if (!report) return fail(report.status());
  return kExitOk;
}

// Tab-separated, one stored profile per line after a header line (or, with --facets, one
// policy facet per line); problems and the store's sessions go to stderr, so standard output stays
// one table.
int profile_show(const ProfileStore& store, const std::string& db, bool facets) {
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
  }
  std::cout.flush();
  if (!std::cout) return fail(Status::io_error("profile show: writing to standard output failed"));
  auto sessions = store.sessions();
  if (!sessions) return fail(sessions.status());
  for (const auto& s : *sessions) {
    spdlog::info("{}: session {} on {} (driver {}): {} profiles in {} s", db, s.finished_at, s.gpu, s.driver, s.profiles,
                 s.seconds);
  }
  return kExitOk;
}

int run_profile(ProfileOptions o, const ProfileApps& apps, const Config& config) {
  CLI::App* profile = apps.run->get_parent();
  apply_setting(*profile, "--db", config, "store", o.db);
  if (apps.worker->parsed()) {
    if (Status s = profile::run_registered_ncu_worker(o.worker_jobs); !s) return fail(s);
    return kExitOk;
  }
  if (apps.raise->parsed()) return profile_raise(o);
  if (apps.run->parsed()) return profile_run(o);
  auto store = ProfileStore::open(o.db, /*read_only=*/!apps.importer->parsed());
  if (!store) return fail(store.status());
  if (apps.exporter->parsed()) {
    auto skipped = (*store)->export_json(o.export_path);
    if (!skipped) return fail(skipped.status());
    for (const auto& problem : *skipped) spdlog::warn("{}: skipped: {}", o.db, problem);
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
      "raise", "Measure RAISE's eight metrics of every block-size variant with Nsight Compute (ncu)");
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
  apps.raise->add_option("--gpu", o->gpu, "The GPU name of the profile key (default: the CUDA device's)");
  apps.raise->add_option("--driver", o->driver, "The driver version of the profile key (default: the CUDA device's)");

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
