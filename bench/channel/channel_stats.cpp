#include "channel_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace concord::channel {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kPi = 3.14159265358979323846;

std::vector<double> finite(const std::vector<double>& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) {
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double mx = mean(x), my = mean(y);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double log_normal_pdf(double x, double mu, double sd) {
  const double z = (x - mu) / sd;
  return -0.5 * z * z - std::log(sd) - 0.5 * std::log(2 * kPi);
}

double log_sum_exp(double a, double b) {
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

}  // namespace

double median(std::vector<double> values) {
  values = finite(values);
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  return quantile_sorted(values, 0.5);
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  int n = 0;
  for (double v : values) {
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  }
  return n > 0 ? sum / n : kNaN;
}

double sample_sd(const std::vector<double>& values) {
  const auto v = finite(values);
  if (v.size() < 2) return kNaN;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// ---- Interference maps -------------------------------------------------------------------------

Matrix double_centred(const Matrix& y) {
  const int n = y.n;
  std::vector<double> row_sum(n, 0), col_sum(n, 0);
  std::vector<int> row_n(n, 0), col_n(n, 0);
  double total = 0;
  int count = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double v = y.at(i, j);
      if (!std::isfinite(v)) continue;
      row_sum[i] += v;
      col_sum[j] += v;
      ++row_n[i];
      ++col_n[j];
      total += v;
      ++count;
    }
  }
  Matrix e(n, kNaN);
  if (count == 0) return e;
  const double grand = total / count;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double v = y.at(i, j);
      if (!std::isfinite(v)) continue;
      e.at(i, j) = v - row_sum[i] / row_n[i] - col_sum[j] / col_n[j] + grand;
    }
  }
  return e;
}

Matrix symmetric_interaction(const std::vector<Matrix>& log_slowdown, const std::vector<int>& reps) {
  const int n = log_slowdown.empty() ? 0 : log_slowdown.front().n;
  Matrix sum(n, 0.0);
  std::vector<int> count(static_cast<size_t>(n) * n, 0);
  for (int r : reps) {
    const Matrix e = double_centred(log_slowdown[r]);
    for (size_t c = 0; c < e.cells.size(); ++c) {
      if (std::isfinite(e.cells[c])) {
        sum.cells[c] += e.cells[c];
        ++count[c];
      }
    }
  }
  Matrix m(n, kNaN);
  for (size_t c = 0; c < m.cells.size(); ++c) {
    if (count[c] > 0) m.cells[c] = sum.cells[c] / count[c];
  }
  Matrix s(n, kNaN);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      s.at(i, j) = mean({m.at(i, j), m.at(j, i)});
    }
  }
  return s;
}

InteractionTest test_interaction(const std::vector<Matrix>& log_slowdown, int permutations, uint64_t seed) {
  InteractionTest t;
  t.repetitions = static_cast<int>(log_slowdown.size());
  if (t.repetitions < 2) return t;
  const int n = log_slowdown.front().n;
  std::vector<int> even, odd, all;
  for (int r = 0; r < t.repetitions; ++r) {
    (r % 2 == 0 ? even : odd).push_back(r);
    all.push_back(r);
  }
  const Matrix a = symmetric_interaction(log_slowdown, even);
  const Matrix b = symmetric_interaction(log_slowdown, odd);
  std::vector<double> xa, xb;
  for (int i = 0; i < n; ++i) {
    for (int j = i; j < n; ++j) {
      if (std::isfinite(a.at(i, j)) && std::isfinite(b.at(i, j))) {
        xa.push_back(a.at(i, j));
        xb.push_back(b.at(i, j));
      }
    }
  }
  t.cells = static_cast<int>(xa.size());
  if (t.cells < 3) return t;
  t.reliability = pearson(xa, xb);
  std::mt19937_64 rng(seed);
  int reached = 0;
  std::vector<double> shuffled = xb;
  for (int p = 0; p < permutations; ++p) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    if (pearson(xa, shuffled) >= t.reliability) ++reached;
  }
  t.p_value = (1.0 + reached) / (1.0 + permutations);

  // Noise: each cell's spread across repetitions of its double-centred value.
  std::vector<Matrix> centred;
  for (const auto& y : log_slowdown) centred.push_back(double_centred(y));
  double noise_ss = 0;
  int noise_cells = 0;
  for (size_t c = 0; c < centred.front().cells.size(); ++c) {
    std::vector<double> values;
    for (const auto& e : centred) values.push_back(e.cells[c]);
    const double sd = sample_sd(values);
    if (std::isfinite(sd)) {
      noise_ss += sd * sd;
      ++noise_cells;
    }
  }
  if (noise_cells == 0) return t;
  t.noise_sd = std::sqrt(noise_ss / noise_cells);
  // The symmetric mean over R repetitions averages two cells each: its noise variance is about
  // noise^2 / (2 R) off the diagonal.
  const Matrix m = symmetric_interaction(log_slowdown, all);
  std::vector<double> off;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) off.push_back(m.at(i, j));
  }
  const double observed = sample_sd(off);
  if (std::isfinite(observed)) {
    const double noise_var = t.noise_sd * t.noise_sd / (2.0 * t.repetitions);
    t.signal_sd = std::sqrt(std::max(0.0, observed * observed - noise_var));
  }
  return t;
}

