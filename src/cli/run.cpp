// `concord run SPEC`: runs a workload under a policy and reports STP, ANTT, FI and latency;
// writes the results JSON and a Chrome/Perfetto trace on request.
#include <spdlog/spdlog.h>

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "concord/build_info.h"
#include "cli/command.h"
#include "cli/memory_room.h"
#include "cli/output_file.h"
#include "cli/stop_signals.h"
#include "concord/backend.h"
#include "concord/cli_parse.h"
#include "concord/experiment.h"
#include "concord/policy.h"
#include "concord/profile.h"
#include "concord/report.h"
#include "concord/trace.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"

namespace concord::cli {

namespace {

struct RunOptions {
  std::string spec;
  std::string policy = "streams";
  std::string backend = "sim";
  std::string device;  // sim: a device name or file (default h200); cuda: an index (default 0)
  uint64_t seed = 1;
  std::string out_path;
  std::string trace_path;
  std::vector<std::string> params;
  bool no_serial = false;
  bool no_hints = false;
  std::string submit = "request";
  std::string profiles_db;
  std::string time_limit = "600";  // seconds on the run's clock, for each run (the shared run, each reference run)
  double max_wall = 0;             // wall-clock seconds for the whole command (0: none)
  double max_memory_mb = 0;        // resident memory in MiB (0: none)
  const CLI::App* app = nullptr;   // which flags the command line gave
};

// The process's resident memory in bytes (/proc/self/statm), 0 when it cannot be read.
uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(in >> pages >> resident)) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Watches the limits of the whole command: a signal, --max-wall, --max-memory. Whichever comes
// first sets the stop flag the engine reads (EngineOptions::stop), so the run ends early the way a
// signal ends it, stops what runs and writes what finished; `why` says which limit it was.
//
// --max-wall counts the writing of the results too: the shared run's dispatches are counted as
// they start, and the run is stopped once the time so far plus the time to write what it holds
// (`write_s_per_dispatch` each) reaches the limit.
class Limits final : public EngineObserver {
 public:
  Limits(const StopSignals& signals, double max_wall_s, uint64_t max_bytes, double write_s_per_dispatch)
      : signals_(signals),
        max_wall_s_(max_wall_s),
        max_bytes_(max_bytes),
        write_s_per_dispatch_(write_s_per_dispatch),
        start_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] { watch(); });
  }
  void on_dispatch(const DispatchRecord&) override { dispatches_.fetch_add(1, std::memory_order_relaxed); }
  ~Limits() {
    done_ = true;
    thread_.join();
  }
  Limits(const Limits&) = delete;
  Limits& operator=(const Limits&) = delete;
  const std::atomic<bool>* flag() const { return &stop_; }
  // Empty while no limit was reached (a signal is the signals' to tell).
  std::string why() const {
    std::lock_guard lock(mu_);
    return why_;
  }

 private:
  void watch() {
    while (!done_ && !stop_) {
      std::string reason;
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (signals_.flag()->load()) {
        stop_ = true;
        return;
      }
      const double writing = static_cast<double>(dispatches_.load(std::memory_order_relaxed)) * write_s_per_dispatch_;
      if (max_wall_s_ > 0 && wall + writing >= max_wall_s_) {
        reason = fmt::format("the wall-clock limit (--max-wall {:g} s) was reached", max_wall_s_);
      } else if (max_bytes_ > 0) {
        if (const uint64_t rss = resident_bytes(); rss > max_bytes_) {
          reason = fmt::format("the memory limit (--max-memory {} MiB) was reached: {} MiB resident", max_bytes_ >> 20, rss >> 20);
        }
      }
      if (!reason.empty()) {
        {
          std::lock_guard lock(mu_);
          why_ = reason;
        }
        stop_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const StopSignals& signals_;
  double max_wall_s_;
  uint64_t max_bytes_;
  double write_s_per_dispatch_;
  std::atomic<uint64_t> dispatches_{0};
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false}, done_{false};
  mutable std::mutex mu_;
  std::string why_;
  std::thread thread_;
};

// --param key=value items; a key given twice is an error, not a silent override.
Result<PolicyParams> parse_params(const std::vector<std::string>& items) {
  PolicyParams p;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalid_argument("--param '" + item + "': expected key=value");
    }
    if (!p.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
      return Status::invalid_argument("--param '" + item.substr(0, eq) + "' given twice");
    }
  }
  return p;
}

