#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/command.h"

namespace concord::cli {

int fail(const Status& status) {
  spdlog::error("{}", status.to_string());
  return kExitFailure;
}

int usage_error(const std::string& message) {
  spdlog::error("{} (run `concord --help` for usage)", message);
  return kExitUsage;
}

void log_spec_warnings(const WorkloadCheck& check) {
  for (const SpecDiagnostic& d : check.diagnostics) {
    if (d.severity != SpecDiagnostic::Severity::warning) continue;
    spdlog::warn("{}:{}: field '{}': {}", d.file, d.line, d.field, d.reason);
  }
}

Result<DeviceSpec> resolve_device(const std::string& name_or_file) {
  if (std::filesystem::exists(name_or_file)) return load_device_file(name_or_file);
  return builtin_device(name_or_file);
}

}  // namespace concord::cli
