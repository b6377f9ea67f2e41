#include "policy/pbs/pbs_search.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace concord::policy {

std::vector<int> tlp_levels(int max_tlp) {
  std::vector<int> out;
  for (int t = 1; t < max_tlp; t *= 2) out.push_back(t);
  out.push_back(std::max(1, max_tlp));
  return out;
}

Result<PbsSearch> PbsSearch::make(std::vector<std::vector<int>> levels, PbsSearchOptions options) {
  if (levels.empty()) return Status::invalid_argument("pbs search: no tenant");
  for (size_t i = 0; i < levels.size(); ++i) {
    const auto& l = levels[i];
    if (l.empty()) return Status::invalid_argument("pbs search: tenant " + std::to_string(i) + " has no TLP level");
    for (size_t k = 0; k < l.size(); ++k) {
      if (l[k] < 1 || (k > 0 && l[k] <= l[k - 1])) {
        return Status::invalid_argument("pbs search: tenant " + std::to_string(i) + "'s TLP levels must be >= 1 and ascending");
      }
    }
  }
  if (!(options.knee_tolerance >= 0 && options.knee_tolerance < 1)) {
    return Status::invalid_argument("pbs search: knee_tolerance must be in [0, 1)");
  }
  PbsSearch s(std::move(levels), options);
  CONCORD_RETURN_IF_ERROR(s.advance());
  return s;
}

PbsSearch::PbsSearch(std::vector<std::vector<int>> levels, PbsSearchOptions options)
    : levels_(std::move(levels)), options_(options), alone_(levels_.size(), 0), sweeps_(levels_.size()) {
  choice_ = highest();
  if (!needs_alone_eb(options_.objective)) stage_ = Stage::sweep;
}

std::vector<int> PbsSearch::highest() const {
  std::vector<int> out;
  for (const auto& l : levels_) out.push_back(l.back());
  return out;
}

std::optional<std::vector<int>> PbsSearch::next() const {
  if (settled_) return std::nullopt;
  return pending_;
}

std::optional<double> PbsSearch::metric_at(const std::vector<int>& tlps) const {
  auto it = seen_.find(tlps);
  if (it == seen_.end() || (needs_alone_eb(options_.objective) && stage_ == Stage::alone)) return std::nullopt;
  auto m = metric_of(it->second);
  if (!m) return std::nullopt;
  return *m;
}

Result<double> PbsSearch::metric_of(std::span<const double> eb) const { return eb_metric(options_.objective, eb, alone_); }

Status PbsSearch::observe(std::span<const double> eb) {
  if (settled_) return Status::failed_precondition("pbs search: settled; nothing to observe");
  if (eb.size() != levels_.size()) {
    return Status::invalid_argument("pbs search: " + std::to_string(eb.size()) + " EBs for " + std::to_string(levels_.size()) + " tenants");
  }
  for (double v : eb) {
    if (!(v >= 0)) return Status::invalid_argument("pbs search: an EB must be >= 0");
  }
  seen_[pending_] = std::vector<double>(eb.begin(), eb.end());
  ++samples_;
  return advance();
}

Status PbsSearch::finish_sweeps() {
  const size_t n = levels_.size();
  std::vector<double> drop(n, 0), range(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto& s = sweeps_[i];
    const double best = *std::max_element(s.begin(), s.end());
    const double lowest = *std::min_element(s.begin(), s.end());
    if (best > 0) {
      drop[i] = (best - s.back()) / best;
      range[i] = (best - lowest) / best;
    }
  }
  ranking_.resize(n);
  std::iota(ranking_.begin(), ranking_.end(), 0);
  std::stable_sort(ranking_.begin(), ranking_.end(), [&](int a, int b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    if (drop[ua] != drop[ub]) return drop[ua] > drop[ub];
    return range[ua] > range[ub];
  });
  // The critical tenant at its knee: the lowest level within the tolerance of its sweep's best.
  // Where even its sweep stays within the tolerance (no tenant's TLP moves the metric: a flat
  // surface), it keeps its highest level: a knee there would be noise, and throttling a tenant
  // for noise costs it throughput the metric never gives back.
  const auto critical = static_cast<size_t>(ranking_.front());
  const auto& s = sweeps_[critical];
  const double best = *std::max_element(s.begin(), s.end());
  size_t knee = s.size() - 1;
  if (best > 0 && range[critical] > options_.knee_tolerance) {
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] >= best * (1 - options_.knee_tolerance)) {
        knee = k;
        break;
      }
    }
  }
  choice_ = highest();
  choice_[critical] = levels_[critical][knee];
  start_tuning(1);
  return Status::ok();
}

