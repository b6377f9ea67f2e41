// concord_spank.so: the Slurm SPANK plugin that makes a job step a Concord tenant (docs/cluster.md).
//
// It adds --concord-class=lc|be, --concord-target-ms=MS and --concord-weight=N to sbatch, srun and
// salloc. A job that gives none of them is untouched. For one that does, the values are checked
// at submission by the interception library's own parser (intercept::parse_config, so what Slurm
// accepts is exactly what the library accepts) and a bad one refuses the submission, naming the
// option; on the node, each step's tasks get LD_PRELOAD with the interception library and the
// CONCORD_* variables: the class, target and weight, the name "slurm-<job>.<step>" and the node
// daemon's socket. The tenant's uid is the job's user (the daemon asks the kernel), and its GPU the
// one the job's GRES gives it (CUDA_VISIBLE_DEVICES, set by Slurm): the library names it by PCI bus
// id when it registers.
//
// plugstack.conf arguments: socket=PATH (default /run/concord/concordd.sock), preload=PATH (default
// /usr/lib/libconcord_intercept.so, where the Debian package installs it).
// Slurm's headers declare the plugin's entry points without C++ linkage guards.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "intercept/config.h"

// What the Slurm plugin loader looks for (SPANK_PLUGIN's definitions, with C linkage and visible:
// a const at namespace scope would otherwise be internal in C++).
extern "C" {
__attribute__((visibility("default"))) extern const char plugin_name[];
__attribute__((visibility("default"))) extern const char plugin_type[];
__attribute__((visibility("default"))) extern const unsigned int plugin_version;
__attribute__((visibility("default"))) extern const unsigned int spank_plugin_version;
const char plugin_name[] = "concord";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
const unsigned int spank_plugin_version = 1;
}

