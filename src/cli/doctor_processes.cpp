#include "cli/doctor_processes.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/doctor.h"

namespace concord::cli::doctor {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::optional<Process> process(const std::string& proc_root, int pid) {
  const std::string dir = fmt::format("{}/{}", proc_root, pid);
  Process p;
  p.pid = pid;
  const std::string cmdline = read_text(dir + "/cmdline");
  for (size_t at = 0; at < cmdline.size();) {
    const size_t end = cmdline.find('\0', at);
    p.argv.push_back(cmdline.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  std::istringstream status(read_text(dir + "/status"));
  bool have_uid = false;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Uid:", 0) == 0) {
      p.uid = static_cast<uint32_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
      have_uid = true;
    }
  }
  if (!have_uid && p.argv.empty()) return std::nullopt;
  return p;
}

std::vector<Process> processes(const std::string& proc_root) {
  std::vector<Process> out;
  DIR* d = ::opendir(proc_root.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (std::optional<Process> p = process(proc_root, std::atoi(name.c_str())); p && !p->argv.empty()) out.push_back(*p);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Process& a, const Process& b) { return a.pid < b.pid; });
  return out;
}

std::string process_environment(const std::string& proc_root, int pid, const std::string& name) {
  const std::string env = read_text(fmt::format("{}/{}/environ", proc_root, pid));
  const std::string key = name + "=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, key.size(), key) == 0) return env.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return {};
}

std::string command_line(const Process& p) {
  std::string out;
  for (const std::string& a : p.argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

std::string user_name(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return pw != nullptr ? std::string(pw->pw_name) : fmt::format("uid {}", uid);
}

std::string group_name(gid_t gid) {
  const group* gr = ::getgrgid(gid);
  return gr != nullptr ? std::string(gr->gr_name) : fmt::format("gid {}", gid);
}

std::string caller_name() { return user_name(::getuid()); }

bool caller_holds_group(gid_t gid) {
  if (::getegid() == gid) return true;
  const int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(static_cast<size_t>(std::max(n, 0)));
  if (n > 0 && ::getgroups(n, groups.data()) == n) return std::find(groups.begin(), groups.end(), gid) != groups.end();
  return false;
}

bool caller_listed_in_group(gid_t gid) {
  const passwd* pw = ::getpwuid(::getuid());
  if (pw == nullptr) return false;
  if (pw->pw_gid == gid) return true;
  const std::string me = pw->pw_name;
  const group* gr = ::getgrgid(gid);
  if (gr == nullptr) return false;
  for (char** m = gr->gr_mem; m != nullptr && *m != nullptr; ++m) {
    if (me == *m) return true;
  }
  return false;
}

}  // namespace concord::cli::doctor
