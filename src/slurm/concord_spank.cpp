// concord_spank.so: the Slurm SPANK plugin that makes a job step a Concord tenant (docs/cluster.md).
//
// It adds --concord-class=lc|be, --concord-target-ms=MS, --concord-weight=N and --concord-memory=SIZE
// (the GPU memory an lc job reserves, or a be job's own limit) to sbatch, srun and salloc. A job that gives none of them is untouched. For one that does, the values are checked
// at submission by the interception library's own parser (intercept::parse_config, so what Slurm
// accepts is exactly what the library accepts) and a bad one refuses the submission, naming the
// option; on the node, each step's tasks get LD_PRELOAD with the interception library and the
// CONCORD_* variables: the class, target and weight, the name "slurm-<job>.<step>" and the node
// daemon's socket. The tenant's uid is the job's user (the daemon asks the kernel), and its GPU the
// one the job's GRES gives it (CUDA_VISIBLE_DEVICES, set by Slurm): the library names it by PCI bus
// id when it registers.
//
// LC is a privilege the node daemon grants (docs/daemon.md, "Security"). For a step of an lc job
// the plugin asks the cluster's policy, as root in slurmstepd: the job's partition and QOS as
// slurmctld has them, against the lists in plugstack.conf. A job that passes gets LC for the
// step's processes: slurmstepd holds a GrantLc on the daemon's socket (for the job's user and the
// processes below it) for the step's life. Any other lc job asks the daemon as its user does.
//
// plugstack.conf arguments: socket=PATH (default /run/concord/concordd.sock), preload=PATH (default
// /usr/lib/libconcord_intercept.so, where the Debian package installs it), lc_partitions=A,B and
// lc_qos=X,Y (the partitions and QOS whose jobs may be latency-critical; none by default).
// Slurm's headers declare the plugin's entry points without C++ linkage guards.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "intercept/config.h"
#include "ipc/control_socket.h"

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
  std::optional<std::string> cls, target_ms, weight, memory;
  bool any() const { return cls || target_ms || weight || memory; }
};
JobOptions given;
std::string socket_path = "/run/concord/concordd.sock";
std::string preload = "/usr/lib/libconcord_intercept.so";
std::vector<std::string> lc_partitions, lc_qos;
// The step's grant of LC on the daemon's socket, held by slurmstepd until the step ends.
std::optional<concord::ipc::ControlClient> lc_grant;

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(',', at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

bool listed(const std::vector<std::string>& list, const std::string& name) {
  return !name.empty() && std::find(list.begin(), list.end(), name) != list.end();
}

// Why the cluster's policy does not make `job` latency-critical (nullopt: it does): its partition
// and QOS as slurmctld has them, against lc_partitions and lc_qos.
std::optional<std::string> lc_policy_refusal(uint32_t job) {
  if (lc_partitions.empty() && lc_qos.empty()) return "plugstack.conf lists no lc_partitions or lc_qos";
  job_info_msg_t* info = nullptr;
  if (slurm_load_job(&info, job, SHOW_DETAIL) != SLURM_SUCCESS || info == nullptr || info->record_count < 1) {
    if (info != nullptr) slurm_free_job_info_msg(info);
    return "slurmctld did not give the job's record";
  }
  const std::string partition = info->job_array[0].partition ? info->job_array[0].partition : "";
  const std::string qos = info->job_array[0].qos ? info->job_array[0].qos : "";
  slurm_free_job_info_msg(info);
  if (listed(lc_partitions, partition) || listed(lc_qos, qos)) return std::nullopt;
  return "partition '" + partition + "' is not in lc_partitions and QOS '" + qos + "' not in lc_qos";
}

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
int take_memory(int, const char* arg, int) {
  given.memory = arg ? arg : "";
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
    {const_cast<char*>("concord-memory"), const_cast<char*>("SIZE"),
     const_cast<char*>("Concord: GPU memory (8G, 512M): what an lc job reserves on its GPU (refused when it does not fit), or a be "
                       "job's own limit (the daemon may give less)"),
     1, 0, take_memory},
};

// The CONCORD_* variables of the job's options (and `name`, `socket`).
std::map<std::string, std::string> variables(const std::string& name) {
  std::map<std::string, std::string> env;
  env["CONCORD_CLASS"] = given.cls.value_or("be");
  if (given.target_ms) env["CONCORD_TARGET_MS"] = *given.target_ms;
  if (given.weight) env["CONCORD_WEIGHT"] = *given.weight;
  // An lc job reserves its memory, a be job limits itself.
  if (given.memory) env[given.cls == std::optional<std::string>("lc") ? "CONCORD_MEMORY_RESERVE" : "CONCORD_MEMORY_LIMIT"] = *given.memory;
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
                                    std::pair{"CONCORD_WEIGHT", "--concord-weight"}, std::pair{"CONCORD_MEMORY_RESERVE", "--concord-memory"},
                                    std::pair{"CONCORD_MEMORY_LIMIT", "--concord-memory"}}) {
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

// On the node (slurmstepd, as root, before the step's tasks are forked): an lc job the cluster's
// policy admits gets its grant.
void grant_lc(spank_t sp) {
  uint32_t job = 0;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) return;
  const std::string name = step_name(sp);
  if (const std::optional<std::string> why = lc_policy_refusal(job)) {
    slurm_info("concord: %s asks for lc and gets no grant: %s (the daemon decides by its own list)", name.c_str(), why->c_str());
    return;
  }
  concord::Result<concord::ipc::ControlClient> c = concord::ipc::ControlClient::connect(socket_path);
  if (!c.is_ok()) {
    slurm_info("concord: %s: no grant of lc: %s", name.c_str(), c.status().message().c_str());
    return;
  }
  concord::Result<concord::ipc::Message> r = c->call(concord::ipc::GrantLc{static_cast<uint32_t>(uid), name}, std::chrono::seconds(2));
  if (!r.is_ok() || !std::holds_alternative<concord::ipc::Ack>(*r)) {
    const std::string why = !r.is_ok() ? r.status().message()
                            : std::holds_alternative<concord::ipc::ErrorReply>(*r) ? std::get<concord::ipc::ErrorReply>(*r).message
                                                                                   : "an unexpected reply";
    slurm_info("concord: %s: the daemon refused the grant of lc: %s", name.c_str(), why.c_str());
    return;
  }
  lc_grant.emplace(std::move(*c));
  slurm_info("concord: %s may register lc tenants (by the cluster's policy)", name.c_str());
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
    } else if (arg.rfind("lc_partitions=", 0) == 0) {
      lc_partitions = comma_list(arg.substr(14));
    } else if (arg.rfind("lc_qos=", 0) == 0) {
      lc_qos = comma_list(arg.substr(7));
    } else {
      slurm_error("concord: plugstack.conf: unknown argument '%s' (socket=PATH, preload=PATH, lc_partitions=A,B, lc_qos=X,Y)",
                  arg.c_str());
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
  if (where == S_CTX_REMOTE) {
    if (given.cls == std::optional<std::string>("lc")) grant_lc(sp);
    return 0;
  }
  if (where != S_CTX_LOCAL && where != S_CTX_ALLOCATOR) return 0;
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
