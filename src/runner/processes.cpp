#include "runner/processes.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

extern char** environ;

namespace concord {
namespace fs = std::filesystem;

double wall_clock_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    f.flush();
    if (!f) return Status::io_error(tmp + ": cannot write");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::io_error(path + ": cannot replace with " + tmp + ": " + ec.message());
  return Status::ok();
}

Status wait_at_barrier(const std::string& dir, int index, int n, double timeout_s) {
  {
    std::ofstream ready(dir + "/ready." + std::to_string(index));
    ready << getpid() << "\n";
    if (!ready) return Status::io_error("barrier " + dir + ": cannot write the ready file of peer " + std::to_string(index));
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    int ready = 0;
    for (const auto& e : fs::directory_iterator(dir)) ready += e.path().filename().string().rfind("ready.", 0) == 0;
    if (ready >= n) return Status::ok();
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      return Status::failed_precondition("barrier " + dir + ": " + std::to_string(ready) + " of " + std::to_string(n) +
                                         " peers after " + std::to_string(static_cast<int>(timeout_s)) + " s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Result<std::string> this_executable() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::io_error("cannot find this program (/proc/self/exe): " + ec.message());
  return self.string();
}

Result<pid_t> spawn_process(const std::vector<std::string>& args, const std::map<std::string, std::string>& set,
                            const std::vector<std::string>& unset) {
  if (args.empty()) return Status::invalid_argument("spawn_process: no program");
  std::vector<std::string> arg_s = args;
  std::vector<char*> argv;
  for (auto& a : arg_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool drop = set.count(name) != 0;
    for (const std::string& u : unset) drop = drop || u == name;
    if (!drop) env_s.push_back(entry);
  }
  for (const auto& [name, value] : set) env_s.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, arg_s[0].c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) return Status::internal("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

std::vector<bool> wait_processes(const std::vector<pid_t>& pids) {
  std::vector<bool> ok;
  for (pid_t pid : pids) {
    int status = 0;
    pid_t r = 0;
    do {
      r = waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    ok.push_back(r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return ok;
}

Result<std::unique_ptr<MpsDaemon>> MpsDaemon::start(const std::string& work_dir) {
  const std::string pipe = work_dir + "/mps-pipe", log = work_dir + "/mps-log";
  std::error_code ec;
  fs::create_directories(pipe, ec);
  if (!ec) fs::create_directories(log, ec);
  if (ec) return Status::io_error("MPS work directory " + work_dir + ": " + ec.message());
  setenv("CUDA_MPS_PIPE_DIRECTORY", pipe.c_str(), 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", log.c_str(), 1);
  if (std::system("nvidia-cuda-mps-control -d") != 0) {
    return Status::device_error("could not start the MPS daemon (nvidia-cuda-mps-control -d)");
  }
  return std::unique_ptr<MpsDaemon>(new MpsDaemon(pipe, log));
}

std::string MpsDaemon::quit(size_t max_bytes) {
  if (running_) {
    running_ = false;
    // The daemon answers on the pipe directory of this process's environment (set by start()).
    if (std::system("echo quit | nvidia-cuda-mps-control") != 0) return "(the MPS daemon did not answer 'quit')";
  }
  std::ifstream f(log_dir_ + "/control.log");
  std::string line, tail;
  while (std::getline(f, line)) tail += line + "\n";
  return tail.size() > max_bytes ? tail.substr(tail.size() - max_bytes) : tail;
}

MpsDaemon::~MpsDaemon() { (void)quit(); }

}  // namespace concord