namespace {

// The pooled two-sample t of a labeling's within-group pairs against its across-group pairs.
Partition score_partition(const Matrix& s, const std::vector<int>& group) {
  Partition p;
  p.group = group;
  p.groups = group.empty() ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  double sw = 0, swq = 0, sa = 0, saq = 0;
  int nw = 0, na = 0;
  for (int i = 0; i < s.n; ++i) {
    for (int j = i + 1; j < s.n; ++j) {
      const double v = s.at(i, j);
      if (!std::isfinite(v)) continue;
      if (group[i] == group[j]) {
        sw += v;
        swq += v * v;
        ++nw;
      } else {
        sa += v;
        saq += v * v;
        ++na;
      }
    }
  }
  p.within_pairs = nw;
  p.within_mean = nw > 0 ? sw / nw : kNaN;
  p.across_mean = na > 0 ? sa / na : kNaN;
  if (nw == 0 || na == 0 || nw + na < 3) return p;
  const double vw = nw > 1 ? (swq - sw * sw / nw) : 0;
  const double va = na > 1 ? (saq - sa * sa / na) : 0;
  const double pooled = std::sqrt(std::max(0.0, (vw + va) / (nw + na - 2)));
  const double se = pooled * std::sqrt(1.0 / nw + 1.0 / na);
  p.t = se > 0 ? (p.within_mean - p.across_mean) / se : (p.within_mean > p.across_mean ? 1e9 : 0);
  return p;
}

// Labels 0, 1, ... in order of first appearance.
std::vector<int> canonical(const std::vector<int>& labels) {
  std::vector<int> map;
  std::vector<int> out(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    auto it = std::find(map.begin(), map.end(), labels[i]);
    if (it == map.end()) {
      map.push_back(labels[i]);
      it = map.end() - 1;
    }
    out[i] = static_cast<int>(it - map.begin());
  }
  return out;
}

}  // namespace

Partition cluster_by_similarity(const Matrix& similarity) {
  const int n = similarity.n;
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  Partition best = score_partition(similarity, label);
  best.t = -std::numeric_limits<double>::infinity();
  if (n < 3) {
    best.t = 0;
    return best;
  }
  // Cluster link sums and counts of measured pairs, kept for the live clusters.
  std::vector<std::vector<int>> members(n);
  for (int i = 0; i < n; ++i) members[i] = {i};
  std::vector<bool> live(n, true);
  auto link = [&](int a, int b) {
    double sum = 0;
    int count = 0;
    for (int i : members[a]) {
      for (int j : members[b]) {
        const double v = similarity.at(i, j);
        if (std::isfinite(v)) {
          sum += v;
          ++count;
        }
      }
    }
    return count > 0 ? sum / count : -std::numeric_limits<double>::infinity();
  };
  for (int merges = 0; merges < n - 2; ++merges) {
    int best_a = -1, best_b = -1;
    double best_link = -std::numeric_limits<double>::infinity();
    for (int a = 0; a < n; ++a) {
      if (!live[a]) continue;
      for (int b = a + 1; b < n; ++b) {
        if (!live[b]) continue;
        const double l = link(a, b);
        if (l > best_link) {
          best_link = l;
          best_a = a;
          best_b = b;
        }
      }
    }
    if (best_a < 0) break;
    members[best_a].insert(members[best_a].end(), members[best_b].begin(), members[best_b].end());
    members[best_b].clear();
    live[best_b] = false;
    for (int i : members[best_a]) label[i] = best_a;
    const Partition p = score_partition(similarity, canonical(label));
    if (p.within_pairs > 0 && p.t > best.t) best = p;
  }
  if (!std::isfinite(best.t)) {
    std::iota(label.begin(), label.end(), 0);
    best = score_partition(similarity, label);
    best.t = 0;
  }
  return best;
}

