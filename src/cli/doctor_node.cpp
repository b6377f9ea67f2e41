// `concord doctor`'s checks of the node itself: the NVIDIA driver and the CUDA version it
// supports, the interception library's file, MPS's control daemon and its pipe, and Slurm's
// plugin line. Processes are read from Where::proc_root (doctor_processes.cpp).
#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/doctor.h"
#include "cli/doctor_processes.h"
#include "concord/build_info.h"

namespace concord::cli::doctor {
namespace {

namespace fs = std::filesystem;

// The driver's release from its version file ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
// 580.65.06 ..."); empty where there is none (no driver, a container, the stand-in).
std::string driver_release(const std::string& driver_root) {
  const std::string text = read_text(driver_root + "/version");
  const size_t at = text.find("Kernel Module");
  if (at == std::string::npos) return {};
  std::string release;
  for (size_t i = at + 13; i < text.size() && text[i] != '\n'; ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      if (!release.empty()) break;
    } else {
      release += text[i];
    }
  }
  return release;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A plugstack file's lines naming the plugin, and those that would if they were not comments.
struct PluginLines {
  std::string file, line;      // the first live line naming concord_spank.so
  std::string commented_file;  // a file where such a line is commented out
  std::vector<std::string> read;
};

void scan_plugstack(const std::string& path, int depth, PluginLines& out) {
  if (depth > 4) return;
  std::ifstream in(path);
  if (!in) return;
  out.read.push_back(path);
  for (std::string raw; std::getline(in, raw);) {
    const size_t hash = raw.find('#');
    const std::string live = trim(hash == std::string::npos ? raw : raw.substr(0, hash));
    if (live.empty()) {
      if (hash != std::string::npos && raw.find("concord_spank.so") != std::string::npos && out.commented_file.empty()) {
        out.commented_file = path;
      }
      continue;
    }
    std::istringstream words(live);
    std::string first, second;
    words >> first >> second;
    if (first == "include") {
      glob_t g{};
      if (::glob(second.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) scan_plugstack(g.gl_pathv[i], depth + 1, out);
      }
      ::globfree(&g);
    } else if ((first == "required" || first == "optional") && fs::path(second).filename() == "concord_spank.so" &&
               out.file.empty()) {
      out.file = path;
      out.line = live;
    }
  }
}

}  // namespace

int library_cuda_version() { return CONCORD_INTERCEPT_CUDA_VERSION; }

std::string cuda_version_text(int version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

std::string shell_quote(const std::string& argument) {
  if (!argument.empty() && argument.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                               std::string::npos) {
    return argument;
  }
  std::string q = "'";
  for (char c : argument) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Finding check_driver(Node& node) {
  const Where& w = node.where;
  const int need = library_cuda_version();
  void* lib = ::dlopen(w.libcuda.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    return problem(fmt::format("cannot open {} ({}): no NVIDIA driver here for CUDA programs", w.libcuda, why ? why : "?"),
                   w.libcuda.find('/') == std::string::npos
                       ? "install the NVIDIA driver (Debian: apt-get install nvidia-driver libcuda1), or put the folder of its "
                         "libcuda.so.1 on LD_LIBRARY_PATH"
                       : "install the NVIDIA driver (Debian: apt-get install nvidia-driver libcuda1), or give --libcuda its "
                         "libcuda.so.1");
  }
  node.driver_loads = true;
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion"));
  int version = 0;
  const int rc = get_version != nullptr ? get_version(&version) : -1;
  ::dlclose(lib);
  if (rc != 0 || version <= 0) {
    return problem(fmt::format("{} answers no CUDA version (cuDriverGetVersion {}): not a working NVIDIA driver", w.libcuda,
                               get_version == nullptr ? "missing" : fmt::format("returned {}", rc)),
                   "reinstall the NVIDIA driver (Debian: apt-get install --reinstall libcuda1), then check nvidia-smi");
  }
  const std::string release = driver_release(w.driver_root);
  const std::string driver =
      fmt::format("{}{} supports CUDA {}", w.libcuda, release.empty() ? "" : " (driver " + release + ")", cuda_version_text(version));
  if (need == 0) return ok(driver + "; this build has no interception library (built without CUDA)");
  if (version < need) {
    return problem(fmt::format("{}; libconcord_intercept.so was built for CUDA {} and needs a driver for it: mismatched CUDA",
                               driver, cuda_version_text(need)),
                   fmt::format("upgrade the NVIDIA driver to one for CUDA {} or newer (nvidia-smi shows the CUDA version a "
                               "driver supports), or install a concord package built with CUDA {} or older",
                               cuda_version_text(need), cuda_version_text(version)));
  }
  return ok(fmt::format("{}; the library was built for CUDA {}", driver, cuda_version_text(need)));
}

Finding check_library(Node& node) {
  const Where& w = node.where;
  const std::string how_to_get =
      library_cuda_version() == 0 ? "this build has no library: build Concord where nvcc is found (cmake -DCONCORD_CUDA=ON) and install its package"
      : w.library_installed
          ? fmt::format("reinstall the package: dpkg -i concord_{}_*.deb (or apt-get install --reinstall concord)", build_version())
          : "build it (cmake --build build --target concord_intercept), or give --library its path";
  struct stat st{};
  if (::stat(w.library.c_str(), &st) != 0) return problem(fmt::format("{} is missing: nothing to preload", w.library), how_to_get);
  if (!S_ISREG(st.st_mode)) return problem(fmt::format("{} is not a file", w.library), how_to_get);
  std::ifstream in(w.library, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4)) {
    return problem(fmt::format("{} cannot be read by {}", w.library, caller_name()), fmt::format("chmod a+r {}", shell_quote(w.library)));
  }
  if (std::string(magic, 4) != "\x7f" "ELF") return problem(fmt::format("{} is not a shared library (no ELF header)", w.library), how_to_get);
  node.library_present = true;
  return ok(library_cuda_version() == 0 ? w.library : fmt::format("{} (built for CUDA {})", w.library, cuda_version_text(library_cuda_version())));
}

Finding check_mps(Node& node) {
  const Where& w = node.where;
  const std::string control = w.mps_pipe_dir + "/control";
  const std::vector<Process> all = processes(w.proc_root);
  const Process* daemon = nullptr;
  std::vector<const Process*> servers;
  for (const Process& p : all) {
    if (p.argv.empty()) continue;
    const std::string name = fs::path(p.argv[0]).filename();
    if (name == "nvidia-cuda-mps-control" && daemon == nullptr) daemon = &p;
    if (name == "nvidia-cuda-mps-server") servers.push_back(&p);
  }
  const bool default_dir = w.mps_pipe_dir == "/tmp/nvidia-mps";
  const std::string env = default_dir ? "" : "CUDA_MPS_PIPE_DIRECTORY=" + shell_quote(w.mps_pipe_dir) + " ";
  const std::string start = env + "nvidia-cuda-mps-control -d";
  const std::string start_fix =
      fmt::format("{} (as root or the tenants' user; Debian's package: nvidia-cuda-mps){}", start,
                  default_dir ? "" : "; its clients need the same CUDA_MPS_PIPE_DIRECTORY");
  struct stat st{};
  const bool have_pipe = ::stat(control.c_str(), &st) == 0;
  if (daemon == nullptr) {
    if (have_pipe) {
      return problem(fmt::format("{} is left from an MPS control daemon that is not running: processes run without MPS, one "
                                 "at a time on the GPU",
                                 control),
                     start_fix);
    }
    return problem(fmt::format("no MPS control daemon (no nvidia-cuda-mps-control process, no {}): tenants' kernels would not "
                               "overlap",
                               control),
                   start_fix);
  }
  if (!have_pipe) {
    const std::string theirs = process_environment(w.proc_root, daemon->pid, "CUDA_MPS_PIPE_DIRECTORY");
    return problem(fmt::format("the MPS control daemon (pid {}) runs, but {} is not there: it uses another pipe directory{}",
                               daemon->pid, control, theirs.empty() ? "" : " (" + theirs + ")"),
                   theirs.empty() ? "export CUDA_MPS_PIPE_DIRECTORY=<the daemon's> (its /proc/PID/environ), or restart it: " + start
                                  : "export CUDA_MPS_PIPE_DIRECTORY=" + shell_quote(theirs) + " for the tenants and doctor");
  }
  // A named pipe in older MPS releases; a Unix socket under the MPS of CUDA 13 (seen on an H200,
  // driver 580.159.04).
  if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode)) {
    return problem(fmt::format("{} is neither a pipe nor a socket: not MPS's", control), fmt::format("echo quit | {}nvidia-cuda-mps-control; rm -f {}; {}", env,
                                                                               shell_quote(control), start));
  }
  if (::access(control.c_str(), W_OK) != 0) {
    return problem(fmt::format("{} may not open {} (owner {}, mode {:04o}): its CUDA processes run without MPS", caller_name(), control,
                               user_name(st.st_uid), st.st_mode & 07777),
                   fmt::format("start the MPS control daemon as {} or as root: echo quit | {}nvidia-cuda-mps-control; {}", caller_name(),
                               env, start));
  }
  std::string others;
  for (const Process* s : servers) {
    if (s->uid != ::getuid()) others += fmt::format("{}{} (pid {})", others.empty() ? "" : ", ", user_name(s->uid), s->pid);
  }
  if (!others.empty() && ::getuid() != 0) {
    return problem(fmt::format("an MPS server runs for {}: MPS serves one user per GPU at a time, so {}'s CUDA processes wait "
                               "until it ends",
                               others, caller_name()),
                   "run every tenant as one user (docs/daemon.md, \"One MPS user per GPU\"), or end that user's CUDA processes");
  }
  return ok(fmt::format("MPS control daemon pid {} (user {}), pipe {} (owner {}){}", daemon->pid, user_name(daemon->uid), control,
                        user_name(st.st_uid), others.empty() ? "" : "; servers of " + others));
}

