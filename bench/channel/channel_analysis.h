// From the channel probe's raw timings to a verdict (docs/channel_probe.md): can HBM channel
// interference be seen and steered from user space by choosing offsets within 2 MiB pages?
//   steerable_by_offset  interference depends on which in-page offsets two tenants use, the same in
//                        every page: BE allocations can be coloured by offset (SGDRC §6)
//   visible_per_page     offsets interfere within one page, but not the same way across pages:
//                        colouring would need every page calibrated
//   not_steerable        no offset dependence beyond repeat noise: use the substitute (an L2
//                        persisting window for LC data, BE TLP throttling)
//   inconclusive         the measurements cannot decide (runs missing, the probe not reaching DRAM,
//                        a dependence without a stable grouping)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "channel_raw.h"
#include "channel_stats.h"

namespace concord::channel {

struct AnalysisOptions {
  double map_alpha = 0.001;            // interaction permutation p, at most
  double conditions_alpha = 0.01;      // equal-against-disjoint sign-flip p, at most
  double min_reliability = 0.2;        // correlation of the halves' interaction matrices
  double min_stability = 0.5;          // adjusted Rand index of the halves' groupings
  double min_contrast = 1.05;          // within-group over across-group slowdown
  double min_condition_effect = 0.03;  // equal over disjoint slowdown, less 1
  double max_invalid_share = 0.1;      // runs without a measurement, at most
  double min_kappa = 0.5;              // latency: agreement of slow pairs between rep halves
  int permutations = 2000;
  uint64_t seed = 1;
  BimodalityOptions bimodality;
};

struct CalibrationFinding {
  double l2_hit_cycles = 0, dram_cycles = 0, after_discard_cycles = 0;  // medians
  bool flush_reaches_dram = false;    // a flushed line is much slower than an L2 hit
  bool discard_reaches_dram = false;  // a discarded line is read from DRAM again
  double stream_gbps = 0, class_gbps = 0, class_discard_gbps = 0;
  double sm_clock_mhz_start = 0, sm_clock_mhz_end = 0;
};

struct ConditionsFinding {
  int granularity = 0, offsets_per_set = 0, reps = 0, valid_reps = 0;
  double slowdown_equal = 0, slowdown_disjoint = 0, slowdown_random = 0;  // geometric means
  double effect = 0;         // equal over disjoint slowdown, less 1
  double p_value = 1;
  double random_effect = 0;  // random over disjoint, less 1
  double random_p = 1;
  double noise_cv = 0;       // run-to-run spread of the victim alone
  bool offset_dependent = false;
};

struct MapFinding {
  std::string name, kind;
  int granularity = 0;
  bool discard = false;
  int64_t page = -1;
  int classes = 0, reps = 0, runs = 0, invalid_runs = 0;
  std::string status;  // colour_classes, offset_dependent, no_structure or unusable
  std::string note;    // why unusable, where it is
  InteractionTest interaction;
  Partition partition;                  // of all repetitions
  double stability = 0;                 // adjusted Rand index of the halves' partitions
  double within_slowdown = 0, across_slowdown = 0, contrast = 0;
  std::vector<std::vector<int>> groups; // chunk offsets of each group of two or more
};

struct LatencyFinding {
  bool present = false, usable = false;
  std::string note;
  int bases = 0, deltas = 0, reps = 0;
  double single_median = 0, pair_median = 0;  // cycles
  Bimodality modes;          // pair medians less their base's median
  double slow_share = 0;     // pairs above the modes' threshold
  double repeat_kappa = 0;   // same pairs slow in both rep halves
  double page_jaccard = 0, chance_jaccard = 0;  // slow deltas shared by bases of one offset
  bool conflicts_visible = false;
  bool page_invariant = false;
  double histogram_lo = 0, histogram_hi = 0;
  std::vector<int> histogram;
};

struct Report {
  nlohmann::json provenance;
  ProbeConfig config;
  CalibrationFinding calibration;
  std::vector<ConditionsFinding> conditions;
  std::vector<MapFinding> maps;
  LatencyFinding latency;
  std::string verdict;
  std::vector<std::string> reasons;
  std::string recommendation;
};

ConditionsFinding analyze_conditions(const ConditionsExperiment& e, const AnalysisOptions& options);
MapFinding analyze_map(const InterferenceMap& m, const CalibrationFinding& calibration, const AnalysisOptions& options);
LatencyFinding analyze_latency(const LatencyProbe& l, const CalibrationFinding& calibration, const AnalysisOptions& options);
CalibrationFinding analyze_calibration(const Calibration& c);
Report analyze(const RawProbe& raw, const AnalysisOptions& options = {});

nlohmann::json report_json(const Report& report);
std::string report_markdown(const Report& report);

}  // namespace concord::channel