double adjusted_rand_index(const std::vector<int>& a, const std::vector<int>& b) {
  const size_t n = a.size();
  if (n != b.size() || n < 2) return kNaN;
  const auto ca = canonical(a), cb = canonical(b);
  const int ka = *std::max_element(ca.begin(), ca.end()) + 1;
  const int kb = *std::max_element(cb.begin(), cb.end()) + 1;
  std::vector<double> table(static_cast<size_t>(ka) * kb, 0), rows(ka, 0), cols(kb, 0);
  for (size_t i = 0; i < n; ++i) {
    table[static_cast<size_t>(ca[i]) * kb + cb[i]] += 1;
    rows[ca[i]] += 1;
    cols[cb[i]] += 1;
  }
  auto pairs = [](double x) { return x * (x - 1) / 2; };
  double index = 0, sum_rows = 0, sum_cols = 0;
  for (double v : table) index += pairs(v);
  for (double v : rows) sum_rows += pairs(v);
  for (double v : cols) sum_cols += pairs(v);
  const double expected = sum_rows * sum_cols / pairs(static_cast<double>(n));
  const double maximum = (sum_rows + sum_cols) / 2;
  if (maximum == expected) return 1.0;  // both all singletons or both one group: identical
  return (index - expected) / (maximum - expected);
}

// ---- Paired conditions ---------------------------------------------------------------------------

PairedTest sign_flip_test(const std::vector<double>& differences, int random_flips, uint64_t seed) {
  PairedTest t;
  const auto d = finite(differences);
  t.n = static_cast<int>(d.size());
  if (t.n == 0) return t;
  t.mean_difference = mean(d);
  const double observed = t.mean_difference * t.n;
  // A tolerance for ties: a flip that gives the same sum up to rounding counts as reaching it.
  const double tolerance = 1e-12 * (1 + std::abs(observed));
  int64_t reached = 0, total = 0;
  if (t.n <= 16) {
    for (uint32_t mask = 0; mask < (1u << t.n); ++mask) {
      double sum = 0;
      for (int i = 0; i < t.n; ++i) sum += (mask >> i & 1u) ? -d[i] : d[i];
      if (sum >= observed - tolerance) ++reached;
      ++total;
    }
    t.p_value = static_cast<double>(reached) / static_cast<double>(total);
    return t;
  }
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution coin(0.5);
  for (int f = 0; f < random_flips; ++f) {
    double sum = 0;
    for (double v : d) sum += coin(rng) ? -v : v;
    if (sum >= observed - tolerance) ++reached;
  }
  t.p_value = (1.0 + static_cast<double>(reached)) / (1.0 + random_flips);
  return t;
}

// ---- Latency modes -------------------------------------------------------------------------------

namespace {

// Gaussian kernel density on an even grid over the sample's range (the sample binned first, so a
// large sample costs grid x bins, not grid x sample).
std::vector<double> kernel_density(const std::vector<double>& sorted, const std::vector<double>& grid) {
  const double sd = sample_sd(sorted);
  const double iqr = quantile_sorted(sorted, 0.75) - quantile_sorted(sorted, 0.25);
  double spread = std::min(sd, iqr / 1.34);
  if (!(spread > 0)) spread = sd > 0 ? sd : 1.0;
  // Silverman's rule, but never narrower than the values' resolution: timings in whole cycles
  // would otherwise show a comb of dips between the integers.
  std::vector<double> gaps;
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] > sorted[i - 1]) gaps.push_back(sorted[i] - sorted[i - 1]);
  }
  const double resolution = gaps.empty() ? 0 : median(gaps);
  const double h = std::max(0.9 * spread * std::pow(static_cast<double>(sorted.size()), -0.2), resolution);
  const double lo = sorted.front(), hi = sorted.back();
  const int bins = 1024;
  std::vector<double> weight(bins, 0);
  const double width = (hi - lo) / bins;
  for (double x : sorted) {
    const int b = width > 0 ? std::min(bins - 1, static_cast<int>((x - lo) / width)) : 0;
    weight[b] += 1;
  }
  std::vector<double> density(grid.size(), 0);
  for (size_t g = 0; g < grid.size(); ++g) {
    double sum = 0;
    for (int b = 0; b < bins; ++b) {
      if (weight[b] == 0) continue;
      const double z = (grid[g] - (lo + (b + 0.5) * width)) / h;
      if (std::abs(z) < 8) sum += weight[b] * std::exp(-0.5 * z * z);
    }
    density[g] = sum;
  }
  return density;
}

}  // namespace