namespace {

// The options a job gave (each at most once; the latest wins, as Slurm's own options).
struct JobOptions {
  std::optional<std::string> cls, target_ms, weight;
  bool any() const { return cls || target_ms || weight; }
};
JobOptions given;
std::string socket_path = "/run/concord/concordd.sock";
std::string preload = "/usr/lib/libconcord_intercept.so";

int take_class(int, const char* arg, int) {
  given.cls = arg ? arg : "";
  return 0;
}
int take_target(int, const char* arg, int) {
  given.target_ms = arg ? arg : "";
  return 0;
}
int take_weight(int, const char* arg, int) {
  given.weight = arg ? arg : "";
  return 0;
}

spank_option options[] = {
    {const_cast<char*>("concord-class"), const_cast<char*>("lc|be"),
     const_cast<char*>("Run the job's CUDA processes as Concord tenants of this class: lc (latency-critical, needs "
                       "--concord-target-ms) or be (best-effort)"),
     1, 0, take_class},
    {const_cast<char*>("concord-target-ms"), const_cast<char*>("MS"),
     const_cast<char*>("Concord: an lc job's request latency target in milliseconds"), 1, 0, take_target},
    {const_cast<char*>("concord-weight"), const_cast<char*>("N"),
     const_cast<char*>("Concord: the tenant's weight among best-effort tenants (an integer, 1 by default)"), 1, 0, take_weight},
};

// The CONCORD_* variables of the job's options (and `name`, `socket`).
std::map<std::string, std::string> variables(const std::string& name) {
  std::map<std::string, std::string> env;
  env["CONCORD_CLASS"] = given.cls.value_or("be");
  if (given.target_ms) env["CONCORD_TARGET_MS"] = *given.target_ms;
  if (given.weight) env["CONCORD_WEIGHT"] = *given.weight;
  env["CONCORD_NAME"] = name;
  env["CONCORD_SOCKET"] = socket_path;
  return env;
}

// The interception library's verdict on the options, its variable names put back as the options.
std::optional<std::string> refusal(const std::string& name) {
  const std::map<std::string, std::string> env = variables(name);
  auto parsed = concord::intercept::parse_config(
      [&](const char* var) -> const char* {
        const auto it = env.find(var);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      name);
  if (parsed.is_ok()) return std::nullopt;
  std::string why = parsed.status().message();
  for (const auto& [var, option] : {std::pair{"CONCORD_CLASS", "--concord-class"}, std::pair{"CONCORD_TARGET_MS", "--concord-target-ms"},
                                    std::pair{"CONCORD_WEIGHT", "--concord-weight"}}) {
    for (size_t at = why.find(var); at != std::string::npos; at = why.find(var, at + std::strlen(option))) {
      why.replace(at, std::strlen(var), option);
    }
  }
  return why;
}

std::string step_name(spank_t sp) {
  uint32_t job = 0, step = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return "slurm-job";
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return "slurm-" + std::to_string(job);
  if (step == SLURM_BATCH_SCRIPT) return "slurm-" + std::to_string(job) + ".batch";
  if (step == SLURM_EXTERN_CONT) return "slurm-" + std::to_string(job) + ".extern";
  if (step == SLURM_INTERACTIVE_STEP) return "slurm-" + std::to_string(job) + ".interactive";
  return "slurm-" + std::to_string(job) + "." + std::to_string(step);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int slurm_spank_init(spank_t sp, int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    const std::string arg = av[i];
    if (arg.rfind("socket=", 0) == 0) {
      socket_path = arg.substr(7);
    } else if (arg.rfind("preload=", 0) == 0) {
      preload = arg.substr(8);
    } else {
      slurm_error("concord: plugstack.conf: unknown argument '%s' (socket=PATH, preload=PATH)", arg.c_str());
      return -1;
    }
  }
  for (spank_option& o : options) {
    if (spank_option_register(sp, &o) != ESPANK_SUCCESS) {
      slurm_error("concord: could not register --%s", o.name);
      return -1;
    }
  }
  return 0;
}

// After the options are parsed, where the job is submitted (sbatch, salloc, srun): a bad value
// refuses the submission.
__attribute__((visibility("default"))) int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (!given.any()) return 0;
  const spank_context_t where = spank_context();
  if (where != S_CTX_LOCAL && where != S_CTX_ALLOCATOR) return 0;
  (void)sp;
  if (const std::optional<std::string> why = refusal("slurm-job")) {
    slurm_error("concord: %s", why->c_str());
    return -1;
  }
  return 0;
}

// On the node, in the step's slurmstepd before its tasks start: the tasks' environment.
__attribute__((visibility("default"))) int slurm_spank_user_init(spank_t sp, int, char**) {
  if (!given.any() || !spank_remote(sp)) return 0;
  const std::string name = step_name(sp);
  if (const std::optional<std::string> why = refusal(name)) {
    slurm_error("concord: %s: %s", name.c_str(), why->c_str());
    return -1;
  }
  for (const auto& [var, value] : variables(name)) {
    if (spank_setenv(sp, var.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      slurm_error("concord: could not set %s for %s", var.c_str(), name.c_str());
      return -1;
    }
  }
  // The library goes first in LD_PRELOAD, once, before what the job preloads itself.
  std::string had;
  for (size_t size = 4096; size <= (size_t{1} << 20); size *= 16) {
    std::string buf(size, '\0');
    const spank_err_t got = spank_getenv(sp, "LD_PRELOAD", buf.data(), static_cast<int>(buf.size()));
    if (got == ESPANK_NOSPACE) continue;
    if (got == ESPANK_SUCCESS) had = buf.c_str();
    break;
  }
  // Entries are separated by colons or spaces (ld.so(8)).
  bool present = false;
  for (size_t at = 0; at <= had.size();) {
    const size_t end = std::min(had.find_first_of(": ", at), had.size());
    if (had.compare(at, end - at, preload) == 0 && end - at == preload.size()) present = true;
    at = end + 1;
  }
  const std::string value = present ? had : had.empty() ? preload : preload + ":" + had;
  if (spank_setenv(sp, "LD_PRELOAD", value.c_str(), 1) != ESPANK_SUCCESS) {
    slurm_error("concord: could not set LD_PRELOAD for %s", name.c_str());
    return -1;
  }
  slurm_info("concord: %s is a Concord %s tenant (socket %s)", name.c_str(), given.cls.value_or("be").c_str(), socket_path.c_str());
  return 0;
}

}  // extern "C"
