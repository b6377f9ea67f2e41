#include "policy/aker/aker_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace concord::policy {

Result<AkerLine> aker_fit_line(std::span<const AkerPoint> points) {
  if (points.size() < 2) return Status::invalid_argument("linear fit: needs two or more points");
  const double n = static_cast<double>(points.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const AkerPoint& p : points) {
    sx += p.x;
    sy += p.y;
    sxx += p.x * p.x;
    sxy += p.x * p.y;
  }
  const double den = n * sxx - sx * sx;
  if (std::abs(den) <= 1e-12 * std::max(1.0, n * sxx)) return Status::invalid_argument("linear fit: all x are equal");
  AkerLine l;
  l.slope = (n * sxy - sx * sy) / den;
  l.intercept = (sy - l.slope * sx) / n;
  return l;
}

double aker_relative_error(double predicted, double actual) {
  if (actual == 0) return predicted == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::abs(predicted - actual) / std::abs(actual);
}

Result<AkerRefitLine> AkerRefitLine::fit(std::vector<AkerPoint> profiled) {
  auto line = aker_fit_line(profiled);
  if (!line) return line.status();
  AkerRefitLine out;
  out.profiled_ = std::move(profiled);
  out.line_ = *line;
  return out;
}

void AkerRefitLine::refit_with(AkerPoint p) {
  online_.push_back(p);
  while (online_.size() > kAkerOnlineWindow) online_.pop_front();
  std::vector<AkerPoint> all = profiled_;
  all.insert(all.end(), online_.begin(), online_.end());
  if (auto line = aker_fit_line(all)) {
    line_ = *line;
    ++refits_;
  }
}

Result<AkerSoloModel> AkerSoloModel::fit(std::vector<AkerPoint> profiled) {
  for (const AkerPoint& p : profiled) {
    if (!(p.x > 0) || !(p.y > 0) || !std::isfinite(p.x) || !std::isfinite(p.y)) {
      return Status::invalid_argument("solo model: points need positive, finite blocks and seconds");
    }
  }
  auto line = AkerRefitLine::fit(std::move(profiled));
  if (!line) return Status(line.status().code(), "solo model: " + line.status().message());
  AkerSoloModel m;
  m.line_ = std::move(*line);
  return m;
}

AkerSoloModel AkerSoloModel::proportional(double blocks, double seconds) {
  AkerSoloModel m;
  // Two points on the line through the origin: a fit of them is that line.
  m.line_ = *AkerRefitLine::fit({{0, 0}, {std::max(blocks, 1.0), std::max(seconds, 0.0)}});
  return m;
}

double AkerSoloModel::seconds(double blocks) const { return std::max(0.0, line_.at(blocks)); }

double AkerSoloModel::blocks_within(double seconds) const {
  const AkerLine& l = line_.line();
  if (!(l.slope > 0)) return seconds >= l.intercept ? std::numeric_limits<double>::infinity() : 0;
  return std::max(0.0, (seconds - l.intercept) / l.slope);
}

double AkerSoloModel::observe(double blocks, double seconds) {
  const double err = aker_relative_error(this->seconds(blocks), seconds);
  if (err > kAkerRefitError) line_.refit_with({blocks, seconds});
  return err;
}

