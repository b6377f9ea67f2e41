// The channel probe's analysis on synthetic timings (bench/channel, docs/channel_probe.md):
// planted channel groups are recovered, noise is not called structure, one latency mode is not
// called two, and a malformed raw file is refused with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "channel_analysis.h"
#include "channel_raw.h"
#include "channel_stats.h"

namespace concord::channel {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Synthetic measurements ------------------------------------------------------------------------

// What a synthetic map plants: classes in `groups` groups (group = class index mod groups, then
// shuffled), a victim slowdown `within` for two classes of one group and `across` otherwise,
// per-class victim speeds and aggressor strengths (main effects a channel test must ignore), and
// multiplicative noise of `noise` SD on every run.
struct Planted {
  int classes = 32;
  int groups = 4;
  double within = 1.5;
  double across = 1.1;
  double noise = 0.03;
  double aggressor_spread = 0.15;  // aggressor j slows every victim by up to this much more
  int reps = 4;
  std::string kind = "cross_page";
  bool discard = true;
  uint64_t seed = 7;
};

struct PlantedMap {
  InterferenceMap map;
  std::vector<int> truth;  // planted group of each class
};

PlantedMap planted_map(const Planted& p) {
  std::mt19937_64 rng(p.seed);
  std::normal_distribution<double> noise(0, p.noise);
  std::uniform_real_distribution<double> unit(0, 1);
  PlantedMap out;
  auto& m = out.map;
  m.name = p.kind + "_2048";
  m.kind = p.kind;
  m.granularity = 2048;
  m.discard = p.discard;
  m.page = p.kind == "same_page" ? 3 : -1;
  m.reps = p.reps;
  std::vector<int> offsets(1024);
  for (int i = 0; i < 1024; ++i) offsets[i] = i;
  std::shuffle(offsets.begin(), offsets.end(), rng);
  m.offsets.assign(offsets.begin(), offsets.begin() + p.classes);
  for (int i = 0; i < p.classes; ++i) out.truth.push_back(i % p.groups);
  std::shuffle(out.truth.begin(), out.truth.end(), rng);
  std::vector<double> speed(p.classes), strength(p.classes);
  for (int i = 0; i < p.classes; ++i) {
    speed[i] = 20 + 40 * unit(rng);              // GB/s alone: classes differ
    strength[i] = 1 + p.aggressor_spread * unit(rng);
  }
  const int k = p.classes;
  m.alone.resize(static_cast<size_t>(p.reps) * k);
  m.shared.resize(static_cast<size_t>(p.reps) * k * k);
  for (int r = 0; r < p.reps; ++r) {
    for (int i = 0; i < k; ++i) {
      const double alone = speed[i] * std::exp(noise(rng));
      m.alone[static_cast<size_t>(r) * k + i] = alone;
      for (int j = 0; j < k; ++j) {
        const double slowdown = (out.truth[i] == out.truth[j] ? p.within : p.across) * strength[j];
        double v = speed[i] / slowdown * std::exp(noise(rng));
        if (p.kind == "same_page" && i == j) v = kNaN;
        m.shared[(static_cast<size_t>(r) * k + i) * k + j] = v;
      }
    }
  }
  return out;
}

// Victim throughput of a conditions experiment: alone, and beside an aggressor on equal, disjoint
// and random offsets, with `equal_extra` more slowdown on equal offsets than on disjoint ones.
ConditionsExperiment planted_conditions(double equal_extra, int reps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 0.02);
  ConditionsExperiment e;
  e.granularity = 2048;
  e.offsets_per_set = 4;
  for (int r = 0; r < reps; ++r) {
    ConditionRep rep;
    rep.victim_offsets = {r, r + 100, r + 200, r + 300};
    const double alone = 900 + 10 * r;
    rep.alone = alone * std::exp(noise(rng));
    rep.alone_again = alone * std::exp(noise(rng));
    rep.disjoint = alone / 1.2 * std::exp(noise(rng));
    rep.random = alone / 1.21 * std::exp(noise(rng));
    rep.equal = alone / (1.2 * (1 + equal_extra)) * std::exp(noise(rng));
    e.reps.push_back(rep);
  }
  return e;
}

