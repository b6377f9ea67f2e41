// `concord doctor`: what it checks on a node and where it looks. Each check gives one finding:
// ok, a problem with the command that fixes it, or skipped with the reason. Every path a check
// reads comes from `Where`, which flags and environment variables fill, so tests can build broken
// nodes in a scratch folder.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace concord::cli::doctor {

enum class Verdict { ok, problem, skipped };

struct Finding {
  Verdict verdict = Verdict::ok;
  std::string what;  // what was found, or what is wrong and why
  std::string fix;   // with a problem: the command (or commands) that fix it
};
inline Finding ok(std::string what) { return {Verdict::ok, std::move(what), {}}; }
inline Finding problem(std::string what, std::string fix) { return {Verdict::problem, std::move(what), std::move(fix)}; }
inline Finding skipped(std::string why) { return {Verdict::skipped, std::move(why), {}}; }

// Where the checks look (docs/daemon.md, "Checking a node": each one's flag and default).
struct Where {
  std::string libcuda;                    // the driver library doctor opens: a name the loader finds, or a path
  std::string library;                    // libconcord_intercept.so
  bool library_installed = false;         // `library` is the installed one (beside this binary), not the build tree's
  std::string mps_pipe_dir;               // CUDA_MPS_PIPE_DIRECTORY
  std::string proc_root;                  // /proc: processes (the MPS daemons, --pid, concordd's command line)
  std::string driver_root;                // /proc/driver/nvidia: the driver's release and its GPUs
  std::string socket;                     // concordd's control socket
  std::string metrics_socket;             // its metrics socket; empty: the one its command line names, if any
  std::vector<std::string> test_program;  // empty: this binary's own probe (`concord doctor --probe`)
  std::string self;                       // this binary
  std::optional<int> pid;                 // a process to check for the preloaded library
  std::string slurm_conf;                 // slurm.conf; its folder holds plugstack.conf
};

// What earlier checks learnt that later ones need.
struct Node {
  Where where;
  bool driver_loads = false;  // libcuda opened
  bool library_present = false;
  bool socket_open = false;  // the caller connected to it
  bool daemon_answers = false;
  int daemon_pid = 0;  // the kernel's word for who listens on the socket (SO_PEERCRED); 0: unknown
};

// The CUDA version (1000 * major + 10 * minor) the interception library was built with; 0 where
// the build found no CUDA and has no library.
int library_cuda_version();
// "13.0" for 13000.
std::string cuda_version_text(int version);
// The user running doctor, by name where it has one ("alice", else "uid 1000").
std::string caller_name();
// `argument` quoted for a shell where it needs it.
std::string shell_quote(const std::string& argument);

Finding check_driver(Node& node);
Finding check_library(Node& node);
Finding check_mps(Node& node);
Finding check_socket(Node& node);
Finding check_daemon(Node& node);
Finding check_launches(Node& node);
Finding check_process(Node& node);  // --pid
Finding check_slurm(Node& node);

// The program doctor runs by default under the library: opens `libcuda`, launches a few empty
// kernels through the driver API (as the CUDA runtime does, through pointers it looked up) and
// exits 0, or 2 naming the call that failed.
int run_probe(const std::string& libcuda);

}  // namespace concord::cli::doctor
