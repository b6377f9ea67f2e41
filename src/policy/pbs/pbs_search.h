// Pattern-based searching (the PBS paper, Section V and VI-D) as a pure state
// machine: it names the TLP combination to sample next, is told each tenant's EB there, and
// settles on one combination. No clock, no backend: the policy samples, tests feed surfaces.
//
//   1. Alone EBs (FI and HS only, Section IV): each tenant at its highest TLP with every other
//      tenant at its lowest (1): its EB there is its scaling factor.
//   2. Criticality (Section V-B): each tenant's TLP swept over its levels (1, 2, 4, ..., max)
//      while every other tenant stays at its highest. A tenant's drop is the share of the best
//      metric of its sweep that its highest TLP loses; the critical tenant drops most (ties: the
//      wider range of the metric over the sweep). With k tenants they are ranked (Section VI-D).
//   3. The critical tenant is fixed at its knee: the lowest level whose metric is within
//      `knee_tolerance` of its sweep's best (the inflection point before the drop; on a curve
//      that only saturates, the start of the plateau). Where the critical tenant's sweep stays
//      within `knee_tolerance` (a flat surface: TLP does not matter), it keeps its highest level.
//   4. The others, in rank order, are tuned one at a time from their highest TLP down, the ones
//      already decided at their values and the rest at their highest: the walk stops when the
//      metric falls below the best seen by more than `knee_tolerance`, and the best level seen
//      is kept (a lower level counts as better only when it beats the best by more than
//      `knee_tolerance`, so a flat stretch keeps the higher TLP).
// A combination sampled once is not sampled again (its metric is remembered).
#pragma once

#include <map>
#include <optional>
#include <span>
#include <vector>

#include "concord/status.h"
#include "policy/pbs/pbs_objective.h"

namespace concord::policy {

// TLP levels 1, 2, 4, ... below `max_tlp`, then `max_tlp` (>= 1).
std::vector<int> tlp_levels(int max_tlp);

struct PbsSearchOptions {
  PbsObjective objective = PbsObjective::ws;
  double knee_tolerance = 0.03;
};

class PbsSearch {
 public:
  // `levels[i]`: tenant i's TLP levels, ascending, non-empty, each >= 1. At least one tenant.
  static Result<PbsSearch> make(std::vector<std::vector<int>> levels, PbsSearchOptions options);

  // The combination (one TLP per tenant) to sample next; nullopt once settled.
  std::optional<std::vector<int>> next() const;
  // Each tenant's EB measured at next(). Errors when settled or on a wrong count.
  Status observe(std::span<const double> eb);

  bool settled() const { return settled_; }
  // The chosen combination once settled; before that, the combination to run meanwhile.
  const std::vector<int>& choice() const { return choice_; }
  // Tenants by criticality, most critical first (after the sweeps).
  const std::vector<int>& ranking() const { return ranking_; }
  int samples() const { return samples_; }
  // The metric at `tlps` if it was sampled.
  std::optional<double> metric_at(const std::vector<int>& tlps) const;
  const std::vector<double>& alone_eb() const { return alone_; }

 private:
  enum class Stage { alone, sweep, tune, done };
  PbsSearch(std::vector<std::vector<int>> levels, PbsSearchOptions options);
  std::vector<int> highest() const;
  // Moves on until a combination not yet sampled is due (or the search is done).
  Status advance();
  Status finish_sweeps();
  void start_tuning(size_t rank);
  Result<double> metric_of(std::span<const double> eb) const;

  std::vector<std::vector<int>> levels_;
  PbsSearchOptions options_;
  Stage stage_ = Stage::alone;
  size_t tenant_ = 0;  // alone / sweep: the tenant; tune: the rank being tuned
  size_t level_ = 0;   // index into levels_[tenant]: sweeps go up, tuning goes down
  std::vector<int> pending_;
  std::vector<double> alone_;
  std::map<std::vector<int>, std::vector<double>> seen_;  // combination -> each tenant's EB
  std::vector<std::vector<double>> sweeps_;  // per tenant, per level
  std::vector<int> ranking_;
  std::vector<int> choice_;
  std::optional<double> tune_best_;
  int tune_best_level_ = 0;
  bool settled_ = false;
  int samples_ = 0;
};

}  // namespace concord::policy
