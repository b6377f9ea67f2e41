#include "channel_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>

namespace concord::channel {

using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// log(alone / shared): the victim's log slowdown, NaN where either run is missing.
double log_slowdown(double alone, double shared) {
  if (!std::isfinite(alone) || !std::isfinite(shared) || alone <= 0 || shared <= 0) return kNaN;
  return std::log(alone / shared);
}

double geometric_mean_of_logs(const std::vector<double>& logs) {
  const double m = mean(logs);
  return std::isfinite(m) ? std::exp(m) : kNaN;
}

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string fixed(double v, int digits) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "-"; }

}  // namespace

CalibrationFinding analyze_calibration(const Calibration& c) {
  CalibrationFinding f;
  f.l2_hit_cycles = median(c.l2_hit_cycles);
  f.dram_cycles = median(c.dram_cycles);
  f.after_discard_cycles = median(c.after_discard_cycles);
  // A DRAM access on Hopper takes about twice an L2 hit; 1.2x leaves room for any clock.
  f.flush_reaches_dram = std::isfinite(f.l2_hit_cycles) && std::isfinite(f.dram_cycles) && f.dram_cycles >= 1.2 * f.l2_hit_cycles;
  f.discard_reaches_dram = f.flush_reaches_dram && std::isfinite(f.after_discard_cycles) &&
                           f.after_discard_cycles - f.l2_hit_cycles >= 0.5 * (f.dram_cycles - f.l2_hit_cycles);
  f.stream_gbps = c.stream_gbps;
  f.class_gbps = c.class_gbps;
  f.class_discard_gbps = c.class_discard_gbps;
  f.sm_clock_mhz_start = c.sm_clock_mhz_start;
  f.sm_clock_mhz_end = c.sm_clock_mhz_end;
  return f;
}

ConditionsFinding analyze_conditions(const ConditionsExperiment& e, const AnalysisOptions& options) {
  ConditionsFinding f;
  f.granularity = e.granularity;
  f.offsets_per_set = e.offsets_per_set;
  f.reps = static_cast<int>(e.reps.size());
  std::vector<double> eq, dis, rnd, eq_vs_dis, rnd_vs_dis, noise;
  for (const auto& r : e.reps) {
    const double alone = mean({r.alone, r.alone_again});
    const double le = log_slowdown(alone, r.equal), ld = log_slowdown(alone, r.disjoint), lr = log_slowdown(alone, r.random);
    eq.push_back(le);
    dis.push_back(ld);
    rnd.push_back(lr);
    eq_vs_dis.push_back(le - ld);
    rnd_vs_dis.push_back(lr - ld);
    noise.push_back(log_slowdown(r.alone, r.alone_again));
    if (std::isfinite(le) && std::isfinite(ld)) ++f.valid_reps;
  }
  f.slowdown_equal = geometric_mean_of_logs(eq);
  f.slowdown_disjoint = geometric_mean_of_logs(dis);
  f.slowdown_random = geometric_mean_of_logs(rnd);
  const PairedTest t = sign_flip_test(eq_vs_dis, 20000, options.seed);
  f.effect = t.n > 0 ? std::exp(t.mean_difference) - 1 : kNaN;
  f.p_value = t.p_value;
  const PairedTest tr = sign_flip_test(rnd_vs_dis, 20000, options.seed + 1);
  f.random_effect = tr.n > 0 ? std::exp(tr.mean_difference) - 1 : kNaN;
  f.random_p = tr.p_value;
  // log(alone_again / alone) holds two runs' noise: one run's is its SD over sqrt(2).
  const double sd = sample_sd(noise);
  f.noise_cv = std::isfinite(sd) ? sd / std::sqrt(2.0) : kNaN;
  const bool enough = f.valid_reps >= 5 && f.valid_reps >= (1 - options.max_invalid_share) * f.reps;
  f.offset_dependent = enough && f.p_value <= options.conditions_alpha && f.effect >= options.min_condition_effect;
  return f;
}