Bimodality test_bimodality(std::vector<double> sample, const BimodalityOptions& options) {
  Bimodality out;
  sample = finite(sample);
  std::sort(sample.begin(), sample.end());
  if (!sample.empty() && options.trim > 0) {
    const double lo = quantile_sorted(sample, options.trim), hi = quantile_sorted(sample, 1 - options.trim);
    std::vector<double> kept;
    for (double x : sample) {
      if (x >= lo && x <= hi) kept.push_back(x);
    }
    sample.swap(kept);
  }
  out.n = static_cast<int>(sample.size());
  if (out.n < 10) return out;
  const double n = out.n;
  const double mu = mean(sample);
  double var = 0;
  for (double x : sample) var += (x - mu) * (x - mu);
  const double sd_all = std::sqrt(var / n);
  out.mean_low = out.mean_high = mu;
  out.sd_low = out.sd_high = sd_all;
  if (!(sd_all > 0)) return out;  // every value equal: one mode
  // A floor on each component's spread, the same for both models, so a component cannot collapse
  // onto a few repeated values (timings in whole cycles repeat).
  const double floor_sd = 0.05 * sd_all;
  double ll_one = 0;
  for (double x : sample) ll_one += log_normal_pdf(x, mu, sd_all);
  out.bic_one = -2 * ll_one + 2 * std::log(n);

  // Two components: k-means from the 10th and 90th percentiles, then EM.
  double m1 = quantile_sorted(sample, 0.1), m2 = quantile_sorted(sample, 0.9);
  for (int it = 0; it < 50; ++it) {
    double s1 = 0, s2 = 0;
    int c1 = 0, c2 = 0;
    for (double x : sample) {
      if (std::abs(x - m1) <= std::abs(x - m2)) {
        s1 += x;
        ++c1;
      } else {
        s2 += x;
        ++c2;
      }
    }
    if (c1 > 0) m1 = s1 / c1;
    if (c2 > 0) m2 = s2 / c2;
  }
  double w1 = 0.5, sd1 = sd_all / 2, sd2 = sd_all / 2;
  double w2 = 0.5;
  {
    double v1 = 0, v2 = 0;
    int c1 = 0, c2 = 0;
    for (double x : sample) {
      if (std::abs(x - m1) <= std::abs(x - m2)) {
        v1 += (x - m1) * (x - m1);
        ++c1;
      } else {
        v2 += (x - m2) * (x - m2);
        ++c2;
      }
    }
    if (c1 > 1) sd1 = std::sqrt(v1 / c1);
    if (c2 > 1) sd2 = std::sqrt(v2 / c2);
    w1 = std::clamp(c1 / n, 0.01, 0.99);
    w2 = 1 - w1;
  }
  sd1 = std::max(sd1, floor_sd);
  sd2 = std::max(sd2, floor_sd);
  double ll_two = -std::numeric_limits<double>::infinity();
  std::vector<double> r1(sample.size());
  for (int it = 0; it < 500; ++it) {
    double ll = 0;
    for (size_t i = 0; i < sample.size(); ++i) {
      const double a = std::log(w1) + log_normal_pdf(sample[i], m1, sd1);
      const double b = std::log(w2) + log_normal_pdf(sample[i], m2, sd2);
      const double total = log_sum_exp(a, b);
      r1[i] = std::exp(a - total);
      ll += total;
    }
    double n1 = 0, s1 = 0, s2 = 0;
    for (size_t i = 0; i < sample.size(); ++i) {
      n1 += r1[i];
      s1 += r1[i] * sample[i];
      s2 += (1 - r1[i]) * sample[i];
    }
    const double n2 = n - n1;
    if (n1 < 1e-9 || n2 < 1e-9) break;
    m1 = s1 / n1;
    m2 = s2 / n2;
    double q1 = 0, q2 = 0;
    for (size_t i = 0; i < sample.size(); ++i) {
      q1 += r1[i] * (sample[i] - m1) * (sample[i] - m1);
      q2 += (1 - r1[i]) * (sample[i] - m2) * (sample[i] - m2);
    }
    sd1 = std::max(std::sqrt(q1 / n1), floor_sd);
    sd2 = std::max(std::sqrt(q2 / n2), floor_sd);
    w1 = n1 / n;
    w2 = n2 / n;
    const bool converged = std::abs(ll - ll_two) < 1e-9 * n;
    ll_two = ll;
    if (converged) break;
  }
  out.bic_two = -2 * ll_two + 5 * std::log(n);
  if (m1 > m2) {
    std::swap(m1, m2);
    std::swap(sd1, sd2);
    std::swap(w1, w2);
  }
  out.mean_low = m1;
  out.sd_low = sd1;
  out.weight_low = w1;
  out.mean_high = m2;
  out.sd_high = sd2;
  out.weight_high = w2;
  out.ashman_d = std::sqrt(2.0) * (m2 - m1) / std::sqrt(sd1 * sd1 + sd2 * sd2);
  // Where the weighted densities cross between the means (bisection; the midpoint if they do not).
  auto diff = [&](double x) {
    return std::log(w1) + log_normal_pdf(x, m1, sd1) - std::log(w2) - log_normal_pdf(x, m2, sd2);
  };
  double lo = m1, hi = m2;
  if (diff(lo) > 0 && diff(hi) < 0) {
    for (int it = 0; it < 100; ++it) {
      const double mid = (lo + hi) / 2;
      (diff(mid) > 0 ? lo : hi) = mid;
    }
    out.threshold = (lo + hi) / 2;
  } else {
    out.threshold = (m1 + m2) / 2;
  }
  // The kernel density's dip between the two means against the lower of the peaks on either side.
  std::vector<double> grid(512);
  for (size_t g = 0; g < grid.size(); ++g) {
    grid[g] = sample.front() + (sample.back() - sample.front()) * static_cast<double>(g) / (grid.size() - 1);
  }
  const auto density = kernel_density(sample, grid);
  size_t dip = 0;
  double dip_value = std::numeric_limits<double>::infinity();
  for (size_t g = 0; g < grid.size(); ++g) {
    if (grid[g] > m1 && grid[g] < m2 && density[g] < dip_value) {
      dip_value = density[g];
      dip = g;
    }
  }
  if (std::isfinite(dip_value)) {
    double peak_low = 0, peak_high = 0;
    for (size_t g = 0; g <= dip; ++g) peak_low = std::max(peak_low, density[g]);
    for (size_t g = dip; g < grid.size(); ++g) peak_high = std::max(peak_high, density[g]);
    const double lower_peak = std::min(peak_low, peak_high);
    out.valley_ratio = lower_peak > 0 ? dip_value / lower_peak : 1;
  }
  out.bimodal = out.bic_one - out.bic_two >= options.min_bic_gain && out.ashman_d >= options.min_ashman_d &&
                std::min(w1, w2) >= options.min_weight && out.valley_ratio <= options.max_valley_ratio;
  return out;
}

double cohen_kappa(const std::vector<bool>& a, const std::vector<bool>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return kNaN;
  double both = 0, neither = 0, pa = 0, pb = 0;
  for (size_t i = 0; i < n; ++i) {
    both += a[i] && b[i];
    neither += !a[i] && !b[i];
    pa += a[i];
    pb += b[i];
  }
  const double observed = (both + neither) / n;
  pa /= n;
  pb /= n;
  const double chance = pa * pb + (1 - pa) * (1 - pb);
  if (chance >= 1) return observed >= 1 ? 1.0 : 0.0;
  return (observed - chance) / (1 - chance);
}

}  // namespace concord::channel
