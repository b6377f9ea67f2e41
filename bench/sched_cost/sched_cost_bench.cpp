// Per-launch decision cost of each policy: wall time inside the policy's hooks divided by the
// number of dispatches, on the simulator (so backend cost is excluded), for 4- and 12-tenant mixes.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/sim/sim_backend.h"
#include "concord/build_info.h"
#include "concord/report.h"
#include "concord/spec_source.h"
#include "concord/policy.h"
#include "concord/suite.h"
#include "concord/workload.h"

namespace {

using namespace concord;

// `with_lc`: every fourth tenant (the first among them) is latency-critical, its requests arriving
// at random (Poisson, 2,000 per second) with a 2 ms target, so that an LC/BE policy's LC path (its
// gate, its tidal split, its request estimates) is in the cost too.
Workload mix(int tenants, bool with_lc = false) {
  static const char* kernels[] = {"hotspot", "vector_add", "matmul", "srad", "cfd_flux", "gaussian",
                                  "hotspot3d", "kmeans", "bfs", "fft_stage", "pathfinder", "backprop"};
  Workload w;
  w.name = "sched-cost";
  for (int i = 0; i < tenants; ++i) {
    TenantSpec t;
    t.name = "t" + std::to_string(i);
    const char* name = kernels[i % 12];
    // Small sizes: many short launches, so the ready queue turns over often.
    auto k = make_suite_kernel(name, 1024);
    t.steps.push_back(KernelStep{*k, 4});
    t.requests = 25;
    if (with_lc && i % 4 == 0) {
      t.cls = TenantClass::latency_critical;
      t.latency_target = 2e-3;
      t.arrival.kind = ArrivalProcess::Kind::poisson;
      t.arrival.rate_per_s = 2000;
    }
    w.tenants.push_back(t);
  }
  return w;
}

void BM_DecisionCost(benchmark::State& state, const std::string& policy_name, bool with_lc) {
  const Workload w = mix(static_cast<int>(state.range(0)), with_lc);
  double policy_seconds = 0;
  double backend_seconds = 0;
  int64_t dispatches = 0;
  for (auto _ : state) {
    auto policy = builtin_policies().make(policy_name, {});
    sim::SimBackend backend(h200_spec());
    EngineOptions o;
    auto run = run_workload(w, backend, **policy, o);
    if (!run) {
      state.SkipWithError(run.status().to_string().c_str());
      return;
    }
    policy_seconds += run->stats.policy_seconds;
    backend_seconds += run->stats.backend_seconds;
    dispatches += run->stats.dispatches;
    // The decision: time in the policy's hooks less the backend calls they made (the simulator's
    // rate model, or the CUDA launch itself), per launch.
    state.SetIterationTime((run->stats.policy_seconds - run->stats.backend_seconds) /
                           static_cast<double>(run->stats.dispatches));
  }
  state.counters["ns_per_launch"] = (policy_seconds - backend_seconds) / static_cast<double>(dispatches) * 1e9;
  state.counters["backend_ns_per_launch"] = backend_seconds / static_cast<double>(dispatches) * 1e9;
  state.counters["launches"] = static_cast<double>(dispatches) / static_cast<double>(state.iterations());
}

// `--once POLICY TENANTS`: one run, its decision count printed, for an instruction count under
// callgrind (bench/sched_cost/instructions.sh), which does not vary with machine load.
int run_once(const std::string& policy_name, int tenants) {
  const Workload w = mix(tenants);
  auto policy = builtin_policies().make(policy_name, {});
  if (!policy) {
    std::fprintf(stderr, "%s\n", policy.status().to_string().c_str());
    return 2;
  }
  sim::SimBackend backend(h200_spec());
  auto run = run_workload(w, backend, **policy, EngineOptions{});
  if (!run) {
    std::fprintf(stderr, "%s\n", run.status().to_string().c_str());
    return 1;
  }
  std::printf("policy=%s tenants=%d dispatches=%lld policy_calls=%lld\n", policy_name.c_str(), tenants,
              static_cast<long long>(run->stats.dispatches), static_cast<long long>(run->stats.policy_calls));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--once") return run_once(argv[2], std::atoi(argv[3]));
  // decision/POLICY: BE tenants only; decision-lc/POLICY: one tenant in four latency-critical.
  for (const bool with_lc : {false, true}) {
    for (const auto& entry : builtin_policies().list()) {
      benchmark::RegisterBenchmark(((with_lc ? "decision-lc/" : "decision/") + entry.name).c_str(), BM_DecisionCost, entry.name,
                                   with_lc)
          ->Arg(4)
          ->Arg(8)
          ->Arg(16)
          ->UseManualTime()
          ->Unit(benchmark::kNanosecond)
          ->Iterations(20)
          ->Repetitions(3)
          ->ReportAggregatesOnly(true);
    }
  }
  // Google Benchmark's context (in its JSON output, --benchmark_out) carries the build and the
  // simulated device, as every results file does.
  const auto provenance = nlohmann::json::parse(provenance_json(sim::SimBackend(h200_spec()).device(), "sim",
                                                                concord::build_version(), concord::build_commit()));
  for (const auto& [group, fields] : provenance.items()) {
    for (const auto& [key, value] : fields.items()) {
      benchmark::AddCustomContext(group + "." + key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