MapFinding analyze_map(const InterferenceMap& m, const CalibrationFinding& calibration, const AnalysisOptions& options) {
  MapFinding f;
  f.name = m.name;
  f.kind = m.kind;
  f.granularity = m.granularity;
  f.discard = m.discard;
  f.page = m.page;
  f.classes = m.classes();
  f.reps = m.reps;
  const int k = f.classes;
  const bool same_page = m.kind == "same_page";
  std::vector<Matrix> logs;
  for (int r = 0; r < m.reps; ++r) {
    Matrix y(k, kNaN);
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        if (same_page && i == j) continue;  // one chunk read by both: not a pair of classes
        ++f.runs;
        const double alone = m.alone[static_cast<size_t>(r) * k + i];
        const double shared = m.shared[(static_cast<size_t>(r) * k + i) * k + j];
        y.at(i, j) = log_slowdown(alone, shared);
        if (!std::isfinite(y.at(i, j))) ++f.invalid_runs;
      }
    }
    logs.push_back(std::move(y));
  }
  std::vector<std::string> problems;
  if (f.runs == 0 || f.invalid_runs > options.max_invalid_share * f.runs) {
    problems.push_back(fmt::format("{} of {} runs without a measurement", f.invalid_runs, f.runs));
  }
  if (m.discard && !calibration.discard_reaches_dram) {
    problems.push_back("its reads are discarded from the L2 to reach DRAM, and the calibration shows a discarded line "
                       "still served by the L2");
  }
  if (m.reps < 2) problems.push_back("one repetition: no noise estimate");

  f.interaction = test_interaction(logs, options.permutations, options.seed);
  std::vector<int> all, even, odd;
  for (int r = 0; r < m.reps; ++r) {
    all.push_back(r);
    (r % 2 == 0 ? even : odd).push_back(r);
  }
  f.partition = cluster_by_similarity(symmetric_interaction(logs, all));
  if (m.reps >= 2) {
    const Partition a = cluster_by_similarity(symmetric_interaction(logs, even));
    const Partition b = cluster_by_similarity(symmetric_interaction(logs, odd));
    f.stability = adjusted_rand_index(a.group, b.group);
  }
  // The slowdowns themselves (not centred) inside and across the groups.
  std::vector<double> within, across;
  for (const auto& y : logs) {
    for (int i = 0; i < k; ++i) {
      for (int j = i + 1; j < k; ++j) {
        const double v = mean({y.at(i, j), y.at(j, i)});
        if (!std::isfinite(v)) continue;
        (f.partition.group[i] == f.partition.group[j] ? within : across).push_back(v);
      }
    }
  }
  f.within_slowdown = geometric_mean_of_logs(within);
  f.across_slowdown = geometric_mean_of_logs(across);
  f.contrast = std::isfinite(f.within_slowdown) && std::isfinite(f.across_slowdown) ? f.within_slowdown / f.across_slowdown : kNaN;
  for (int g = 0; g < f.partition.groups; ++g) {
    std::vector<int> offsets;
    for (int i = 0; i < k; ++i) {
      if (f.partition.group[i] == g) offsets.push_back(m.offsets[i]);
    }
    if (offsets.size() >= 2) f.groups.push_back(std::move(offsets));
  }

  const auto& t = f.interaction;
  const bool dependent = t.p_value <= options.map_alpha && t.reliability >= options.min_reliability;
  const bool grouped = !f.groups.empty() && f.stability >= options.min_stability && f.contrast >= options.min_contrast;
  if (!problems.empty()) {
    f.status = "unusable";
    for (size_t i = 0; i < problems.size(); ++i) f.note += (i ? "; " : "") + problems[i];
  } else if (dependent && grouped) {
    f.status = "colour_classes";
  } else if (dependent) {
    f.status = "offset_dependent";
    f.note = fmt::format("interference depends on the classes (interaction {:.1f}% beyond noise), but no grouping is stable "
                         "across the repetitions with within/across slowdown {:.3f} or more",
                         100 * (std::exp(t.signal_sd) - 1), options.min_contrast);
  } else {
    f.status = "no_structure";
  }
  return f;
}

