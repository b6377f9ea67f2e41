// The `concord` command: run a workload under a policy, list policies and kernels, validate specs.
#include <CLI/CLI.hpp>

#include <filesystem>
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
#endif

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

  auto workload = load_workload_file(spec);
  if (!workload) return fail(workload.status());
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
    out << experiment_json(*result, RunContext{spec, *pp, CONCORD_GIT_COMMIT, dev->name}) << "\n";
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
