// What the mix benches (bench/lsbe, bench/aker) share: their results file, and the command-line
// options every mix bench's `run` takes: the mixes,
// schemes and loads, how many requests, the seed, the backend and device, the profile store, each
// run's limit, the results file. `Options` is the bench's own struct, with fields of these names.
#pragma once

#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "concord/status.h"
#include "lsbe_mix.h"
#include "runner/processes.h"

namespace concord::lsbe {

// A mix bench's results file: rewritten whole (atomically) after every mix, at a failure and at
// the end, so a run that fails or is stopped leaves what it measured. `complete` is false until
// finish() says the run ended with rc 0.
class ResultsFile {
 public:
  ResultsFile(std::string path, nlohmann::json& results, int& rc, int (*fail)(const Status&))
      : path_(std::move(path)), results_(results), rc_(rc), fail_(fail) {
    results_["complete"] = false;
  }
  // False (and rc set by `fail`) when the file could not be written.
  bool save() {
    if (Status s = write_file_atomically(path_, results_.dump(1) + "\n"); !s) {
      rc_ = fail_(s);
      return false;
    }
    return true;
  }
  // One mix's results appended, and the file written.
  bool add_mix(nlohmann::json mix) {
    results_["mixes"].push_back(std::move(mix));
    return save();
  }
  int finish() {
    results_["complete"] = rc_ == 0;
    save();
    return rc_;
  }
  // A mix's results object: its name, spec file, LC tenant, LC requests per run, kernels with
  // profiles attached, and its BE tenants.
  static nlohmann::json mix_json(const Mix& mix, int lc_requests, int profiled_kernels) {
    nlohmann::json mj{{"mix", mix.workload.name}, {"file", mix.file}, {"lc_tenant", mix.lc().name},
                      {"lc_requests", lc_requests}, {"profiled_kernels", profiled_kernels}};
    mj["be_tenants"] = nlohmann::json::array();
    for (size_t i = 0; i < mix.be_count(); ++i) mj["be_tenants"].push_back(mix.be(i).name);
    return mj;
  }
  // A failure within a mix: the error (naming the mix and what failed) kept in `mix_results`, which
  // is written; returns the bench's exit code for it.
  int fail_mix(nlohmann::json& mix_results, const Mix& mix, const std::string& what, const Status& s) {
    const Status e(s.code(), mix.workload.name + " " + what + ": " + s.message());
    mix_results["error"] = e.to_string();
    add_mix(mix_results);
    return fail_(e);
  }

 private:
  std::string path_;
  nlohmann::json& results_;
  int& rc_;
  int (*fail_)(const Status&);
};

template <typename Options>
void add_mix_run_options(CLI::App* run, Options& ro) {
  run->add_option("mixes", ro.mixes, "Mix specs (one LC tenant, BE tenants)")->required();
  run->add_option("--schemes", ro.schemes, "Policies (name or name:key=value;key=value)")->delimiter(',')->capture_default_str();
  run->add_option("--loads", ro.loads, "LC loads, shares of its alone capacity")->delimiter(',')->capture_default_str();
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