LatencyFinding analyze_latency(const LatencyProbe& l, const CalibrationFinding& calibration, const AnalysisOptions& options) {
  LatencyFinding f;
  f.present = true;
  f.bases = static_cast<int>(l.base_pages.size());
  f.deltas = static_cast<int>(l.deltas.size());
  f.reps = l.reps;
  f.usable = calibration.flush_reaches_dram;
  if (!f.usable) f.note = "a flushed line is not read much slower than an L2 hit: the flush did not reach DRAM";
  const int b_n = f.bases, d_n = f.deltas, r_n = f.reps;
  auto cycles = [&](int b, int d, int r) { return l.pair_cycles[(static_cast<size_t>(b) * d_n + d) * r_n + r]; };
  f.single_median = median(l.single_cycles);
  f.pair_median = median(l.pair_cycles);

  // Each pair's median over the chosen reps, less the median over its base's pairs (pages differ
  // by a constant: their TLB entries, their distance from the SM).
  auto normalised = [&](const std::vector<int>& reps) {
    std::vector<double> z(static_cast<size_t>(b_n) * d_n, kNaN);
    for (int b = 0; b < b_n; ++b) {
      std::vector<double> per_delta(d_n);
      for (int d = 0; d < d_n; ++d) {
        std::vector<double> v;
        for (int r : reps) v.push_back(cycles(b, d, r));
        per_delta[d] = median(v);
      }
      const double base = median(per_delta);
      for (int d = 0; d < d_n; ++d) z[static_cast<size_t>(b) * d_n + d] = per_delta[d] - base;
    }
    return z;
  };
  std::vector<int> all, even, odd;
  for (int r = 0; r < r_n; ++r) {
    all.push_back(r);
    (r % 2 == 0 ? even : odd).push_back(r);
  }
  const auto z = normalised(all);
  f.modes = test_bimodality(z, options.bimodality);

  std::vector<double> sorted = z;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    const size_t lo = sorted.size() / 1000, hi = sorted.size() - 1 - sorted.size() / 1000;
    // 24 bins or so, each a whole number of the values' step (medians of whole cycles are whole or
    // half cycles), so that no bin catches more distinct values than its neighbours.
    std::vector<double> steps;
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i] > sorted[i - 1]) steps.push_back(sorted[i] - sorted[i - 1]);
    }
    const double step = steps.empty() ? 0 : median(steps);
    double width = (sorted[hi] - sorted[lo]) / 24;
    if (step > 0 && width > 0) width = std::max(1.0, std::ceil(width / step)) * step;
    const int bins = width > 0 ? std::max(1, static_cast<int>(std::ceil((sorted[hi] - sorted[lo]) / width + 1e-9))) : 1;
    f.histogram_lo = sorted[lo];
    f.histogram_hi = sorted[lo] + bins * width;
    f.histogram.assign(bins, 0);
    for (double v : z) {
      if (v < sorted[lo] || v > sorted[hi]) continue;
      const int bin = width > 0 ? std::min(bins - 1, static_cast<int>((v - f.histogram_lo) / width)) : 0;
      ++f.histogram[bin];
    }
  }
  if (!f.modes.bimodal) return f;
  const double threshold = f.modes.threshold;
  std::vector<bool> slow(z.size());
  int slow_count = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    slow[i] = z[i] > threshold;
    slow_count += slow[i];
  }
  f.slow_share = static_cast<double>(slow_count) / static_cast<double>(z.size());
  if (r_n >= 2) {
    const auto za = normalised(even), zb = normalised(odd);
    std::vector<bool> sa(za.size()), sb(zb.size());
    for (size_t i = 0; i < za.size(); ++i) {
      sa[i] = za[i] > threshold;
      sb[i] = zb[i] > threshold;
    }
    f.repeat_kappa = cohen_kappa(sa, sb);
  }
  // Bases with the same in-page offset in different pages: do they find the same slow deltas?
  double jaccard_sum = 0, chance_sum = 0;
  int compared = 0;
  for (int a = 0; a < b_n; ++a) {
    for (int b = a + 1; b < b_n; ++b) {
      if (l.base_offsets[a] != l.base_offsets[b]) continue;
      int both = 0, either = 0, ka = 0, kb = 0;
      for (int d = 0; d < d_n; ++d) {
        const bool x = slow[static_cast<size_t>(a) * d_n + d], y = slow[static_cast<size_t>(b) * d_n + d];
        both += x && y;
        either += x || y;
        ka += x;
        kb += y;
      }
      if (either == 0) continue;
      jaccard_sum += static_cast<double>(both) / either;
      const double expected_both = static_cast<double>(ka) * kb / d_n;
      chance_sum += expected_both / (ka + kb - expected_both);
      ++compared;
    }
  }
  if (compared > 0) {
    f.page_jaccard = jaccard_sum / compared;
    f.chance_jaccard = chance_sum / compared;
  }
  f.conflicts_visible = f.usable && f.repeat_kappa >= options.min_kappa;
  f.page_invariant = f.conflicts_visible && compared > 0 && f.page_jaccard >= 0.5 && f.page_jaccard >= 3 * f.chance_jaccard;
  return f;
}

