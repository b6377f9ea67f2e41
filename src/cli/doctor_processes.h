// What `concord doctor` reads about processes and users: /proc (under a root tests can replace)
// and the user and group databases.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace concord::cli::doctor {

struct Process {
  int pid = 0;
  uint32_t uid = 0;               // the real uid (status's Uid:)
  std::vector<std::string> argv;  // its command line (empty for a kernel thread, or where unreadable)
};

// A whole file, empty where it cannot be read.
std::string read_text(const std::string& path);
// Every process under `proc_root` whose command line can be read.
std::vector<Process> processes(const std::string& proc_root);
std::optional<Process> process(const std::string& proc_root, int pid);
// A variable of a process's environment (empty where it has none or it cannot be read).
std::string process_environment(const std::string& proc_root, int pid, const std::string& name);
// A process's command line for a shell, its arguments quoted where they need it.
std::string command_line(const Process& p);

std::string user_name(uid_t uid);
std::string group_name(gid_t gid);
// Whether the caller's process holds `gid` now (primary or supplementary).
bool caller_holds_group(gid_t gid);
// Whether the user database lists the caller as a member of `gid` (a member added after this
// login holds the group only in a new login).
bool caller_listed_in_group(gid_t gid);

}  // namespace concord::cli::doctor