Finding check_slurm(Node& node) {
  const Where& w = node.where;
  struct stat st{};
  if (::stat(w.slurm_conf.c_str(), &st) != 0) return skipped(fmt::format("Slurm is not configured here (no {})", w.slurm_conf));
  std::string plugstack = (fs::path(w.slurm_conf).parent_path() / "plugstack.conf").string();
  {
    std::ifstream conf(w.slurm_conf);
    for (std::string line; std::getline(conf, line);) {
      const std::string l = trim(line.substr(0, line.find('#')));
      if (lower(l).rfind("plugstackconfig=", 0) == 0) plugstack = trim(l.substr(16));
    }
  }
  const std::string conf_d = (fs::path(plugstack).parent_path() / "plugstack.conf.d").string();
  const std::string plugin_line = "optional " CONCORD_SPANK_PLUGIN_PATH " socket=/run/concord/concordd.sock";
  if (::stat(plugstack.c_str(), &st) != 0) {
    return problem(fmt::format("Slurm is configured ({}) but has no {}: slurmd loads no plugin, so jobs' --concord-* options do "
                               "not exist",
                               w.slurm_conf, plugstack),
                   fmt::format("echo 'include {}/*.conf' > {}, then uncomment the line in {}/concord.conf", conf_d, plugstack, conf_d));
  }
  PluginLines found;
  scan_plugstack(plugstack, 0, found);
  if (found.file.empty()) {
    if (!found.commented_file.empty()) {
      return problem(fmt::format("{} names concord_spank.so only in a comment (in {}): jobs do not become tenants", plugstack,
                                 found.commented_file),
                     fmt::format("sed -i 's/^# *\\(\\(optional\\|required\\) .*concord_spank\\.so\\)/\\1/' {}, then restart slurmd "
                                 "(systemctl restart slurmd)",
                                 shell_quote(found.commented_file)));
    }
    return problem(fmt::format("no line of {} names concord_spank.so: jobs do not become tenants", plugstack),
                   fmt::format("echo '{}' >> {}, then restart slurmd (systemctl restart slurmd)", plugin_line, plugstack));
  }
  std::istringstream words(found.line);
  std::string kind, plugin;
  words >> kind >> plugin;
  if (plugin.front() == '/' && ::stat(plugin.c_str(), &st) != 0) {
    return problem(fmt::format("{} names {}, which does not exist", found.file, plugin),
                   fmt::format("reinstall the package (apt-get install --reinstall concord), or correct the line in {}", found.file));
  }
  return ok(fmt::format("{} loads {} ({}, in {})", plugstack, plugin, kind, found.file));
}

}  // namespace concord::cli::doctor
