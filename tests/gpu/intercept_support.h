// Helpers of the interception library's GPU tests: where the library and the test program are, and
// running the program (plain or preloaded) as a child process with its own environment.
#pragma once

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace concord::testing {

struct InterceptPaths {
  std::string library;  // libconcord_intercept.so
  std::string app;      // concord_intercept_app
  std::string error;    // why the tests cannot run (empty when both exist)
};

// $CONCORD_INTERCEPT_LIB / $CONCORD_INTERCEPT_APP, else beside this test binary (the .gpu bundle:
// bin/ and lib/), else the build tree's.
inline InterceptPaths intercept_paths() {
  namespace fs = std::filesystem;
  InterceptPaths p;
  char self[4096] = {};
  fs::path dir;
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) dir = fs::path(self).parent_path();
  auto pick = [&](const char* env, const std::vector<fs::path>& candidates) -> std::string {
    if (const char* v = std::getenv(env)) return v;
    for (const fs::path& c : candidates) {
      if (!c.empty() && fs::exists(c)) return c.string();
    }
    return "";
  };
  p.library = pick("CONCORD_INTERCEPT_LIB", {dir / "../lib/libconcord_intercept.so", dir / "libconcord_intercept.so",
                                             fs::path(CONCORD_INTERCEPT_LIB_BUILT)});
  p.app = pick("CONCORD_INTERCEPT_APP", {dir / "concord_intercept_app", fs::path(CONCORD_INTERCEPT_APP_BUILT)});
  if (p.library.empty()) p.error = "libconcord_intercept.so not found (set CONCORD_INTERCEPT_LIB)";
  else if (p.app.empty()) p.error = "concord_intercept_app not found (set CONCORD_INTERCEPT_APP)";
  else p.library = fs::absolute(p.library).string();
  return p;
}

inline std::string scratch_path(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("concord_intercept_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::string& path) {
  const std::string text = read_text(path);
  if (text.empty()) return nlohmann::json{{"missing", path}};
  return nlohmann::json::parse(text, nullptr, false);
}

struct RunResult {
  int exit_code = -1;  // the exit status, or 128 + signal
  std::string stdout_text, stderr_text;
  nlohmann::json line;  // stdout's last JSON line ({} when none)
};

// Runs `program args...` with `env` added to this process's environment; waits for it.
inline RunResult run_program(const std::string& program, const std::vector<std::string>& args,
                             const std::vector<std::pair<std::string, std::string>>& env) {
  static int runs = 0;
  const std::string tag = std::to_string(++runs);
  const std::string out = scratch_path("run" + tag + ".out"), err = scratch_path("run" + tag + ".err");
  RunResult r;
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) std::_Exit(126);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    std::_Exit(127);
  }
  if (pid < 0) return r;
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.stdout_text = read_text(out);
  r.stderr_text = read_text(err);
  std::istringstream lines(r.stdout_text);
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty() && l[0] == '{') {
      auto j = nlohmann::json::parse(l, nullptr, false);
      if (!j.is_discarded()) r.line = j;
    }
  }
  if (!r.line.is_object()) r.line = nlohmann::json::object();
  if (!r.line.contains("ok")) r.line["ok"] = false;
  return r;
}

inline RunResult run_app(const InterceptPaths& paths, const std::string& mode,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         const std::vector<std::string>& more_args = {}) {
  std::vector<std::string> args = {mode};
  args.insert(args.end(), more_args.begin(), more_args.end());
  return run_program(paths.app, args, env);
}

}  // namespace concord::testing
