#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
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

Origin apply_setting(const CLI::App& app, const std::string& flag, const Config& config, const std::string& field,
                     std::string& target) {
  if (app.count(flag) > 0) return {flag};
  const Setting* s = config.find(field);
  if (s == nullptr) return {flag};
  target = s->value;
  return {s->origin};
}

std::string default_socket_path() {
  const char* env = std::getenv("CONCORD_SOCKET");
  return env != nullptr && *env != '\0' ? env : "/run/concord/concordd.sock";
}

std::optional<int> parse_device_index(const std::string& text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

void log_spec_warnings(const WorkloadCheck& check) {
  for (const SpecDiagnostic& d : check.diagnostics) {
    if (d.severity != SpecDiagnostic::Severity::warning) continue;
    spdlog::warn("{}:{}: field '{}': {}", d.file, d.line, d.field, d.reason);
  }
}

bool names_device_file(const std::string& name_or_file) {
  return std::filesystem::exists(name_or_file) || name_or_file.find('/') != std::string::npos || name_or_file.ends_with(".json");
}

Result<DeviceSpec> resolve_device(const std::string& name_or_file) {
  if (std::filesystem::exists(name_or_file)) return load_device_file(name_or_file);
  return builtin_device(name_or_file);
}

}  // namespace concord::cli
