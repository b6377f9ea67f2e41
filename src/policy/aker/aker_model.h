// Aker's duration models (Aker paper, Section 6.3, 7): per kernel, a line of its duration against logical
// blocks; per fused kernel version, a two-segment line of its duration, in units of its first
// component's solo time, against the load ratio R = X_k2 / X_k1 (Eq. 1). Both are refitted from
// online observations whenever a prediction misses by more than 10%. Part of the policy-facets
// layer: the profiler fits what it measured with them, the policies predict and refit.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "concord/status.h"
#include "policy/aker/aker_class.h"

namespace concord::policy {

struct AkerPoint {
  double x = 0;
  double y = 0;
};

struct AkerLine {
  double intercept = 0;
  double slope = 0;
  double at(double x) const { return intercept + slope * x; }
};

// Least squares over `points`: invalid_argument with fewer than two points or when every x is equal.
Result<AkerLine> aker_fit_line(std::span<const AkerPoint> points);
// |predicted - actual| / actual (actual > 0; 0 when both are 0, infinity when only actual is).
double aker_relative_error(double predicted, double actual);

// A prediction that misses by more than this is refitted (6.3).
inline constexpr double kAkerRefitError = 0.10;
// Online points a refit keeps beside the profiled ones (the most recent).
inline constexpr size_t kAkerOnlineWindow = 8;
// The load ratios the paper profiles each fused version at (6.3): two on each segment.
inline constexpr double kAkerProfileRatios[] = {0.1, 0.2, 1.8, 1.9};
// How much steeper (in X_k1 per unit of load ratio) the solo-run segment must be than the co-run
// one to count as an inflection. Past the knee K_2 runs alone and its time adds about one unit per
// unit of ratio (Section 6.2); a difference a tenth of that is within what noise and refits give a
// straight line, and a fit splitting such a line would place its knee anywhere.
inline constexpr double kAkerMinSlopeGap = 0.1;

// A line fitted to profiled points and refitted with online ones.
class AkerRefitLine {
 public:
  static Result<AkerRefitLine> fit(std::vector<AkerPoint> profiled);
  double at(double x) const { return line_.at(x); }
  const AkerLine& line() const { return line_; }
  // Adds an online point and refits over the profiled points and the last kAkerOnlineWindow
  // online ones (a fit that fails keeps the line it had).
  void refit_with(AkerPoint p);
  int refits() const { return refits_; }

 private:
  std::vector<AkerPoint> profiled_;
  std::deque<AkerPoint> online_;
  AkerLine line_;
  int refits_ = 0;
};

// Duration (seconds) of a kernel against its logical blocks (6.3 step 1).
class AkerSoloModel {
 public:
  // From profiled (blocks, seconds) points, at least two distinct block counts.
  static Result<AkerSoloModel> fit(std::vector<AkerPoint> profiled);
  // Proportional to blocks through a whole-grid estimate (no profile: the estimator's time).
  static AkerSoloModel proportional(double blocks, double seconds);
  double seconds(double blocks) const;
  // The most blocks that take at most `seconds` (0 when even one block takes longer).
  double blocks_within(double seconds) const;
  // The relative error of the prediction for (blocks, seconds); above kAkerRefitError the point
  // refits the line (the paper's update rule).
  double observe(double blocks, double seconds);
  int refits() const { return line_.refits(); }
  const AkerLine& line() const { return line_.line(); }

 private:
  AkerRefitLine line_;
};

// A fused version's duration over X_k1 against the load ratio (6.1-6.2): the co-run segment
// (left, the smaller slope) up to the opportune ratio, where the two components end together,
// and a solo-run segment (right) after it; the duration is the larger of the two lines.
class AkerFusedModel {
 public:
  // From profiled (ratio, fused seconds / X_k1) points, by segmented regression: of the splits
  // into lower and upper ratios with at least two points on each side whose upper line is steeper
  // than the lower one by kAkerMinSlopeGap (else there is no inflection) and meets it at a
  // positive ratio, the one
  // with the least squared error of each line over its own points (four points: two and two, the
  // paper's profile). Errors say what no split had.
  static Result<AkerFusedModel> fit(std::vector<AkerPoint> profiled);
  // A model without measurements (7's shape with slopes k and 1): y = max(1 + k R, k + R), whose
  // components end together at R = 1 with y = 1 + k; k in [0, 1] is how much the two contend
  // (0: perfect overlap, 1: serial).
  static AkerFusedModel estimated(double contention);
  double normalized(double ratio) const;  // fused seconds / X_k1
  double opportune_ratio() const;         // where the segments meet (> 0)
  // Section 7's measure of a version: the serial time of the two components at the opportune
  // ratio (1 + R*) less the fused time, in units of X_k1.
  double makespan_reduction() const;
  // As AkerSoloModel::observe, for a fused run at `ratio` that took `normalized` X_k1. A point
  // near the opportune ratio (within 5%) refits both segments, otherwise the segment it lies on.
  double observe(double ratio, double normalized);
  int refits() const { return left_.refits() + right_.refits(); }
  const AkerLine& left() const { return left_.line(); }
  const AkerLine& right() const { return right_.line(); }

 private:
  AkerRefitLine left_, right_;
};

// How much two kernels contend when fused, for AkerFusedModel::estimated when a pair was not
// measured: the part of their combined use of a shared resource beyond what it has, in [0, 1].
// Tensor and CUDA cores are separate units, so a TC + CD pair shares only DRAM bandwidth; two CD
// kernels share the cores too: k = max(c_a + c_b, m_a + m_b) - 1, clamped.
double aker_contention(const AkerUtilisation& a, const AkerUtilisation& b);

// The version with the largest makespan reduction at its opportune ratio (Section 7: it is then
// the best at every ratio); nullopt for none.
std::optional<size_t> aker_best_version(std::span<const AkerFusedModel> versions);

}  // namespace concord::policy