Calibration good_calibration() {
  Calibration c;
  for (int i = 0; i < 64; ++i) {
    c.l2_hit_cycles.push_back(260 + i % 5);
    c.dram_cycles.push_back(600 + i % 17);
    c.after_discard_cycles.push_back(590 + i % 13);
  }
  c.stream_gbps = 1800;
  c.class_gbps = 2500;
  c.class_discard_gbps = 60;
  c.sm_clock_mhz_start = 1755;
  c.sm_clock_mhz_end = 1755;
  return c;
}

// Pair latencies: a base line and its partner at every delta; `slow_share` of the deltas (the same
// ones for every base, as a page-invariant bank mapping would give) take `conflict` more cycles.
LatencyProbe planted_latency(double slow_share, double conflict, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 12);
  std::uniform_real_distribution<double> unit(0, 1);
  LatencyProbe l;
  l.granularity = 2048;
  l.reps = 5;
  for (int b = 0; b < 8; ++b) {
    l.base_pages.push_back(10 + 3 * b);
    l.base_offsets.push_back(b % 2 == 0 ? 0 : 512);
  }
  for (int d = 1; d < 1024; ++d) l.deltas.push_back(d);
  std::vector<bool> slow(l.deltas.size());
  for (auto&& s : slow) s = unit(rng) < slow_share;
  for (size_t b = 0; b < l.base_pages.size(); ++b) {
    const double page = 20 * unit(rng);  // pages differ by a constant
    for (size_t d = 0; d < l.deltas.size(); ++d) {
      for (int r = 0; r < l.reps; ++r) l.pair_cycles.push_back(640 + page + (slow[d] ? conflict : 0) + noise(rng));
    }
    for (int r = 0; r < l.reps; ++r) l.single_cycles.push_back(600 + page + noise(rng));
  }
  return l;
}

RawProbe raw_with(std::vector<InterferenceMap> maps, std::vector<ConditionsExperiment> conditions,
                  std::optional<LatencyProbe> latency) {
  RawProbe raw;
  raw.provenance = {{"build", {{"version", "0.1.0"}, {"commit", "abc"}}},
                    {"device_info", {{"name", "synthetic"}, {"driver_version", "0"}, {"cuda_version", "13.0"}}}};
  raw.config.mode = "quick";
  raw.config.seed = 1;
  raw.config.buffer_bytes = int64_t{8} << 30;
  raw.config.page_bytes = 2 << 20;
  raw.config.victim_sms = 66;
  raw.config.aggressor_sms = 66;
  raw.config.victim_warps_per_sm = 8;
  raw.config.aggressor_warps_per_sm = 32;
  raw.config.run_us = 1000;
  raw.calibration = good_calibration();
  raw.maps = std::move(maps);
  raw.conditions = std::move(conditions);
  raw.latency = std::move(latency);
  return raw;
}

