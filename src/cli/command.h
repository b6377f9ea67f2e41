// What the `concord` subcommands share: exit codes, error reporting, and how a subcommand is
// registered (each lives in its own file and adds itself to the app through one add_* function).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "cli/config.h"
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

// A subcommand: its CLI11 app and what runs when the command line chose it, given the defaults
// of the config file and the environment (flags the command line gave win over them).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(const Config&)> run;
};

// Where a value came from, for messages: the flag ("--device") when the command line gave it,
// else the config file's line or the environment variable ("device from config.yaml:3").
struct Origin {
  std::string text;
};
// Sets `target` from `config`'s `field` unless `app`'s option `flag` was given; returns where the
// value came from (the flag's name when it was given or nothing set it).
Origin apply_setting(const CLI::App& app, const std::string& flag, const Config& config, const std::string& field,
                     std::string& target);

Subcommand add_run_command(CLI::App& parent);
Subcommand add_validate_command(CLI::App& parent);
Subcommand add_policies_command(CLI::App& parent);
Subcommand add_kernels_command(CLI::App& parent);
Subcommand add_backends_command(CLI::App& parent);
Subcommand add_profile_command(CLI::App& parent);
Subcommand add_plot_command(CLI::App& parent);
Subcommand add_compare_command(CLI::App& parent);
Subcommand add_top_command(CLI::App& parent);
Subcommand add_doctor_command(CLI::App& parent);

// concordd's control socket as the node's clients find it: $CONCORD_SOCKET, else the daemon's default
// (/run/concord/concordd.sock).
std::string default_socket_path();

// A GPU index ("0", "1"): none when `text` is not a non-negative decimal integer.
std::optional<int> parse_device_index(const std::string& text);
// Logs the warnings of a spec check ("file:line: field 'f': reason") on stderr.
void log_spec_warnings(const WorkloadCheck& check);

// A built-in device name (h100, h200) or a device JSON file.
Result<DeviceSpec> resolve_device(const std::string& name_or_file);
// Whether `--device` names a file (it exists, or looks like a path or a .json name): a device that
// resolve_device() refuses is then a failure of that file (exit 1), else a bad name (exit 2).
bool names_device_file(const std::string& name_or_file);

}  // namespace concord::cli
