// What the `concord` subcommands share: exit codes, error reporting, and how a subcommand is
// registered (each lives in its own file and adds itself to the app through one add_* function).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "concord/device.h"
#include "concord/status.h"
#include "concord/workload.h"

namespace concord::cli {

// Exit status: 0 success, 1 a failure while doing the work, 2 a bad command line.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Logs `status` as an error on stderr and returns kExitFailure.
int fail(const Status& status);
// Logs a usage problem found after parsing (a value CLI11 cannot check) and returns kExitUsage.
int usage_error(const std::string& message);

// A subcommand: its CLI11 app and what runs when the command line chose it.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_run_command(CLI::App& parent);
Subcommand add_validate_command(CLI::App& parent);
Subcommand add_policies_command(CLI::App& parent);
Subcommand add_kernels_command(CLI::App& parent);
Subcommand add_backends_command(CLI::App& parent);
Subcommand add_profile_command(CLI::App& parent);

// Logs the warnings of a spec check ("file:line: field 'f': reason") on stderr.
void log_spec_warnings(const WorkloadCheck& check);

// A built-in device name (h100, h200) or a device JSON file.
Result<DeviceSpec> resolve_device(const std::string& name_or_file);

}  // namespace concord::cli