std::vector<double> normal_sample(int n, double mu, double sd, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mu, sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ---- Statistics --------------------------------------------------------------------------------------

TEST(ChannelStats, AdjustedRandIndexIgnoresLabelNamesAndScoresUnrelatedNearZero) {
  EXPECT_DOUBLE_EQ(adjusted_rand_index({0, 0, 1, 1, 2, 2}, {5, 5, 3, 3, 9, 9}), 1.0);
  EXPECT_LT(adjusted_rand_index({0, 0, 1, 1, 2, 2}, {0, 1, 2, 0, 1, 2}), 0.0);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> label(0, 3);
  std::vector<int> a(400), b(400);
  for (int i = 0; i < 400; ++i) {
    a[i] = label(rng);
    b[i] = label(rng);
  }
  EXPECT_NEAR(adjusted_rand_index(a, b), 0.0, 0.05);
}

TEST(ChannelStats, SignFlipTestSeparatesAShiftFromNoise) {
  const PairedTest shifted = sign_flip_test({0.10, 0.12, 0.09, 0.11, 0.10, 0.13, 0.08, 0.12}, 1000, 1);
  EXPECT_EQ(shifted.n, 8);
  EXPECT_NEAR(shifted.p_value, 1.0 / 256, 1e-12);  // exact: only the identity reaches it
  const PairedTest centred = sign_flip_test({0.1, -0.1, 0.05, -0.04, 0.02, -0.03, 0.01, -0.02}, 1000, 1);
  EXPECT_GT(centred.p_value, 0.2);
  // Above 16 pairs the flips are drawn.
  std::vector<double> many(40, 0.05);
  EXPECT_LT(sign_flip_test(many, 5000, 2).p_value, 0.001);
}

TEST(ChannelStats, OneGaussianIsNotCalledBimodal) {
  const Bimodality b = test_bimodality(normal_sample(20000, 650, 15, 1));
  EXPECT_FALSE(b.bimodal) << "D " << b.ashman_d << " valley " << b.valley_ratio;
}

TEST(ChannelStats, SkewedAndHeavyTailedSamplesAreNotCalledBimodal) {
  std::mt19937_64 rng(2);
  std::gamma_distribution<double> gamma(3.0, 20.0);
  std::lognormal_distribution<double> lognormal(6.5, 0.25);
  std::vector<double> g(20000), ln(20000);
  for (auto& x : g) x = 600 + gamma(rng);
  for (auto& x : ln) x = lognormal(rng);
  EXPECT_FALSE(test_bimodality(g).bimodal);
  EXPECT_FALSE(test_bimodality(ln).bimodal);
  // Whole cycles (repeated values) and a few stray outliers: still one mode.
  auto whole = normal_sample(20000, 650, 6, 4);
  for (auto& x : whole) x = std::round(x);
  for (int i = 0; i < 30; ++i) whole[i] = 3000 + i;
  EXPECT_FALSE(test_bimodality(whole).bimodal);
}

TEST(ChannelStats, AShoulderOrAFewStragglersAreNotASecondMode) {
  // 10% three SDs up: two Gaussians fit far better than one, but the density has no dip.
  auto shoulder = normal_sample(18000, 640, 10, 9);
  const auto up = normal_sample(2000, 670, 10, 10);
  shoulder.insert(shoulder.end(), up.begin(), up.end());
  const Bimodality s = test_bimodality(shoulder);
  EXPECT_GT(s.bic_one - s.bic_two, 10);
  EXPECT_GT(s.ashman_d, 2);
  EXPECT_FALSE(s.bimodal) << "valley " << s.valley_ratio;
  // 0.8% far above: mostly trimmed, and what is left is too small to be a mode.
  auto stragglers = normal_sample(19840, 640, 10, 11);
  const auto far = normal_sample(160, 900, 10, 12);
  stragglers.insert(stragglers.end(), far.begin(), far.end());
  EXPECT_FALSE(test_bimodality(stragglers).bimodal);
}

TEST(ChannelStats, PlantedSecondModeIsFoundWithItsThreshold) {
  auto sample = normal_sample(19000, 640, 10, 5);
  const auto slow = normal_sample(1000, 740, 10, 6);  // 5% bank conflicts, +100 cycles
  sample.insert(sample.end(), slow.begin(), slow.end());
  const Bimodality b = test_bimodality(sample);
  EXPECT_TRUE(b.bimodal);
  EXPECT_NEAR(b.mean_low, 640, 2);
  EXPECT_NEAR(b.mean_high, 740, 3);
  EXPECT_NEAR(b.weight_high, 0.05, 0.01);
  EXPECT_GT(b.threshold, 670);
  EXPECT_LT(b.threshold, 720);
  // Half and half: also two modes.
  auto even = normal_sample(5000, 600, 15, 7);
  const auto other = normal_sample(5000, 700, 15, 8);
  even.insert(even.end(), other.begin(), other.end());
  EXPECT_TRUE(test_bimodality(even).bimodal);
}

TEST(ChannelStats, ClusteringRecoversPlantedBlocks) {
  const PlantedMap p = planted_map({});
  std::vector<Matrix> logs;
  const int k = p.map.classes();
  for (int r = 0; r < p.map.reps; ++r) {
    Matrix y(k);
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        y.at(i, j) = std::log(p.map.alone[r * k + i] / p.map.shared[(r * k + i) * k + j]);
      }
    }
    logs.push_back(y);
  }
  const Partition part = cluster_by_similarity(symmetric_interaction(logs, {0, 1, 2, 3}));
  EXPECT_EQ(part.groups, 4);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(part.group, p.truth), 1.0);
}

