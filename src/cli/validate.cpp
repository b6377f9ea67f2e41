// `concord validate SPEC`: checks a workload spec without running it, as `concord run` checks it.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/command.h"
#include "concord/workload.h"

namespace concord::cli {

namespace {

struct ValidateOptions {
  std::string spec;
  std::string device = "h200";
};

int validate(const ValidateOptions& o) {
  auto device = resolve_device(o.device);
  if (!device) return fail(device.status());
  const WorkloadCheck check = check_workload_file(o.spec, &*device);
  log_spec_warnings(check);
  if (!check.ok()) return fail(check.status());
  int64_t launches = 0;
  for (const auto& t : check.workload.tenants) launches += t.launches_per_request() * t.requests;
  std::cout << o.spec << ": ok (" << check.workload.tenants.size() << " tenants, " << launches << " launches)\n";
  return kExitOk;
}

}  // namespace

Subcommand add_validate_command(CLI::App& parent) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app = parent.add_subcommand("validate", "Check a workload spec; errors name file, line, field and reason");
  app->add_option("spec", o->spec, "Workload spec (YAML)")->required();
  app->add_option("--device,-d", o->device,
                  "The device whose SMs each step's blocks must fit: h100, h200 or a device JSON file (as `run` uses it)")
      ->capture_default_str();
  return {app, [o](const Config&) { return validate(*o); }};
}

}  // namespace concord::cli