Report analyze(const RawProbe& raw, const AnalysisOptions& options) {
  Report rep;
  rep.provenance = raw.provenance;
  rep.config = raw.config;
  rep.calibration = analyze_calibration(raw.calibration);
  for (const auto& e : raw.conditions) rep.conditions.push_back(analyze_conditions(e, options));
  for (const auto& m : raw.maps) rep.maps.push_back(analyze_map(m, rep.calibration, options));
  if (raw.latency) rep.latency = analyze_latency(*raw.latency, rep.calibration, options);

  bool by_offset = false, classes_found = false, per_page = false, usable = false, undecided = false;
  for (const auto& c : rep.conditions) {
    const std::string name = fmt::format("conditions at {} B", c.granularity);
    if (c.valid_reps < 5) {
      rep.reasons.push_back(fmt::format("{}: {} valid repetitions of {}: too few", name, c.valid_reps, c.reps));
      continue;
    }
    usable = true;
    if (c.offset_dependent) {
      by_offset = true;
      rep.reasons.push_back(fmt::format("{}: an aggressor on the victim's offsets (other pages) slows it {:.1f}% more than one "
                                        "on disjoint offsets (p = {:.2g})",
                                        name, 100 * c.effect, c.p_value));
    } else {
      rep.reasons.push_back(fmt::format("{}: equal against disjoint offsets {:+.1f}% (p = {:.2g}), noise {:.1f}%: no offset "
                                        "dependence",
                                        name, 100 * c.effect, c.p_value, 100 * c.noise_cv));
    }
  }
  for (const auto& m : rep.maps) {
    if (m.status == "unusable") {
      rep.reasons.push_back(fmt::format("map {}: unusable: {}", m.name, m.note));
      continue;
    }
    usable = true;
    const std::string stats = fmt::format("reliability {:.2f}, p = {:.2g}, {} group(s) of two or more, stability {:.2f}, "
                                          "within/across slowdown {}",
                                          m.interaction.reliability, m.interaction.p_value, m.groups.size(), m.stability,
                                          fixed(m.contrast, 3));
    if (m.status == "colour_classes") {
      (m.kind == "cross_page" ? by_offset : per_page) = true;
      classes_found = classes_found || m.kind == "cross_page";
      rep.reasons.push_back(fmt::format("map {}: colour classes ({})", m.name, stats));
    } else if (m.status == "offset_dependent") {
      undecided = true;
      rep.reasons.push_back(fmt::format("map {}: offset dependent without stable classes ({})", m.name, stats));
    } else {
      rep.reasons.push_back(fmt::format("map {}: no structure beyond noise ({})", m.name, stats));
    }
  }
  if (rep.latency.present) {
    const auto& l = rep.latency;
    if (!l.usable) {
      rep.reasons.push_back("latency: unusable: " + l.note);
    } else {
      usable = true;
      if (l.conflicts_visible) {
        per_page = true;
        rep.reasons.push_back(fmt::format("latency: two modes (D = {:.1f}), {:.1f}% of pairs slow, repeatable (kappa {:.2f}); "
                                          "same slow deltas in other pages: Jaccard {:.2f} against {:.2f} by chance",
                                          l.modes.ashman_d, 100 * l.slow_share, l.repeat_kappa, l.page_jaccard,
                                          l.chance_jaccard));
      } else if (l.modes.bimodal) {
        rep.reasons.push_back(fmt::format("latency: two modes (D = {:.1f}) but the slow pairs do not repeat (kappa {:.2f})",
                                          l.modes.ashman_d, l.repeat_kappa));
      } else {
        rep.reasons.push_back(fmt::format("latency: one mode (BIC gain {:.1f}, D = {:.1f}, valley {:.2f})",
                                          l.modes.bic_one - l.modes.bic_two, l.modes.ashman_d, l.modes.valley_ratio));
      }
    }
  }
  const std::string substitute =
      "use the substitute: an L2 persisting window for LC data and BE TLP throttling";
  if (by_offset) {
    rep.verdict = "steerable_by_offset";
    rep.recommendation = classes_found
                             ? "colour BE allocations by in-page offset through the backend's allocation hook, with the "
                               "groups of the cross-page maps extended to every offset"
                             : "interference follows in-page offsets but no map grouped them: map more classes and "
                               "repetitions across pages to find the colour classes before colouring BE allocations";
  } else if (per_page) {
    rep.verdict = "visible_per_page";
    rep.recommendation = "channels show within a page only: colouring needs every BE page calibrated; unless that cost is "
                         "paid, " + substitute;
  } else if (!usable || undecided) {
    rep.verdict = "inconclusive";
    rep.recommendation = "repeat with more repetitions or classes; until then, " + substitute;
  } else {
    rep.verdict = "not_steerable";
    rep.recommendation = substitute;
  }
  return rep;
}