// ---- Interference maps -------------------------------------------------------------------------------

TEST(ChannelMaps, PlantedCrossPageGroupsAreRecoveredAsColourClasses) {
  const PlantedMap p = planted_map({});
  const MapFinding f = analyze_map(p.map, analyze_calibration(good_calibration()), {});
  EXPECT_EQ(f.status, "colour_classes") << f.note;
  EXPECT_LT(f.interaction.p_value, 0.001);
  EXPECT_GT(f.interaction.reliability, 0.9);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(f.partition.group, p.truth), 1.0);
  EXPECT_DOUBLE_EQ(f.stability, 1.0);
  EXPECT_EQ(f.groups.size(), 4u);
  EXPECT_NEAR(f.contrast, 1.5 / 1.1, 0.03);
  // The groups name chunk offsets, not class indices.
  for (const auto& g : f.groups) {
    for (int offset : g) EXPECT_NE(std::find(p.map.offsets.begin(), p.map.offsets.end(), offset), p.map.offsets.end());
  }
}

TEST(ChannelMaps, SmallChannelGroupsAmongManyAreRecovered) {
  // 48 classes over 24 channels: mostly pairs, as single offsets on a GPU with many channels give.
  Planted planted;
  planted.classes = 48;
  planted.groups = 24;
  planted.within = 1.8;
  planted.across = 1.05;
  planted.reps = 3;
  const PlantedMap p = planted_map(planted);
  const MapFinding f = analyze_map(p.map, analyze_calibration(good_calibration()), {});
  EXPECT_EQ(f.status, "colour_classes") << f.note;
  EXPECT_GT(adjusted_rand_index(f.partition.group, p.truth), 0.95);
}

TEST(ChannelMaps, PureNoiseIsNoStructure) {
  Planted planted;
  planted.within = planted.across = 1.2;
  for (uint64_t seed : {11, 12, 13}) {
    planted.seed = seed;
    const MapFinding f = analyze_map(planted_map(planted).map, analyze_calibration(good_calibration()), {});
    EXPECT_EQ(f.status, "no_structure") << "seed " << seed << ": p " << f.interaction.p_value;
    EXPECT_LT(f.stability, 0.5);
  }
}

TEST(ChannelMaps, AnAggressorThatSlowsEveryoneIsNotAChannel) {
  Planted planted;
  planted.within = planted.across = 1.2;
  planted.aggressor_spread = 1.0;  // strong column effects, no interaction
  const MapFinding f = analyze_map(planted_map(planted).map, analyze_calibration(good_calibration()), {});
  EXPECT_EQ(f.status, "no_structure");
}

TEST(ChannelMaps, SamePageMapWithoutItsDiagonalIsAnalysed) {
  Planted planted;
  planted.kind = "same_page";
  const PlantedMap p = planted_map(planted);
  const MapFinding f = analyze_map(p.map, analyze_calibration(good_calibration()), {});
  EXPECT_EQ(f.status, "colour_classes") << f.note;
  EXPECT_EQ(f.invalid_runs, 0);  // the diagonal is not a run
  EXPECT_DOUBLE_EQ(adjusted_rand_index(f.partition.group, p.truth), 1.0);
}

