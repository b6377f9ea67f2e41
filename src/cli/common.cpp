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

Result<DeviceSpec> resolve_device(const std::string& name_or_file) {
  if (std::filesystem::exists(name_or_file)) return load_device_file(name_or_file);
  return builtin_device(name_or_file);
}

}  // namespace concord::cli