json report_json(const Report& r) {
  json j;
  j["format"] = "concord-channel-verdict";
  j["version"] = 1;
  j["verdict"] = r.verdict;
  j["reasons"] = r.reasons;
  j["recommendation"] = r.recommendation;
  j["provenance"] = r.provenance;
  j["mode"] = r.config.mode;
  const auto& c = r.calibration;
  j["calibration"] = {{"l2_hit_cycles", finite_or_null(c.l2_hit_cycles)},
                      {"dram_cycles", finite_or_null(c.dram_cycles)},
                      {"after_discard_cycles", finite_or_null(c.after_discard_cycles)},
                      {"flush_reaches_dram", c.flush_reaches_dram},
                      {"discard_reaches_dram", c.discard_reaches_dram},
                      {"stream_gbps", finite_or_null(c.stream_gbps)},
                      {"class_gbps", finite_or_null(c.class_gbps)},
                      {"class_discard_gbps", finite_or_null(c.class_discard_gbps)},
                      {"sm_clock_mhz_start", finite_or_null(c.sm_clock_mhz_start)},
                      {"sm_clock_mhz_end", finite_or_null(c.sm_clock_mhz_end)}};
  j["conditions"] = json::array();
  for (const auto& e : r.conditions) {
    j["conditions"].push_back({{"granularity", e.granularity},
                               {"offsets_per_set", e.offsets_per_set},
                               {"reps", e.reps},
                               {"valid_reps", e.valid_reps},
                               {"slowdown_equal", finite_or_null(e.slowdown_equal)},
                               {"slowdown_disjoint", finite_or_null(e.slowdown_disjoint)},
                               {"slowdown_random", finite_or_null(e.slowdown_random)},
                               {"effect", finite_or_null(e.effect)},
                               {"p_value", e.p_value},
                               {"random_effect", finite_or_null(e.random_effect)},
                               {"random_p", e.random_p},
                               {"noise_cv", finite_or_null(e.noise_cv)},
                               {"offset_dependent", e.offset_dependent}});
  }
  j["maps"] = json::array();
  for (const auto& m : r.maps) {
    const auto& t = m.interaction;
    json o = {{"name", m.name},
              {"kind", m.kind},
              {"granularity", m.granularity},
              {"discard", m.discard},
              {"classes", m.classes},
              {"reps", m.reps},
              {"runs", m.runs},
              {"invalid_runs", m.invalid_runs},
              {"status", m.status},
              {"note", m.note},
              {"interaction",
               {{"reliability", t.reliability},
                {"p_value", t.p_value},
                {"noise_sd", t.noise_sd},
                {"signal_sd", t.signal_sd},
                {"cells", t.cells}}},
              {"partition", m.partition.group},
              {"partition_t", finite_or_null(m.partition.t)},
              {"stability", finite_or_null(m.stability)},
              {"within_slowdown", finite_or_null(m.within_slowdown)},
              {"across_slowdown", finite_or_null(m.across_slowdown)},
              {"contrast", finite_or_null(m.contrast)},
              {"groups", m.groups}};
    if (m.kind == "same_page") o["page"] = m.page;
    j["maps"].push_back(std::move(o));
  }
  const auto& l = r.latency;
  if (l.present) {
    j["latency"] = {{"usable", l.usable},
                    {"note", l.note},
                    {"bases", l.bases},
                    {"deltas", l.deltas},
                    {"reps", l.reps},
                    {"single_median_cycles", finite_or_null(l.single_median)},
                    {"pair_median_cycles", finite_or_null(l.pair_median)},
                    {"bimodal", l.modes.bimodal},
                    {"modes",
                     {{"n", l.modes.n},
                      {"mean_low", l.modes.mean_low},
                      {"sd_low", l.modes.sd_low},
                      {"weight_low", l.modes.weight_low},
                      {"mean_high", l.modes.mean_high},
                      {"sd_high", l.modes.sd_high},
                      {"weight_high", l.modes.weight_high},
                      {"bic_gain", l.modes.bic_one - l.modes.bic_two},
                      {"ashman_d", l.modes.ashman_d},
                      {"threshold", l.modes.threshold},
                      {"valley_ratio", l.modes.valley_ratio}}},
                    {"slow_share", l.slow_share},
                    {"repeat_kappa", finite_or_null(l.repeat_kappa)},
                    {"page_jaccard", l.page_jaccard},
                    {"chance_jaccard", l.chance_jaccard},
                    {"conflicts_visible", l.conflicts_visible},
                    {"page_invariant", l.page_invariant},
                    {"histogram", {{"lo", l.histogram_lo}, {"hi", l.histogram_hi}, {"counts", l.histogram}}}};
  } else {
    j["latency"] = nullptr;
  }
  return j;
}

