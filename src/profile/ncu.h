// Reading Nsight Compute's CSV output into RAISE vectors (CPU only; unit-tested).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/profile.h"
#include "policy/pbs/pbs_facet.h"
#include "policy/raise/raise_metrics.h"
#include "concord/status.h"

namespace concord::profile {

// One profiled kernel launch of an `ncu --csv` report.
struct NcuLaunch {
  int64_t id = 0;
  std::string kernel;                     // demangled name as ncu prints it
  std::map<std::string, double> metrics;  // metric name -> value (base units)
};

// The metric names to pass to `ncu --metrics`: the eight of policy/raise/raise_metrics.h, the four
// of PBS's facet (policy/pbs/pbs_facet.h: global load/store bytes, L1 and L2 sector hit rates)
// and the duration.
std::vector<std::string> ncu_metric_names();

// The whole of a text file (ncu's CSV, the worker's job list); an error names the path.
Result<std::string> read_text_file(const std::string& path);
inline constexpr const char* kNcuDurationMetric = "gpu__time_duration.sum";
// The marker kernels the worker launches: before each job's measured launch, and before set-up
// work (input generation, a library's warm-up call) whose launches are not measured.
inline constexpr const char* kNcuMarkerKernel = "concord_ncu_marker";
inline constexpr const char* kNcuSkipKernel = "concord_ncu_skip";

// Parses `ncu --csv` output: both the long layout (one row per launch and metric: "Metric
// Name", "Metric Value") and the raw page (one row per launch, a column per metric, a units row).
// Lines that are not CSV records (ncu's ==PROF== messages, program output) are skipped. Values
// may carry thousands separators. `source` names the file in errors.
Result<std::vector<NcuLaunch>> parse_ncu_csv(const std::string& text, const std::string& source);

// Splits launches into jobs at the marker kernels: job k is every launch after the k-th job marker
// and before the next marker of either kind (launches after a skip marker are dropped). An error when the number of markers is not `jobs` or a job ran no kernel.
Result<std::vector<std::vector<NcuLaunch>>> split_at_markers(const std::vector<NcuLaunch>& launches, size_t jobs,
                                                             const std::string& source);

// The RAISE vector of one job: each metric scaled to 0-10 and averaged over the job's launches
// weighted by their duration (RAISE paper, Section VI-A: multi-kernel tasks are weighted by kernel time).
Result<RaiseVector> raise_vector(const std::vector<NcuLaunch>& launches, const std::string& where);

// One thing the ncu worker runs: one plain launch of a kernel variant at a size.
struct NcuJob {
  std::string kernel;
  int64_t size = 0;
  std::string variant;
  bool operator==(const NcuJob&) const = default;
};
// Every variant of every distinct (kernel, size) among `kernels`, in first-seen order.
std::vector<NcuJob> ncu_jobs(const std::vector<KernelSpec>& kernels);
// The job file the parent hands the worker: one "kernel size variant" line per job.
std::string ncu_jobs_to_text(const std::vector<NcuJob>& jobs);
Result<std::vector<NcuJob>> ncu_jobs_from_text(const std::string& text, const std::string& source);

// One ncu pass over the job list: each job's launches.
using NcuPass = std::vector<std::vector<NcuLaunch>>;
// Stores each job's RAISE vector and class as the "raise" facet of its key (one transaction each;
// the key's profile fields are not touched). With several passes a job's vector is the mean of its
// vector in each pass (one pass's metrics vary by a few hundredths of a score). Returns how many
// facets were written.
Result<int> store_raise_results(ProfileStore& store, const std::string& gpu, const std::string& driver,
                                const std::vector<NcuJob>& jobs, const std::vector<NcuPass>& passes,
                                const std::string& source);

// The PBS facet of one job (pbs_facet_from_ncu over its launches: bytes summed, hit rates weighted
// by duration) per `logical_blocks`; with several passes, each field is the mean over passes.
// An error names a missing metric (a CSV from a pass that did not collect them).
Result<policy::PbsFacet> pbs_facet_of_job(const std::vector<std::vector<NcuLaunch>>& passes_of_job, int64_t logical_blocks,
                                          const std::string& where);
// Stores each job's "pbs" facet (its logical blocks from the suite's spec of the job's kernel,
// size and variant). Jobs whose passes lack the PBS metrics are left without one and named in
// `missing`. Returns how many facets were written.
struct PbsStored {
  int written = 0;
  std::vector<std::string> missing;  // "kernel/variant@size: why"
};
Result<PbsStored> store_pbs_results(ProfileStore& store, const std::string& gpu, const std::string& driver,
                                    const std::vector<NcuJob>& jobs, const std::vector<NcuPass>& passes,
                                    const std::string& source);

// The worker `concord profile raise` runs under Nsight Compute (`concord profile raise-worker`):
// one plain launch of each job after a marker kernel. It needs the GPU, so a CUDA build registers
// it (backend/registration.h); without one, running it is an error that says so.
using NcuWorker = Status (*)(const std::string& jobs_file);
void register_ncu_worker(NcuWorker worker);
Status run_registered_ncu_worker(const std::string& jobs_file);

}  // namespace concord::profile