int run(RunOptions o, const Config& config) {
  const Origin backend_from = apply_setting(*o.app, "--backend", config, "backend", o.backend);
  const Origin device_from = apply_setting(*o.app, "--device", config, "device", o.device);
  const Origin limit_from = apply_setting(*o.app, "--time-limit", config, "time_limit_s", o.time_limit);
  apply_setting(*o.app, "--profiles", config, "store", o.profiles_db);
  if (o.backend != "sim" && o.backend != "cuda") {
    return usage_error(backend_from.text + " '" + o.backend + "': not a backend (sim, cuda)");
  }
  const auto time_limit = parse_seconds(o.time_limit);
  if (!time_limit) return usage_error(limit_from.text + ": " + time_limit.status().message());
  auto params = parse_params(o.params);
  if (!params) return usage_error(params.status().message());
  // From here a signal stops the run and what finished is written; before the run, nothing is lost.
  StopSignals signals(spdlog::get_level() > spdlog::level::info);
  // A policy that does not exist, or parameters it does not take, are a bad command line (exit 2),
  // found before anything runs, with the registry's suggestions.
  auto policy = builtin_policies().make(o.policy, *params);
  if (!policy) return usage_error(policy.status().message());

  // The device: a GPU by index for the cuda backend, a device spec for the simulator.
  BackendConfig backend_config;
  backend_config.kind = o.backend;
  backend_config.seed = o.seed;
  const std::optional<int> index = parse_device_index(o.device);
  if (o.backend == "cuda") {
    if (!o.device.empty() && !index) {
      return usage_error(device_from.text + " '" + o.device +
                         "': the cuda backend takes a GPU index (0, 1, ... among the GPUs CUDA_VISIBLE_DEVICES leaves)");
    }
    backend_config.device_index = index.value_or(0);
  } else {
    if (index) {
      return usage_error(device_from.text + " '" + o.device + "': a GPU index needs --backend cuda; the " + o.backend +
                         " backend takes a device name (h100, h200) or a device JSON file");
    }
    auto dev = resolve_device(o.device.empty() ? "h200" : o.device);
    if (!dev) {
      const std::string message = device_from.text + ": " + dev.status().message();
      return names_device_file(o.device) ? fail(Status(dev.status().code(), message)) : usage_error(message);
    }
    backend_config.device = std::move(*dev);
  }

  // Outputs are opened before the run, so a bad path costs nothing.
  if (!o.out_path.empty() && o.out_path == o.trace_path && o.out_path != "-") {
    return usage_error("--out and --trace name the same file " + o.out_path);
  }
  if (o.out_path == "-" && o.trace_path == "-") return usage_error("--out and --trace cannot both be standard output");
  std::optional<OutputFile> out, trace;
  if (!o.out_path.empty()) {
    auto f = OutputFile::open(o.out_path, "--out");
    if (!f) return fail(f.status());
    out.emplace(std::move(*f));
  }
  if (!o.trace_path.empty()) {
    auto f = OutputFile::open(o.trace_path, "--trace");
    if (!f) return fail(f.status());
    trace.emplace(std::move(*f));
  }
  auto give_up = [&](const Status& s) {
    if (out) out->discard();
    if (trace) trace->discard();
    return fail(s);
  };

  // The device as the backend states it (a GPU's name, topology and versions), for the spec's
  // checks, the results and the trace's GPC tracks; this also fails early on a GPU index that
  // does not exist.
  DeviceSpec device;
  {
    auto probe = make_backend(backend_config);
    if (!probe) return give_up(probe.status());
    device = (*probe)->device();
  }
  spdlog::debug("device {}: {} SMs, {} GPCs (backend {})", device.name, device.sm_count, device.gpc_count(), o.backend);

  // The checks of `concord validate`, against this device.
  WorkloadCheck check = check_workload_file(o.spec, &device);
  log_spec_warnings(check);
  if (!check.ok()) return give_up(check.status());
  Workload& workload = check.workload;
  if (!o.profiles_db.empty()) {
    auto store = ProfileStore::open(o.profiles_db, /*read_only=*/true);
    if (!store) return give_up(store.status());
    auto n = attach_profiles(workload, **store);
    if (!n) return give_up(n.status());
    spdlog::info("profiles: measured curves for {} kernel steps from {}", *n, o.profiles_db);
  }

  // A policy that cannot run this workload says so now, not partway through the run.
  if (Status admitted = (*policy)->admits(workload_shape(workload), device); !admitted) {
    return give_up(Status(admitted.code(), o.spec + ": " + admitted.message()));
  }
  // A run whose records would not fit is refused before it starts, with what it would need: fit
  // --max-memory, and whatever is tighter of the machine's memory and the process's own limits
  // (RLIMIT_AS, RLIMIT_DATA, its cgroup's memory.max).
  const auto max_memory = static_cast<uint64_t>(o.max_memory_mb * 1024 * 1024);
  {
    const int64_t need = estimated_record_bytes(workload, !o.no_serial);
    std::optional<MemoryRoom> room = memory_room();
    if (max_memory > 0 && (!room || max_memory < room->bytes)) room = MemoryRoom{max_memory, fmt::format("--max-memory {} MiB", max_memory >> 20)};
    if (room && static_cast<uint64_t>(need) > room->bytes) {
      return give_up(Status::failed_precondition(fmt::format(
          "{}: the run needs about {} MiB for its records (about {} bytes per launch{}), more than {} allows ({} MiB); "
          "fewer requests or counts, --no-serial, or more memory",
          o.spec, need >> 20, kRecordBytesPerLaunch, o.no_serial ? "" : ", twice while the serial reference runs", room->what,
          room->bytes >> 20)));
    }
  }

  ExperimentConfig experiment;
  experiment.backend = backend_config;
  experiment.policy = o.policy;
  experiment.params = *params;
  experiment.seed = o.seed;
  experiment.compare_serial = !o.no_serial;
  experiment.source.hints = !o.no_hints;
  experiment.source.submit = o.submit == "launch" ? SpecSourceOptions::Submit::launch : SpecSourceOptions::Submit::request;
  experiment.time_limit = *time_limit;
  // Writing a dispatch and its launch to the results file took about 2.4 us on a 2-core CI-class
  // machine (the trace, built whole, about 10 us more); reserved with a margin.
  const double write_s = (o.out_path.empty() ? 0.0 : 3e-6) + (o.trace_path.empty() ? 0.0 : 12e-6);
  Limits limits(signals, o.max_wall, max_memory, write_s);
  experiment.stop = limits.flag();
  experiment.observer = &limits;
  ReferenceCache cache;
  spdlog::debug("running {} under {}, then each tenant alone{}", o.spec, o.policy, o.no_serial ? "" : " and under serial");
  ExperimentOutcome outcome = run_experiment_outcome(workload, experiment, cache);
  // A limit of the command ended it: said so, in place of the engine's "stopped as asked". An
  // error of its own (a backend's, a policy's) that ended the run is kept, the limit noted after it.
  if (!outcome.status && !limits.why().empty()) {
    if (outcome.status.code() == StatusCode::cancelled) {
      outcome.status = Status(StatusCode::deadline_exceeded, outcome.stage + ": " + limits.why() + "; what finished is written");
    } else {
      outcome.status = Status(outcome.status.code(), outcome.status.message() + " (" + limits.why() + " as well)");
    }
  }
  // Nothing ran (a backend or the policy could not be made): no results to keep.
  if (!outcome.ran) return give_up(outcome.status);

  // Standard output carries the summary unless JSON goes there. A run that ended early still
  // writes what finished, marked as such (`status` in the JSON).
  print_outcome(o.out_path == "-" || o.trace_path == "-" ? std::cerr : std::cout, outcome);
  const char* partial = outcome.status ? "" : " (partial: the run ended early)";
  Status written = Status::ok();
  if (out) {
    const RunContext context{o.spec, *params, build_version(), build_commit(), device};
    // Written as it is made: the launches and dispatches one at a time (docs/running.md, memory).
    write_experiment_json(outcome, context, [&](std::string_view piece) { (void)out->write(piece); });
    (void)out->write("\n");
    written = out->close();
    if (written) spdlog::info("results{}: {}", partial, o.out_path);
  }
  if (trace) {
    Status s = trace->write_and_close(chrome_trace_json(outcome.result.run, device, outcome.status, outcome.stage));
    if (s) spdlog::info("trace{}: {}", partial, o.trace_path);
    if (written) written = std::move(s);
    else fail(s);
  }
  if (!outcome.status) {
    fail(outcome.status);
    if (!written) fail(written);
    // Stopped by a signal: the shell's convention, 128 + the signal.
    return signals.signal() != 0 ? 128 + signals.signal() : kExitFailure;
  }
  return written ? kExitOk : fail(written);
}

}  // namespace