std::string report_markdown(const Report& r) {
  std::ostringstream md;
  md << "# VRAM channel probe: " << r.verdict << "\n\n";
  const json& dev = r.provenance.contains("device_info") ? r.provenance["device_info"] : json::object();
  const json& build = r.provenance.contains("build") ? r.provenance["build"] : json::object();
  auto text = [](const json& o, const char* key) {
    if (!o.is_object() || !o.contains(key) || o[key].is_null()) return std::string("?");
    return o[key].is_string() ? o[key].get<std::string>() : o[key].dump();
  };
  md << "Device " << text(dev, "name") << ", driver " << text(dev, "driver_version") << ", CUDA "
     << text(dev, "cuda_version") << "; commit " << text(build, "commit") << "; mode " << r.config.mode << ", buffer "
     << r.config.buffer_bytes / (1 << 20) << " MiB in " << r.config.page_bytes / 1024 << " KiB pages, victim on "
     << r.config.victim_sms << " SMs, aggressor on " << r.config.aggressor_sms << ".\n\n";
  for (const auto& reason : r.reasons) md << "- " << reason << "\n";
  md << "\n**Next:** " << r.recommendation << ".\n\n";

  const auto& c = r.calibration;
  md << "## Calibration\n\n| L2 hit | DRAM (after flush) | after discard | flush reaches DRAM | discard reaches DRAM | "
        "stream GB/s | one offset GB/s | one offset, discarded GB/s | SM MHz start, end |\n"
        "|---:|---:|---:|---|---|---:|---:|---:|---:|\n";
  md << "| " << fixed(c.l2_hit_cycles, 0) << " | " << fixed(c.dram_cycles, 0) << " | " << fixed(c.after_discard_cycles, 0)
     << " | " << (c.flush_reaches_dram ? "yes" : "no") << " | " << (c.discard_reaches_dram ? "yes" : "no") << " | "
     << fixed(c.stream_gbps, 0) << " | " << fixed(c.class_gbps, 0) << " | " << fixed(c.class_discard_gbps, 0) << " | "
     << fixed(c.sm_clock_mhz_start, 0) << ", " << fixed(c.sm_clock_mhz_end, 0) << " |\n\n";

  if (!r.conditions.empty()) {
    md << "## Equal, disjoint and random offsets (victim slowdown beside the aggressor)\n\n"
          "| chunk | offsets | reps (valid) | equal | disjoint | random | equal vs disjoint | p | random vs disjoint | p | "
          "noise | offset dependent |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& e : r.conditions) {
      md << "| " << e.granularity << " | " << e.offsets_per_set << " | " << e.reps << " (" << e.valid_reps << ") | "
         << fixed(e.slowdown_equal, 3) << " | " << fixed(e.slowdown_disjoint, 3) << " | " << fixed(e.slowdown_random, 3)
         << " | " << fixed(100 * e.effect, 1) << "% | " << fmt::format("{:.2g}", e.p_value) << " | "
         << fixed(100 * e.random_effect, 1) << "% | " << fmt::format("{:.2g}", e.random_p) << " | "
         << fixed(100 * e.noise_cv, 1) << "% | " << (e.offset_dependent ? "yes" : "no") << " |\n";
    }
    md << "\n";
  }
  if (!r.maps.empty()) {
    md << "## Interference maps\n\n| map | kind | chunk | classes x reps | runs missing | reliability | p | interaction beyond "
          "noise | groups >= 2 | stability | within / across slowdown | status |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& m : r.maps) {
      md << "| " << m.name << " | " << m.kind << (m.discard ? ", discard" : "") << " | " << m.granularity << " | "
         << m.classes << " x " << m.reps << " | " << m.invalid_runs << " of " << m.runs << " | "
         << fixed(m.interaction.reliability, 2) << " | " << fmt::format("{:.2g}", m.interaction.p_value) << " | "
         << fixed(100 * (std::exp(m.interaction.signal_sd) - 1), 1) << "% | " << m.groups.size() << " | "
         << fixed(m.stability, 2) << " | " << fixed(m.within_slowdown, 3) << " / " << fixed(m.across_slowdown, 3) << " | "
         << m.status << " |\n";
    }
    md << "\n";
    for (const auto& m : r.maps) {
      if (m.groups.empty() || m.status == "no_structure") continue;
      md << "Groups of " << m.name << " (chunk offsets):";
      for (const auto& g : m.groups) {
        md << " {";
        for (size_t i = 0; i < g.size(); ++i) md << (i ? ", " : "") << g[i];
        md << "}";
      }
      md << "\n\n";
    }
  }
  const auto& l = r.latency;
  if (l.present) {
    md << "## Pair latency (SGDRC Algorithm 1)\n\n";
    md << l.bases << " bases x " << l.deltas << " deltas x " << l.reps << " reps; single line " << fixed(l.single_median, 0)
       << " cycles, pair " << fixed(l.pair_median, 0) << " cycles (medians)."
       << (l.usable ? "" : " Unusable: " + l.note + ".") << "\n\n";
    md << "Modes of the pair medians less their base's median: low " << fixed(l.modes.mean_low, 1) << " (sd "
       << fixed(l.modes.sd_low, 1) << ", weight " << fixed(l.modes.weight_low, 3) << "), high " << fixed(l.modes.mean_high, 1)
       << " (sd " << fixed(l.modes.sd_high, 1) << ", weight " << fixed(l.modes.weight_high, 3) << "); BIC gain "
       << fixed(l.modes.bic_one - l.modes.bic_two, 1) << ", Ashman D " << fixed(l.modes.ashman_d, 2) << ", valley "
       << fixed(l.modes.valley_ratio, 2) << ": " << (l.modes.bimodal ? "two modes" : "one mode");
    if (l.modes.bimodal) {
      md << "; slow pairs " << fixed(100 * l.slow_share, 2) << "%, repeat kappa " << fixed(l.repeat_kappa, 2)
         << ", page Jaccard " << fixed(l.page_jaccard, 2) << " (chance " << fixed(l.chance_jaccard, 2) << ")";
    }
    md << ".\n\n";
    if (!l.histogram.empty()) {
      const int top = *std::max_element(l.histogram.begin(), l.histogram.end());
      const double width = (l.histogram_hi - l.histogram_lo) / static_cast<double>(l.histogram.size());
      md << "```\n";
      for (size_t b = 0; b < l.histogram.size(); ++b) {
        const int bar = top > 0 ? static_cast<int>(std::lround(50.0 * l.histogram[b] / top)) : 0;
        const int tick = l.histogram[b] > 0 && bar == 0 ? 1 : bar;
        md << fmt::format("{:>8.1f} {:>7} {}\n", l.histogram_lo + b * width, l.histogram[b], std::string(tick, '#'));
      }
      md << "```\n";
    }
  }
  return md.str();
}

}  // namespace concord::channel