TEST(ChannelMaps, DiscardedReadsThatStayInTheL2MakeAMapUnusable) {
  Calibration c = good_calibration();
  c.after_discard_cycles.assign(64, 265);  // a discarded line still hits the L2
  const MapFinding f = analyze_map(planted_map({}).map, analyze_calibration(c), {});
  EXPECT_EQ(f.status, "unusable");
  EXPECT_NE(f.note.find("discard"), std::string::npos);
}

TEST(ChannelMaps, MissingRunsBeyondTheLimitMakeAMapUnusable) {
  PlantedMap p = planted_map({});
  for (size_t c = 0; c < p.map.shared.size(); c += 5) p.map.shared[c] = kNaN;  // 20% missing
  const MapFinding f = analyze_map(p.map, analyze_calibration(good_calibration()), {});
  EXPECT_EQ(f.status, "unusable");
  EXPECT_NE(f.note.find("without a measurement"), std::string::npos);
}

// ---- Conditions and latency --------------------------------------------------------------------------

TEST(ChannelConditions, EqualOffsetsSlowingMoreIsOffsetDependence) {
  const ConditionsFinding f = analyze_conditions(planted_conditions(0.3, 12, 1), {});
  EXPECT_TRUE(f.offset_dependent);
  EXPECT_NEAR(f.effect, 0.3, 0.05);
  EXPECT_LT(f.p_value, 0.001);
  EXPECT_NEAR(f.noise_cv, 0.02, 0.01);
}

TEST(ChannelConditions, NoDifferenceIsNotOffsetDependence) {
  const ConditionsFinding f = analyze_conditions(planted_conditions(0.0, 12, 2), {});
  EXPECT_FALSE(f.offset_dependent);
  EXPECT_LT(std::abs(f.effect), 0.03);
}

TEST(ChannelLatency, RepeatableSlowDeltasAreBankConflicts) {
  const LatencyFinding f = analyze_latency(planted_latency(0.04, 120, 3), analyze_calibration(good_calibration()), {});
  EXPECT_TRUE(f.modes.bimodal);
  EXPECT_TRUE(f.conflicts_visible);
  EXPECT_TRUE(f.page_invariant);
  EXPECT_NEAR(f.slow_share, 0.04, 0.01);
  EXPECT_GT(f.repeat_kappa, 0.9);
}

TEST(ChannelLatency, OneModeIsNoConflict) {
  const LatencyFinding f = analyze_latency(planted_latency(0.0, 0, 4), analyze_calibration(good_calibration()), {});
  EXPECT_FALSE(f.modes.bimodal);
  EXPECT_FALSE(f.conflicts_visible);
}

TEST(ChannelLatency, AFlushThatDoesNotReachDramMakesItUnusable) {
  Calibration c = good_calibration();
  c.dram_cycles.assign(64, 270);
  const LatencyFinding f = analyze_latency(planted_latency(0.04, 120, 3), analyze_calibration(c), {});
  EXPECT_FALSE(f.usable);
  EXPECT_FALSE(f.conflicts_visible);
}

// ---- Verdicts ------------------------------------------------------------------------------------------

TEST(ChannelVerdict, PlantedCrossPageGroupsAreSteerableByOffset) {
  const Report r = analyze(raw_with({planted_map({}).map}, {planted_conditions(0.3, 12, 1)}, planted_latency(0, 0, 1)));
  EXPECT_EQ(r.verdict, "steerable_by_offset");
  EXPECT_NE(r.recommendation.find("allocation hook"), std::string::npos);
}

TEST(ChannelVerdict, OffsetDependenceWithoutClassesAsksForALargerMap) {
  Planted noise;
  noise.within = noise.across = 1.2;
  const Report r = analyze(raw_with({planted_map(noise).map}, {planted_conditions(0.3, 12, 1)}, std::nullopt));
  EXPECT_EQ(r.verdict, "steerable_by_offset");
  EXPECT_NE(r.recommendation.find("map more classes"), std::string::npos) << r.recommendation;
}

