// The LC/BE bench's figures (docs/running.md, "The LC/BE bench"): over the LC tenant's active
// window (its first arrival to its last request's end), the LC's SLO attainment, p99 and goodput,
// each BE tenant's kernels done per second (a kernel running across an edge of the window counts
// by the share of its running time inside it), and the SMs the BE tenants held on average.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "concord/engine.h"
#include "concord/status.h"

namespace concord::lsbe {

struct Window {
  Seconds begin = 0;
  Seconds end = 0;
  Seconds length() const { return end - begin; }
};

// From the first arrival to the last end of the requests; {0, 0} without requests.
Window request_window(std::span<const RequestRecord> requests);

// Kernels in `window`, each [start, end] counted by the share of its running time inside it (a
// zero-length kernel counts whole when it lies inside). Unfinished kernels (end < start) count
// nothing.
double kernels_in_window(std::span<const std::pair<Seconds, Seconds>> kernels, Window window);
// The launches of `tenant` in `run` as [start, end] pairs.
std::vector<std::pair<Seconds, Seconds>> launch_times(const RunRecord& run, TenantId tenant);

// Collects the SM sets running dispatches are resized to, for mean_sm_share.
class ResizeLog final : public EngineObserver {
 public:
  void on_resize(DispatchId dispatch, const SmSet& sms, Seconds at) override { resizes_[dispatch.value].emplace_back(at, sms); }
  const std::vector<std::pair<Seconds, SmSet>>* of(DispatchId d) const {
    auto it = resizes_.find(d.value);
    return it == resizes_.end() ? nullptr : &it->second;
  }

 private:
  std::map<int64_t, std::vector<std::pair<Seconds, SmSet>>> resizes_;
};

// The time average over `window` of the number of SMs in the union of the SM sets of the running
// dispatches that hold work of any of `tenants` (with their resizes), over `sm_count`.
double mean_sm_share(const RunRecord& run, const ResizeLog& resizes, std::span<const TenantId> tenants, Window window,
                     int sm_count);

// The LC tenant's figures for one run.
struct LcFigures {
  int64_t requests = 0;
  int64_t within_target = 0;
  double slo_attainment = 0;
  Seconds p50 = 0;
  Seconds p99 = 0;
  double goodput_rps = 0;     // requests within target per second of the window
  std::vector<double> latencies;
};
LcFigures lc_figures(std::span<const RequestRecord> requests, Seconds target, Window window);

nlohmann::json to_json(const LcFigures& f);

// What a shared run is measured against: the LC alone (its capacity in a closed loop, its p99 at
// the run's rate) and each BE tenant alone.
struct Reference {
  double lc_capacity_rps = 0;              // LC requests per second, alone, closed loop
  Seconds lc_alone_p99 = 0;                // the LC's isolated p99: alone at the same rate (per load)
  std::vector<double> be_kernels_per_s;    // per BE tenant, alone
};

// One BE tenant's work in a shared run.
struct BeWork {
  std::string tenant;
  double kernels_in_window = 0;
  bool ran_out = false;  // it finished its requests before the window ended (its ceiling was too low)
};

// A shared run's figures against `ref`: the LC's (lc_figures, and its p99 over the alone p99,
// its goodput over its alone capacity), each BE tenant's kernels per second over its alone rate,
// their sum ("be_norm"), and the overall throughput: LC goodput and BE throughput, each over its
// alone rate, summed ("overall_norm"; docs/running.md says why).
nlohmann::json shared_figures(const LcFigures& lc, Window window, const std::vector<BeWork>& be, const Reference& ref);

// Of repeated runs' figures, the one whose number `key` is the median (the lower of the middle
// two for an even count), so that a reference is one run's consistent figures. An error names the
// repetition without a numeric `key`; `runs` must not be empty.
Result<nlohmann::json> median_by(std::span<const nlohmann::json> runs, const std::string& key);

}  // namespace concord::lsbe