Result<AkerFusedModel> AkerFusedModel::fit(std::vector<AkerPoint> profiled) {
  for (const AkerPoint& p : profiled) {
    if (!(p.x > 0) || !(p.y > 0) || !std::isfinite(p.x) || !std::isfinite(p.y)) {
      return Status::invalid_argument("fused model: points need positive, finite ratios and durations");
    }
  }
  if (profiled.size() < 4) return Status::invalid_argument("fused model: needs two points on each segment (four or more)");
  std::sort(profiled.begin(), profiled.end(), [](const AkerPoint& a, const AkerPoint& b) { return a.x < b.x; });
  // Segmented regression: each split with two points or more on either side, the right segment
  // steeper and the segments meeting at a positive ratio; the split with the least squared error
  // of each segment over its own points. Four points have one split: the paper's two and two.
  const auto squared_error = [](const AkerLine& l, std::span<const AkerPoint> pts) {
    double e = 0;
    for (const AkerPoint& p : pts) e += (l.at(p.x) - p.y) * (l.at(p.x) - p.y);
    return e;
  };
  std::optional<AkerFusedModel> best;
  double best_error = 0;
  Status why;
  for (size_t k = 2; k + 2 <= profiled.size(); ++k) {
    const std::vector<AkerPoint> lo(profiled.begin(), profiled.begin() + static_cast<std::ptrdiff_t>(k));
    const std::vector<AkerPoint> hi(profiled.begin() + static_cast<std::ptrdiff_t>(k), profiled.end());
    auto left = AkerRefitLine::fit(lo);
    if (!left) {
      why = Status(left.status().code(), "fused model, co-run segment: " + left.status().message());
      continue;
    }
    auto right = AkerRefitLine::fit(hi);
    if (!right) {
      why = Status(right.status().code(), "fused model, solo-run segment: " + right.status().message());
      continue;
    }
    if (!(right->line().slope > left->line().slope + kAkerMinSlopeGap)) {
      if (why.is_ok() || k == profiled.size() / 2) {
        why = Status::invalid_argument("fused model: the solo-run segment (slope " + std::to_string(right->line().slope) +
                                       ") is not steeper than the co-run segment (slope " +
                                       std::to_string(left->line().slope) + ") by " + std::to_string(kAkerMinSlopeGap) +
                                       " or more: no inflection");
      }
      continue;
    }
    AkerFusedModel m;
    m.left_ = std::move(*left);
    m.right_ = std::move(*right);
    if (!(m.opportune_ratio() > 0)) {
      why = Status::invalid_argument("fused model: the segments meet at a ratio <= 0");
      continue;
    }
    const double error = squared_error(m.left(), lo) + squared_error(m.right(), hi);
    if (!best || error < best_error) {
      best = std::move(m);
      best_error = error;
    }
  }
  if (!best) return why;
  return std::move(*best);
}

AkerFusedModel AkerFusedModel::estimated(double contention) {
  const double k = std::clamp(contention, 0.0, 1.0);
  AkerFusedModel m;
  m.left_ = *AkerRefitLine::fit({{0, 1}, {1, 1 + k}});
  m.right_ = *AkerRefitLine::fit({{1, 1 + k}, {2, 2 + k}});
  return m;
}

double AkerFusedModel::normalized(double ratio) const { return std::max(left_.at(ratio), right_.at(ratio)); }

double AkerFusedModel::opportune_ratio() const {
  const AkerLine& l = left_.line();
  const AkerLine& r = right_.line();
  if (!(r.slope > l.slope)) return 1;  // refits turned the segments; a ratio of 1 stays usable
  return std::max(1e-6, (l.intercept - r.intercept) / (r.slope - l.slope));
}

double AkerFusedModel::makespan_reduction() const {
  const double r = opportune_ratio();
  return 1 + r - normalized(r);
}

double AkerFusedModel::observe(double ratio, double normalized_seconds) {
  const double err = aker_relative_error(normalized(ratio), normalized_seconds);
  if (err <= kAkerRefitError) return err;
  const double at = opportune_ratio();
  const AkerPoint p{ratio, normalized_seconds};
  if (std::abs(ratio - at) <= 0.05 * at) {
    left_.refit_with(p);
    right_.refit_with(p);
  } else if (ratio < at) {
    left_.refit_with(p);
  } else {
    right_.refit_with(p);
  }
  return err;
}

double aker_contention(const AkerUtilisation& a, const AkerUtilisation& b) {
  const double memory = a.memory + b.memory;
  const double compute = a.tensor != b.tensor ? 0.0 : a.compute + b.compute;
  return std::clamp(std::max(memory, compute) - 1, 0.0, 1.0);
}

std::optional<size_t> aker_best_version(std::span<const AkerFusedModel> versions) {
  std::optional<size_t> best;
  for (size_t i = 0; i < versions.size(); ++i) {
    if (!best || versions[i].makespan_reduction() > versions[*best].makespan_reduction()) best = i;
  }
  return best;
}

}  // namespace concord::policy