TEST(ChannelVerdict, PureNoiseIsNotSteerableAndNamesTheSubstitute) {
  Planted noise;
  noise.within = noise.across = 1.2;
  Planted same_page = noise;
  same_page.kind = "same_page";
  const Report r = analyze(raw_with({planted_map(noise).map, planted_map(same_page).map},
                                    {planted_conditions(0.0, 12, 5)}, planted_latency(0, 0, 5)));
  EXPECT_EQ(r.verdict, "not_steerable");
  EXPECT_NE(r.recommendation.find("L2 persisting window"), std::string::npos);
  const auto j = report_json(r);
  EXPECT_EQ(j["verdict"], "not_steerable");
  EXPECT_EQ(j["maps"].size(), 2u);
  EXPECT_FALSE(j["latency"]["bimodal"].get<bool>());
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("# VRAM channel probe: not_steerable"), std::string::npos);
  EXPECT_NE(md.find("| cross_page_2048 |"), std::string::npos);
}

TEST(ChannelVerdict, StructureWithinAPageOnlyIsVisiblePerPage) {
  Planted noise;
  noise.within = noise.across = 1.2;
  Planted same_page;
  same_page.kind = "same_page";
  const Report r = analyze(
      raw_with({planted_map(noise).map, planted_map(same_page).map}, {planted_conditions(0.0, 12, 6)}, std::nullopt));
  EXPECT_EQ(r.verdict, "visible_per_page");
}

TEST(ChannelVerdict, NothingUsableIsInconclusive) {
  Calibration c = good_calibration();
  c.dram_cycles.assign(64, 270);  // neither flush nor discard reaches DRAM
  RawProbe raw = raw_with({planted_map({}).map}, {}, planted_latency(0.04, 120, 3));
  raw.calibration = c;
  EXPECT_EQ(analyze(raw).verdict, "inconclusive");
}

// ---- The raw file ----------------------------------------------------------------------------------------

RawProbe full_raw() {
  return raw_with({planted_map({}).map}, {planted_conditions(0.1, 6, 1)}, planted_latency(0.04, 120, 2));
}

TEST(ChannelRaw, JsonRoundTripKeepsEveryFigure) {
  RawProbe raw = full_raw();
  raw.maps[0].shared[5] = kNaN;  // a run without a measurement travels as null
  const auto back = raw_from_json(raw_to_json(raw));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->config.buffer_bytes, raw.config.buffer_bytes);
  EXPECT_EQ(back->maps[0].offsets, raw.maps[0].offsets);
  EXPECT_TRUE(std::isnan(back->maps[0].shared[5]));
  EXPECT_DOUBLE_EQ(back->maps[0].shared[6], raw.maps[0].shared[6]);
  EXPECT_EQ(back->conditions[0].reps[3].victim_offsets, raw.conditions[0].reps[3].victim_offsets);
  EXPECT_DOUBLE_EQ(back->conditions[0].reps[3].equal, raw.conditions[0].reps[3].equal);
  ASSERT_TRUE(back->latency.has_value());
  EXPECT_EQ(back->latency->pair_cycles, raw.latency->pair_cycles);
  EXPECT_EQ(back->calibration.dram_cycles, raw.calibration.dram_cycles);
  EXPECT_EQ(analyze(*back).verdict, analyze(raw).verdict);
}

// The message of parsing `j` after `edit`: it must be an error.
template <typename Edit>
std::string parse_error_of(Edit edit) {
  auto j = raw_to_json(full_raw());
  edit(j);
  const auto r = raw_from_json(j);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? std::string() : r.status().message();
}

