// The command-line options every mix bench's `run` shares (bench/lsbe, bench/aker): how many
// requests, the seed, the backend and device, the profile store, each run's limit, the results
// file. `Options` is the bench's own struct, with fields of these names.
#pragma once

#include <CLI/CLI.hpp>

namespace concord::lsbe {

template <typename Options>
void add_mix_run_options(CLI::App* run, Options& ro) {
  run->add_option("--lc-requests", ro.lc_requests, "LC requests per run (0: the mix's)")->capture_default_str();
  run->add_option("--be-alone-requests", ro.be_alone_requests, "Requests of each BE tenant's alone run")->capture_default_str();
  run->add_option("--seed", ro.seed, "Arrival seed (the same for every run)")->capture_default_str();
  run->add_option("--backend", ro.backend, "sim or cuda")->capture_default_str();
  run->add_option("--device", ro.device, "Simulated device (sim)")->capture_default_str();
  run->add_option("--profiles", ro.profiles, "Profile store: policies estimate from measured curves");
  run->add_option("--time-limit", ro.time_limit, "Each run's limit, seconds of its clock")->capture_default_str();
  run->add_option("--out", ro.out, "Results JSON")->capture_default_str();
  run->add_flag("--skip-unknown-schemes", ro.skip_unknown, "Leave out schemes with no policy in this build (else an error)");
}

}  // namespace concord::lsbe