Subcommand add_run_command(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", "Run a workload spec under a policy and report STP, ANTT, FI, latency");
  app->add_option("spec", o->spec, "Workload spec (YAML)")->required();
  app->add_option("--policy,-p", o->policy, "Policy name (see `concord policies`)")->capture_default_str();
  app->add_option("--backend,-b", o->backend, "Backend: sim or cuda (see `concord backends`); config: backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"sim", "cuda"}));
  app->add_option("--device,-d", o->device,
                  "cuda: the GPU's index among those CUDA_VISIBLE_DEVICES leaves (default 0); "
                  "sim: h100, h200 (default) or a device JSON file; config: device");
  app->add_option("--seed,-s", o->seed, "Random seed (arrivals, random policies)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--out,-o", o->out_path, "Write the results JSON here (- for standard output)");
  app->add_option("--trace,-t", o->trace_path, "Write a Chrome/Perfetto trace JSON here (- for standard output)");
  app->add_option("--param", o->params, "Policy parameter key=value (repeatable, each key once)");
  app->add_flag("--no-serial", o->no_serial, "Skip the serial reference run (no speedup over serial)");
  app->add_flag("--no-hints", o->no_hints, "Give the policy no lookahead from the spec: the present only (docs/policies.md)");
  app->add_option("--submit", o->submit,
                  "How a request's kernels reach the engine: request (all at its arrival, as a program enqueues them) "
                  "or launch (each when the one before it ended)")
      ->check(CLI::IsMember({"request", "launch"}))
      ->capture_default_str();
  app->add_option("--profiles", o->profiles_db,
                  "Profile store: measured SM curves replace the simulator's rooflines; config: store");
  app->add_option("--time-limit", o->time_limit,
                  "Seconds of the run's clock after which each run (the shared run, each reference run) ends early, "
                  "stopping what it can and writing what finished; config: time_limit_s")
      ->capture_default_str();
  app->add_option("--max-wall", o->max_wall,
                  "Wall-clock seconds for the whole command (the shared run and the reference runs): past them the run ends "
                  "early and writes what finished (0: none)")
      ->check(CLI::Range(0.0, 1e9) & finite_number());
  app->add_option("--max-memory", o->max_memory_mb,
                  "Resident memory in MiB: past it the run ends early and writes what finished (0: none)")
      ->check(CLI::Range(0.0, 1e9) & finite_number());
  o->app = app;
  return {app, [o](const Config& config) { return run(*o, config); }};
}

}  // namespace concord::cli