TEST(ChannelRaw, BadOrMissingFieldsNameTheField) {
  EXPECT_EQ(parse_error_of([](auto& j) { j.erase("config"); }), "config: missing");
  EXPECT_EQ(parse_error_of([](auto& j) { j["config"].erase("page_bytes"); }), "config.page_bytes: missing");
  EXPECT_EQ(parse_error_of([](auto& j) { j["format"] = "other"; }), "format: 'other' is not concord-channel-probe");
  EXPECT_EQ(parse_error_of([](auto& j) { j["version"] = 2; }),
            "version: 2 is not the version this analysis reads (1)");
  EXPECT_EQ(parse_error_of([](auto& j) { j["maps"][0]["shared"].erase(0); }),
            "maps[0].shared: expected 4 x 32 x 32 = 4096 numbers, got 4095");
  EXPECT_EQ(parse_error_of([](auto& j) { j["maps"][0]["kind"] = "diagonal"; }),
            "maps[0].kind: 'diagonal' is neither cross_page nor same_page");
  EXPECT_EQ(parse_error_of([](auto& j) { j["maps"][0]["offsets"][3] = 1024; }),
            "maps[0].offsets[3]: 1024 is outside [0, 1024)");
  EXPECT_EQ(parse_error_of([](auto& j) { j["maps"][0]["granularity"] = 3000; }),
            "maps[0].granularity: 3000 is not a power of two");
  EXPECT_EQ(parse_error_of([](auto& j) { j["maps"][0]["alone"][2] = "fast"; }),
            "maps[0].alone[2]: expected a finite non-negative number or null, got \"fast\"");
  EXPECT_EQ(parse_error_of([](auto& j) { j["conditions"][0]["reps"][1].erase("disjoint"); }),
            "conditions[0].reps[1].disjoint: missing");
  EXPECT_EQ(parse_error_of([](auto& j) { j["conditions"][0]["reps"][1]["victim_offsets"] = {1, 2}; }),
            "conditions[0].reps[1].victim_offsets: expected offsets_per_set = 4 offsets, got 2");
  EXPECT_EQ(parse_error_of([](auto& j) { j["latency"]["pair_cycles"][7] = nullptr; }),
            "latency.pair_cycles[7]: expected a finite non-negative number, got null");
  EXPECT_EQ(parse_error_of([](auto& j) { j["latency"]["deltas"][0] = 0; }),
            "latency.deltas[0]: a delta of 0 is the base itself");
  EXPECT_EQ(parse_error_of([](auto& j) { j["calibration"]["dram_cycles"] = 5; }),
            "calibration.dram_cycles: expected an array, got number");
}

// ---- The command -----------------------------------------------------------------------------------------

struct CommandOutput {
  int status;
  std::string text;
};

CommandOutput run_command(const std::string& command) {
  CommandOutput out{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.text.append(buffer, n);
  const int raw = pclose(pipe);
  out.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

TEST(ChannelAnalyzeCommand, WritesVerdictAndSummaryOrNamesTheBadField) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "channel_analyze";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto raw_path = dir / "raw.json";
  std::ofstream(raw_path) << raw_to_json(full_raw()).dump();
  const auto ok = run_command(std::string(CONCORD_CHANNEL_ANALYZE) + " " + raw_path.string() + " --out-dir " +
                              (dir / "out").string());
  ASSERT_EQ(ok.status, 0) << ok.text;
  EXPECT_NE(ok.text.find("# VRAM channel probe: steerable_by_offset"), std::string::npos) << ok.text;
  std::ifstream verdict(dir / "out" / "verdict.json");
  ASSERT_TRUE(verdict.good());
  EXPECT_EQ(nlohmann::json::parse(verdict)["verdict"], "steerable_by_offset");
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "summary.md"));

  auto j = raw_to_json(full_raw());
  j["latency"].erase("reps");
  const auto bad_path = dir / "bad.json";
  std::ofstream(bad_path) << j.dump();
  const auto bad = run_command(std::string(CONCORD_CHANNEL_ANALYZE) + " " + bad_path.string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.text.find("bad.json: latency.reps: missing"), std::string::npos) << bad.text;
}

}  // namespace
}  // namespace concord::channel