void PbsSearch::start_tuning(size_t rank) {
  stage_ = Stage::tune;
  tenant_ = rank;
  if (rank < levels_.size()) level_ = levels_[static_cast<size_t>(ranking_[rank])].size() - 1;
  tune_best_.reset();
  tune_best_level_ = 0;
}

Status PbsSearch::advance() {
  const size_t n = levels_.size();
  while (true) {
    switch (stage_) {
      case Stage::alone: {
        if (tenant_ >= n) {
          stage_ = Stage::sweep;
          tenant_ = 0;
          level_ = 0;
          break;
        }
        std::vector<int> combo;
        for (const auto& l : levels_) combo.push_back(l.front());
        combo[tenant_] = levels_[tenant_].back();
        auto it = seen_.find(combo);
        if (it == seen_.end()) {
          pending_ = combo;
          return Status::ok();
        }
        alone_[tenant_] = it->second[tenant_];
        if (!(alone_[tenant_] > 0)) {
          return Status::failed_precondition("pbs search: tenant " + std::to_string(tenant_) +
                                             " made no progress with its co-runners at TLP 1: no alone EB");
        }
        ++tenant_;
        break;
      }
      case Stage::sweep: {
        if (tenant_ >= n) {
          CONCORD_RETURN_IF_ERROR(finish_sweeps());
          break;
        }
        if (level_ >= levels_[tenant_].size()) {
          ++tenant_;
          level_ = 0;
          break;
        }
        std::vector<int> combo = highest();
        combo[tenant_] = levels_[tenant_][level_];
        auto it = seen_.find(combo);
        if (it == seen_.end()) {
          pending_ = combo;
          return Status::ok();
        }
        auto m = metric_of(it->second);
        if (!m) return m.status();
        sweeps_[tenant_].push_back(*m);
        ++level_;
        break;
      }
      case Stage::tune: {
        if (tenant_ >= n) {
          stage_ = Stage::done;
          break;
        }
        const auto t = static_cast<size_t>(ranking_[tenant_]);
        std::vector<int> combo = choice_;
        combo[t] = levels_[t][level_];
        auto it = seen_.find(combo);
        if (it == seen_.end()) {
          pending_ = combo;
          return Status::ok();
        }
        auto m = metric_of(it->second);
        if (!m) return m.status();
        // A lower level is taken only for a gain beyond the tolerance: on a flat stretch the
        // tenant keeps the higher TLP (a smaller "gain" is noise, and the TLP it would give up is
        // throughput the metric does not count).
        if (!tune_best_ || *m > *tune_best_ * (1 + options_.knee_tolerance)) {
          tune_best_ = *m;
          tune_best_level_ = static_cast<int>(level_);
        }
        const bool fell = *m < *tune_best_ * (1 - options_.knee_tolerance);
        if (fell || level_ == 0) {
          choice_[t] = levels_[t][static_cast<size_t>(tune_best_level_)];
          start_tuning(tenant_ + 1);
        } else {
          --level_;
        }
        break;
      }
      case Stage::done:
        settled_ = true;
        pending_.clear();
        return Status::ok();
    }
  }
}

}  // namespace concord::policy
