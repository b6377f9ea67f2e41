// `concord doctor`: checks a node for what Concord needs (the driver, MPS, concordd's socket and
// daemon, the interception library on a test program's launches, a running process, Slurm's
// plugin line) and prints one line per check; a problem comes with the command that fixes it.
// Exit 0 when every check passed, 1 when one found a problem, 2 for a bad command line.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/doctor.h"
#include "concord/suggest.h"

namespace concord::cli {
namespace {

namespace fs = std::filesystem;
using doctor::Finding;
using doctor::Node;
using doctor::Verdict;

// The checks, in the order they run: a later one reads what an earlier one learnt (Node).
struct Check {
  const char* name;
  Finding (*run)(Node&);
};
constexpr Check kChecks[] = {
    {"driver", doctor::check_driver},   {"library", doctor::check_library}, {"mps", doctor::check_mps},
    {"socket", doctor::check_socket},   {"daemon", doctor::check_daemon},   {"launches", doctor::check_launches},
    {"process", doctor::check_process}, {"slurm", doctor::check_slurm},
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("concord") : p.string();
}

// The library an installed `concord` has beside it (bin/../lib, as the package and `cmake
// --install` put them), else the build tree's when this is the build tree's binary.
std::pair<std::string, bool> default_library(const std::string& self) {
  const fs::path installed = fs::path(self).parent_path().parent_path() / "lib" / "libconcord_intercept.so";
#ifdef CONCORD_BUILD_INTERCEPT_LIBRARY
  std::error_code ec;
  if (!fs::exists(installed, ec) && fs::equivalent(fs::path(self).parent_path(), CONCORD_BUILD_BIN_DIR, ec)) {
    return {CONCORD_BUILD_INTERCEPT_LIBRARY, false};
  }
#endif
  return {installed.string(), true};
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void print(const char* name, const Finding& f) {
  const char* verdict = f.verdict == Verdict::ok ? "ok" : f.verdict == Verdict::problem ? "PROBLEM" : "skip";
  std::cout << fmt::format("{:<8} {:<9} {}\n", verdict, name, escape_control(f.what));
  if (f.verdict == Verdict::problem) std::cout << fmt::format("{:<8} {:<9} fix: {}\n", "", "", escape_control(f.fix));
}

}  // namespace

Subcommand add_doctor_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "doctor", "Check this node for Concord: driver, MPS, concordd, the interception library; each problem with its fix");
  struct Args {
    doctor::Where where;
    std::string test_program;
    int pid = 0;
    bool probe = false;
  };
  auto args = std::make_shared<Args>();
  doctor::Where& w = args->where;
  w.socket = default_socket_path();
  w.libcuda = "libcuda.so.1";
  w.self = self_path();
  std::tie(w.library, w.library_installed) = default_library(w.self);
  w.library = env_or("CONCORD_INTERCEPT_LIB", w.library);
  w.mps_pipe_dir = env_or("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  w.proc_root = "/proc";
  w.driver_root = "/proc/driver/nvidia";
  w.slurm_conf = env_or("SLURM_CONF", "/etc/slurm/slurm.conf");
  app->add_option("--socket", w.socket, "concordd's control socket (default: $CONCORD_SOCKET or /run/concord/concordd.sock)");
  app->add_option("--metrics-socket", w.metrics_socket,
                  "concordd's metrics socket, for its policy and GPUs (default: the one its command line names)");
  app->add_option("--libcuda", w.libcuda, "The driver library to open: a name the loader finds or a path")->capture_default_str();
  app->add_option("--library", w.library,
                  "The interception library (default: $CONCORD_INTERCEPT_LIB, else lib/libconcord_intercept.so beside bin/)");
  app->add_option("--mps-pipe-dir", w.mps_pipe_dir, "MPS's pipe directory (default: $CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps)");
  app->add_option("--proc-root", w.proc_root, "Where processes are read (the MPS daemons, --pid, concordd's command line)")
      ->capture_default_str();
  app->add_option("--driver-root", w.driver_root, "Where the NVIDIA driver's files are (its release, its GPUs)")->capture_default_str();
  app->add_option("--test-program", args->test_program,
                  "A CUDA program to run under the library, its words split at spaces (default: doctor's own probe, a few "
                  "empty kernels through the driver API)");
  app->add_option("--pid", args->pid, "Also check that this running process preloaded the library");
  app->add_option("--slurm-conf", w.slurm_conf,
                  "slurm.conf, beside which plugstack.conf is read (default: $SLURM_CONF or /etc/slurm/slurm.conf)");
  // The probe is what doctor runs under the library by default; not for people.
  app->add_flag("--probe", args->probe, "Run the launch probe (doctor runs it as its test program)")->group("");
  return {app, [app, args](const Config&) {
            doctor::Where where = args->where;
            if (args->probe) return doctor::run_probe(where.libcuda);
            for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--socket", &where.socket},
                                              {"--libcuda", &where.libcuda},
                                              {"--library", &where.library},
                                              {"--mps-pipe-dir", &where.mps_pipe_dir},
                                              {"--proc-root", &where.proc_root},
                                              {"--slurm-conf", &where.slurm_conf}}) {
              if (value->empty()) return usage_error(std::string(flag) + " is empty");
            }
            if (app->count("--test-program") > 0) {
              where.test_program = split_words(args->test_program);
              if (where.test_program.empty()) return usage_error("--test-program is empty");
            }
            if (app->count("--pid") > 0) {
              if (args->pid <= 0) return usage_error(fmt::format("--pid {}: not a process id", args->pid));
              struct stat st{};
              const std::string dir = fmt::format("{}/{}", where.proc_root, args->pid);
              if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
                return usage_error(fmt::format("--pid {}: no such process (no {})", args->pid, dir));
              }
              where.pid = args->pid;
            }
            Node node;
            node.where = where;
            int problems = 0;
            for (const Check& c : kChecks) {
              if (c.run == doctor::check_process && !where.pid) continue;
              const Finding f = c.run(node);
              print(c.name, f);
              if (f.verdict == Verdict::problem) ++problems;
            }
            std::cout << (problems == 0 ? std::string("concord doctor: every check passed\n")
                                        : fmt::format("concord doctor: {} problem{}\n", problems, problems == 1 ? "" : "s"))
                      << std::flush;
            return problems == 0 ? kExitOk : kExitFailure;
          }};
}

}  // namespace concord::cli
