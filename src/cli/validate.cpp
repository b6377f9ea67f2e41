// `concord validate SPEC...`: checks workload specs without running them, as `concord run` checks
// them; every file is checked and named, and the exit status is 1 when any failed.
#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "concord/experiment.h"
#include "concord/policy.h"
#include "concord/workload.h"

namespace concord::cli {

namespace {

struct ValidateOptions {
  std::vector<std::string> specs;
  std::string device = "h200";
};

int validate(const ValidateOptions& o) {
  auto device = resolve_device(o.device);
  if (!device) return names_device_file(o.device) ? fail(device.status()) : usage_error("--device: " + device.status().message());
  int status = kExitOk;
  for (const std::string& spec : o.specs) {
    const WorkloadCheck check = check_workload_file(spec, &*device);
    log_spec_warnings(check);
    if (!check.ok()) {
      status = fail(check.status());
      continue;
    }
    int64_t launches = 0;
    for (const auto& t : check.workload.tenants) launches += t.launches_per_request() * t.requests;
    // The policies that would refuse this workload up front (`run` says why), named here.
    const WorkloadShape shape = workload_shape(check.workload);
    std::string refusing, first_reason;
    for (const auto& e : builtin_policies().list()) {
      auto policy = builtin_policies().make(e.name, {});
      if (!policy) continue;
      if (Status a = (*policy)->admits(shape, *device); !a) {
        refusing += (refusing.empty() ? "" : ", ") + e.name;
        if (first_reason.empty()) first_reason = a.message();
      }
    }
    if (!refusing.empty()) spdlog::warn("{}: refused up front by {} with their defaults ({})", spec, refusing, first_reason);
    const double mib = static_cast<double>(estimated_record_bytes(check.workload, true)) / (1 << 20);
    std::cout << spec << ": ok (" << check.workload.tenants.size() << " tenants, " << launches << " launches; `run` needs about "
              << fmt::format("{:.0f}", std::ceil(mib)) << " MiB for its records)\n";
  }
  return status;
}

}  // namespace

Subcommand add_validate_command(CLI::App& parent) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app = parent.add_subcommand("validate", "Check workload specs; errors name file, line, field and reason");
  app->add_option("spec", o->specs, "Workload specs (YAML), one or more")->required();
  app->add_option("--device,-d", o->device,
                  "The device whose SMs each step's blocks must fit: h100, h200 or a device JSON file (as `run` uses it)")
      ->capture_default_str();
  return {app, [o](const Config&) { return validate(*o); }};
}

}  // namespace concord::cli
