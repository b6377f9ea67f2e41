// `concord plot KIND INPUT... -o FIGURE`: figures from results files (latency CDFs, STP bars,
// simulator-against-GPU scatter, sweeps), drawn by plot.py with Debian's matplotlib. The script
// is looked for beside the installed binary (../share/concord/plot.py), then in the source tree
// the binary was built from.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"

namespace concord::cli {

namespace {

struct PlotOptions {
  std::string kind;
  std::vector<std::string> inputs;
  std::string out;
  std::string title;
  std::string metric = "headline";
  std::string python = "/usr/bin/python3";  // Debian's, which python3-matplotlib serves
  const CLI::App* app = nullptr;
};

Result<std::string> plot_script() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> candidates;
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "concord" / "plot.py");
  candidates.emplace_back(CONCORD_SOURCE_PLOT_SCRIPT);
  std::string tried;
  for (const auto& c : candidates) {
    if (std::filesystem::is_regular_file(c, ec)) return c.string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  return Status::not_found("plot: the plotting script is in none of " + tried + " (a broken install?)");
}

// Runs `argv` and waits for it; its exit status, or an error when it could not be started.
Result<int> run_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::io_error(std::string("plot: pipe: ") + std::strerror(errno));
  const pid_t child = fork();
  if (child < 0) return Status::io_error(std::string("plot: fork: ") + std::strerror(errno));
  if (child == 0) {
    close(pipe_fds[0]);
    execvp(args[0], args.data());
    const int err = errno;  // only reached when exec failed: tell the parent why
    (void)!write(pipe_fds[1], &err, sizeof err);
    _exit(127);
  }
  close(pipe_fds[1]);
  int exec_errno = 0;
  const bool exec_failed = read(pipe_fds[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return Status::io_error(std::string("plot: waitpid: ") + std::strerror(errno));
  }
  if (exec_failed) return Status::not_found("plot: cannot run " + argv[0] + ": " + std::strerror(exec_errno));
  if (WIFSIGNALED(status)) return Status::internal("plot: " + argv[0] + " died of signal " + std::to_string(WTERMSIG(status)));
  return WEXITSTATUS(status);
}

int plot(PlotOptions o, const Config& config) {
  const Origin python_from = apply_setting(*o.app, "--python", config, "python", o.python);
  auto script = plot_script();
  if (!script) return fail(script.status());
  std::vector<std::string> argv = {o.python, *script, o.kind};
  argv.insert(argv.end(), o.inputs.begin(), o.inputs.end());
  argv.insert(argv.end(), {"--out", o.out, "--metric", o.metric});
  if (!o.title.empty()) argv.insert(argv.end(), {"--title", o.title});
  spdlog::debug("plot: {} {} ({})", o.python, *script, python_from.text);
  auto rc = run_and_wait(argv);
  if (!rc) return fail(Status(rc.status().code(), rc.status().message() + " (" + python_from.text + ")"));
  if (*rc == 0) {
    spdlog::info("figure: {}", o.out);
    return kExitOk;
  }
  // The script has said what went wrong on stderr; its usage errors stay usage errors.
  return *rc == kExitUsage ? kExitUsage : kExitFailure;
}

}  // namespace

Subcommand add_plot_command(CLI::App& parent) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App* app = parent.add_subcommand(
      "plot", "Draw a figure (SVG, PNG or PDF by the extension) from results files, with matplotlib");
  app->add_option("kind", o->kind,
                  "latency: latency CDF of every LC tenant, a line per results file; stp: bars per workload and "
                  "policy; fidelity: simulator against GPU (bench/fidelity); sweep: the pair's SM split "
                  "(concord_gpu_bench), FEDCM's sigma (concord_fedcm_bench), RAISE's task count (concord_raise_bench)")
      ->required()
      ->check(CLI::IsMember({"latency", "stp", "fidelity", "sweep"}));
  app->add_option("inputs", o->inputs, "Results JSON files (.json or .json.gz), or ARCHIVE.tar.xz:PATTERN for members of an archive")
      ->required();
  app->add_option("--out,-o", o->out, "The figure file: .svg, .png or .pdf")->required();
  app->add_option("--title", o->title, "Title (default: what the figure shows and the device)");
  app->add_option("--metric", o->metric,
                  "stp: headline (each workload's: throughput over serial, closed loop; LC SLO attainment, open loop), "
                  "stp (co-run window), speedup (over serial) or whole-run (NP sum)")
      ->capture_default_str()
      ->check(CLI::IsMember({"headline", "stp", "speedup", "whole-run"}));
  app->add_option("--python", o->python, "Python 3 with matplotlib; config: python")->capture_default_str();
  o->app = app;
  return {app, [o](const Config& config) { return plot(*o, config); }};
}

}  // namespace concord::cli
