// Statistics of the VRAM channel probe's analysis (docs/channel_probe.md): whether interference
// depends on which offsets two tenants touch beyond repeat noise, a grouping of offsets into
// colour classes and its stability, and whether a latency sample has two modes. Plain C++, no
// CUDA: the CPU tests run it on synthetic timings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace concord::channel {

// A square matrix of doubles, row-major; NaN marks a cell that was not measured.
struct Matrix {
  int n = 0;
  std::vector<double> cells;

  Matrix() = default;
  explicit Matrix(int size, double fill = 0.0) : n(size), cells(static_cast<size_t>(size) * size, fill) {}
  double& at(int i, int j) { return cells[static_cast<size_t>(i) * n + j]; }
  double at(int i, int j) const { return cells[static_cast<size_t>(i) * n + j]; }
};

// Median of the finite values (NaN when there are none).
double median(std::vector<double> values);
// Arithmetic mean and sample standard deviation of the finite values (NaN when too few).
double mean(const std::vector<double>& values);
double sample_sd(const std::vector<double>& values);

// ---- Interference maps -------------------------------------------------------------------------
// One repetition of a map holds log(slowdown) of the victim reading offset class i (row) while
// the aggressor hammers class j (column). A victim that is slower beside every aggressor (a row
// effect) or an aggressor that slows every victim (a column effect) says nothing about channels;
// what would is the interaction: victim i slowed by aggressor j more than the two main effects
// predict, repeatably.

// The interaction part of one repetition: each cell less its row and column means plus the grand
// mean (double centring over the measured cells).
Matrix double_centred(const Matrix& log_slowdown);
// The mean over `reps` of their double-centred matrices, made symmetric (cell (i, j) and (j, i)
// averaged where both are measured): the interference two classes cause each other.
Matrix symmetric_interaction(const std::vector<Matrix>& log_slowdown, const std::vector<int>& reps);

struct InteractionTest {
  int repetitions = 0;
  int cells = 0;             // distinct cells (i <= j) measured in both halves
  double reliability = 0;    // Pearson correlation of the two halves' interaction matrices
  double p_value = 1;        // share of cell permutations of one half reaching that correlation
  double noise_sd = 0;       // one run's interaction cell: SD across repetitions (log units)
  double signal_sd = 0;      // SD of the mean interaction beyond what that noise explains
};
// Splits the repetitions into halves (even and odd indices), correlates the halves' symmetric
// interaction matrices, and permutes one half's cells `permutations` times (seeded) for the null
// of no repeatable interaction. Needs two repetitions or more.
InteractionTest test_interaction(const std::vector<Matrix>& log_slowdown, int permutations, uint64_t seed);

// A grouping of the map's classes: group[i] in [0, groups).
struct Partition {
  std::vector<int> group;
  int groups = 0;
  int within_pairs = 0;   // off-diagonal pairs inside a group
  double within_mean = 0; // mean similarity of those pairs
  double across_mean = 0; // mean similarity of the pairs across groups
  double t = 0;           // pooled two-sample t of within against across
};
// Average-linkage clustering of a symmetric similarity (off-diagonal cells; NaN cells left out),
// cut where the within-group pairs stand out most from the pairs across groups (largest t). All
// singletons (no within pair) when nothing can be grouped.
Partition cluster_by_similarity(const Matrix& similarity);

// Adjusted Rand index of two labelings of the same items: 1 identical, about 0 unrelated.
double adjusted_rand_index(const std::vector<int>& a, const std::vector<int>& b);

// ---- Paired conditions ---------------------------------------------------------------------------
struct PairedTest {
  int n = 0;
  double mean_difference = 0;
  double p_value = 1;  // one-sided: the mean difference is above 0
};
// Sign-flip permutation test of paired differences (exact up to 16 pairs, else `random_flips`
// seeded draws). NaN differences are left out.
PairedTest sign_flip_test(const std::vector<double>& differences, int random_flips, uint64_t seed);

// ---- Latency modes -------------------------------------------------------------------------------
struct BimodalityOptions {
  double min_bic_gain = 10;      // BIC of one Gaussian less BIC of two, at least
  double min_ashman_d = 2;       // separation of the two components (2: no shared shoulder)
  double min_weight = 0.01;      // the smaller component's weight, at least
  double max_valley_ratio = 0.7; // kernel density between the modes over the lower peak, at most
  double trim = 0.005;           // share of each tail left out before fitting (stray outliers)
};

struct Bimodality {
  int n = 0;                  // values fitted (after trimming)
  double mean_low = 0, sd_low = 0, weight_low = 1;
  double mean_high = 0, sd_high = 0, weight_high = 0;
  double bic_one = 0, bic_two = 0;
  double ashman_d = 0;
  double threshold = 0;       // where the weighted component densities cross between the means
  double valley_ratio = 1;    // kernel density at the dip over the lower of the two peaks
  bool bimodal = false;
};
// Fits one Gaussian and a two-component Gaussian mixture (EM) and calls the sample bimodal when the
// mixture wins on BIC, its components are separated (Ashman's D), the smaller one is not a handful
// of stragglers, and the kernel density really dips between them.
Bimodality test_bimodality(std::vector<double> sample, const BimodalityOptions& options = {});

// Cohen's kappa of two binary classifications of the same items (1: identical, 0: chance).
double cohen_kappa(const std::vector<bool>& a, const std::vector<bool>& b);

}  // namespace concord::channel
