// The `concord` command: global options (-q, -v, --version, --config), the subcommands (one file
// each), and the exit codes (0 success, 1 failure, 2 bad command line or configuration).
#include <CLI/CLI.hpp>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <new>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/build_info.h"
#include "cli/command.h"
#include "cli/config.h"
#include "concord/suggest.h"

#include "backend/registration.h"

namespace {

using concord::cli::Subcommand;

// Lets options of a parent (-q, -v, --db) follow a subcommand's name too.
void fall_through(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    sub->fallthrough();
    fall_through(*sub);
  }
}

// The option `name` ("--db", "-q") of `app` or of the apps it falls through to.
const CLI::Option* find_option(const CLI::App* app, const std::string& name) {
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* o = app->get_option_no_throw(name)) return o;
  }
  return nullptr;
}

// A word where a subcommand must stand that names none ("concord nosuch", "concord profile
// nosuch"), with the subcommands it could have named, or a flag that no subcommand on the way
// takes, with the nearest flag ("--polcy": did you mean '--policy'?). CLI11 alone reports these as
// a missing subcommand or an extra argument.
std::optional<std::string> unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* current = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return std::nullopt;
    if (arg.size() > 1 && arg[0] == '-') {
      if (arg.rfind("--", 0) != 0) continue;  // short flags
      const std::string flag = arg.substr(0, arg.find('='));
      const CLI::Option* o = find_option(current, flag);
      if (o == nullptr) {
        // A flag no app of the chain knows: named, with the nearest one it may have meant.
        std::vector<std::string> flags;
        for (const CLI::App* a = current; a != nullptr; a = a->get_parent()) {
          for (const CLI::Option* opt : a->get_options()) {
            for (const std::string& l : opt->get_lnames()) flags.push_back("--" + l);
          }
        }
        const std::string where = current == &app ? "" : " of '" + current->get_name() + "'";
        return "unknown flag '" + flag + "'" + where + concord::did_you_mean(flag, flags);
      }
      if (o->get_items_expected_min() > 0 && arg.find('=') == std::string::npos) ++i;  // its value
      continue;
    }
    const auto subs = current->get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); });
    if (subs.empty()) continue;
    const CLI::App* next = nullptr;
    for (const CLI::App* s : subs) {
      if (s->check_name(arg)) next = s;
    }
    if (next != nullptr) {
      current = next;
      continue;
    }
    if (!current->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) continue;
    std::string known;
    for (const CLI::App* s : subs) {
      if (s->get_group().empty()) continue;  // hidden
      known += (known.empty() ? "" : ", ") + s->get_name();
    }
    std::string where = current == &app ? "" : current->get_name() + " ";
    return "unknown subcommand '" + where + arg + "' (known: " + known + ")";
  }
  return std::nullopt;
}

// stderr, with control characters written out: a key or kernel name of a spec that holds an
// escape sequence cannot rewrite the user's terminal through a message that quotes it.
class EscapingStderrSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const std::string text = concord::escape_control(std::string_view(formatted.data(), formatted.size()));
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

// Diagnostics go to stderr through spdlog, so standard output carries only what a command
// prints as its result (tables, JSON).
void set_up_logging() {
  auto logger = std::make_shared<spdlog::logger>("concord", std::make_shared<EscapingStderrSink>());
  logger->set_pattern("concord: %l: %v");
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

// -q and -v win over the config's log_level (checked when the config was read).
void set_log_level(int verbosity, bool quiet, const concord::cli::Config& config) {
  spdlog::level::level_enum level = spdlog::level::info;
  if (const concord::cli::Setting* s = config.find("log_level")) level = spdlog::level::from_str(s->value);
  if (quiet) level = spdlog::level::err;
  else if (verbosity == 1) level = spdlog::level::debug;
  else if (verbosity >= 2) level = spdlog::level::trace;
  spdlog::set_level(level);
}

}  // namespace

int main(int argc, char** argv) {
  concord::register_builtin_backends();
  CLI::App app{"Concord: kernel-level GPU co-location runtime"};
  app.set_version_flag("--version", std::string("concord ") + concord::build_version() + " (commit " +
                                        concord::build_commit() + ")");
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "More diagnostics on stderr (-vv: everything)");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");
  std::string config_path;
  app.add_option("--config", config_path,
                 "Defaults from this YAML file instead of $XDG_CONFIG_HOME/concord/config.yaml (docs/running.md)");
  app.require_subcommand(1);

  const std::vector<Subcommand> subcommands = {
      concord::cli::add_run_command(app),      concord::cli::add_validate_command(app),
      concord::cli::add_policies_command(app), concord::cli::add_kernels_command(app),
      concord::cli::add_backends_command(app), concord::cli::add_profile_command(app),
      concord::cli::add_plot_command(app),      concord::cli::add_compare_command(app),
      concord::cli::add_top_command(app),      concord::cli::add_doctor_command(app),
  };
  fall_through(app);
  app.footer("Exit status: 0 success, 1 failure (message on stderr), 2 bad command line or configuration; a run "
             "stopped by SIGINT or SIGTERM writes what finished and exits with 128 + the signal (130, 143).");

  set_up_logging();
  if (auto unknown = unknown_subcommand(app, argc, argv)) {
    std::cerr << "concord: " << concord::escape_control(*unknown) << "\nRun `concord --help` for usage.\n";
    return concord::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "concord: " << concord::escape_control(e.what()) << "\nRun `concord --help` for usage.\n";
    return concord::cli::kExitUsage;
  }
  auto config = concord::cli::Config::load(config_path);
  if (!config) {
    spdlog::error("{}", config.status().message());
    return concord::cli::kExitUsage;
  }
  set_log_level(verbosity, quiet, *config);
  if (!config->path().empty()) spdlog::debug("config: {}", config->path());
  config->export_to_environment();
  for (const Subcommand& s : subcommands) {
    if (!s.app->parsed()) continue;
    // Whatever a command runs out of, it ends with a message and exit 1, never an abort.
    try {
      return s.run(*config);
    } catch (const std::bad_alloc&) {
      spdlog::error("out of memory: the command needed more than this process may have (its limits: ulimit -v, ulimit -d, "
                    "its cgroup's memory.max)");
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
    }
    return concord::cli::kExitFailure;
  }
  return concord::cli::kExitUsage;  // require_subcommand(1) makes this unreachable
}
