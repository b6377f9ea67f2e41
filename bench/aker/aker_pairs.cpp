// `concord_aker_bench pairs`: Aker's fused versions of kernel pairs (its sections 5.4, 6 and 7),
// through the Backend interface (the simulator or the GPU alike). Per pair: each kernel's solo
// time (plain and persistent form; the faster counts), then per fusion ratio a:b the fused block of
// the variants best_fusion_shape picks for it (several fused blocks per SM; or the default
// variants, `--variants default`) when one fits:
//  - both whole ranges fused: the fused time over the slower solo time and over serial (the
//    kernels' solo times in their default variants, as they run alone);
//  - the two-stage model: the fused time at four load ratios L (B's solo time over A's for the
//    ranges fused, in the fused variants; A whole and a share of B below 1, B whole and a share of A above), normalised
//    by A's solo time for its range, a line through the two low points and one through the two
//    high points, and the opportune load ratio where they meet (the knee: both parts finish
//    together); then the fused time at the knee, over the slower part's solo time and over serial,
//    and the makespan reduction there in units of A's solo time (1 + L - y: section 7's measure).
// The best version of a pair is the one with the largest reduction at its knee (section 7).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "aker_bench.h"
#include "concord/build_info.h"
#include "concord/backend.h"
#include "concord/metrics.h"
#include "concord/occupancy.h"
#include "concord/report.h"
#include "concord/suite.h"
#include "concord/placement_rule.h"
#include "concord/backend_factory.h"
#include "lsbe_runner.h"
#include "runner/processes.h"

namespace concord::aker_bench {
namespace {

constexpr double kFusedOverSlowerTarget = 1.25;

const KernelVariant& default_variant(const KernelSpec& k) { return k.variant(k.default_variant); }

Result<KernelSpec> parse_kernel(const std::string& text, const std::string& pair) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return Status::invalid_argument("--pairs: '" + pair + "': '" + text + "' is not kernel:size");
  int64_t size = 0;
  try {
    size_t used = 0;
    size = std::stoll(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    return Status::invalid_argument("--pairs: '" + pair + "': size '" + text.substr(colon + 1) + "' is not an integer");
  }
  auto spec = make_suite_kernel(text.substr(0, colon), size);
  if (!spec) return Status(spec.status().code(), "--pairs: '" + pair + "': " + spec.status().message());
  if (!spec->elastic) return Status::invalid_argument("--pairs: '" + pair + "': '" + spec->name + "' is a library kernel (fusion needs elastic bodies)");
  return spec;
}

struct Pair {
  std::string text;
  KernelSpec a, b;
};

Result<Pair> parse_pair(const std::string& text) {
  const auto plus = text.find('+');
  if (plus == std::string::npos) return Status::invalid_argument("--pairs: '" + text + "' is not kernel:size+kernel:size");
  auto a = parse_kernel(text.substr(0, plus), text);
  if (!a) return a.status();
  auto b = parse_kernel(text.substr(plus + 1), text);
  if (!b) return b.status();
  return Pair{text, std::move(*a), std::move(*b)};
}

Result<std::pair<int, int>> parse_ratio(const std::string& text) {
  int a = 0, b = 0;
  char colon = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &a, &colon, &b, &extra) != 3 || colon != ':' || a < 1 || b < 1) {
    return Status::invalid_argument("--ratios: '" + text + "' is not a:b with a, b >= 1");
  }
  return std::pair{a, b};
}

const char* pair_class(const KernelSpec& a, const KernelSpec& b) {
  if ((a.unit == ComputeUnit::tensor) != (b.unit == ComputeUnit::tensor)) return "tc+cd";
  if (a.unit == ComputeUnit::tensor) return "tc+tc";
  // Two CUDA-core kernels by arithmetic intensity (FLOPs per DRAM byte, from the specs): one
  // at least 4x the other's is the compute-prefer side of a compute + memory pair.
  auto intensity = [](const KernelSpec& k) {
    const KernelVariant& v = default_variant(k);
    return v.flops_per_block / std::max(v.bytes_per_block, 1.0);
  };
  const double hi = std::max(intensity(a), intensity(b)), lo = std::min(intensity(a), intensity(b));
  return hi >= 4 * lo ? "compute+memory" : "cd+cd";
}

// Times dispatches on one backend, one at a time: an untimed first run (it loads or compiles the
// kernel), then the median of `reps` runs from the first block resident to the end.
class Timer {
 public:
  Timer(Backend& backend, int reps) : backend_(backend), reps_(reps) {}

  Result<double> time(DispatchRequest r) {
    CONCORD_RETURN_IF_ERROR(backend_.can_implement(r));
    CONCORD_RETURN_IF_ERROR(backend_.prepare_dispatch(r));
    std::vector<double> seconds;
    for (int i = 0; i <= reps_; ++i) {
      r.id = DispatchId{next_++};
      CONCORD_RETURN_IF_ERROR(backend_.dispatch(r));
      std::optional<Completion> mine;
      while (!mine) {
        auto done = backend_.advance(std::numeric_limits<double>::infinity());
        if (!done) return done.status();
        for (Completion& c : *done) {
          if (c.dispatch == r.id) mine = std::move(c);
        }
      }
      if (!mine->error) return mine->error;
      for (size_t p = 0; p < r.parts.size(); ++p) {
        if (mine->blocks_done[p] != r.parts[p].range.size()) {
          return Status::internal("dispatch " + std::to_string(r.id.value) + ": part " + std::to_string(p) + " finished " +
                                  std::to_string(mine->blocks_done[p]) + " of " + std::to_string(r.parts[p].range.size()) +
                                  " blocks");
        }
      }
      if (i > 0) seconds.push_back(mine->end - mine->start);
    }
    return percentile(seconds, 50);
  }

 private:
  Backend& backend_;
  int reps_;
  int64_t next_ = 1;
};

DispatchPart part_of(const KernelSpec& k, int variant, int tenant, int64_t blocks, int parts) {
  DispatchPart p;
  p.launch = LaunchId{tenant};
  p.tenant = TenantId{tenant};
  p.kernel = &k;
  p.variant = variant;
  p.range = {0, blocks};
  p.parts_per_block = parts;
  return p;
}

DispatchRequest request(const DeviceSpec& d, LaunchForm form, std::vector<DispatchPart> parts) {
  DispatchRequest r;
  for (DispatchPart& p : parts) r.parts.push_back(std::move(p));
  r.placement.sms = d.all_sms();
  r.placement.form = form;
  return r;
}

struct Solo {
  double native = 0, persistent = 0;
  double best() const { return std::min(native, persistent); }
};

// The ranges fused at load ratio L (B's solo time for its range over A's): as much work as the
// ratio allows, the longer side whole. Blocks at least 1.
struct Load {
  int64_t blocks_a = 0, blocks_b = 0;
  double x_a = 0, x_b = 0;  // solo times of the ranges
  double ratio() const { return x_b / x_a; }
};
Load load_at(double l, int64_t na, int64_t nb, double solo_a, double solo_b) {
  double fa = 1, fb = 1;
  if (l * solo_a <= solo_b) fb = l * solo_a / solo_b;
  else fa = solo_b / (l * solo_a);
  Load out;
  out.blocks_a = std::clamp<int64_t>(static_cast<int64_t>(std::llround(fa * static_cast<double>(na))), 1, na);
  out.blocks_b = std::clamp<int64_t>(static_cast<int64_t>(std::llround(fb * static_cast<double>(nb))), 1, nb);
  out.x_a = solo_a * static_cast<double>(out.blocks_a) / static_cast<double>(na);
  out.x_b = solo_b * static_cast<double>(out.blocks_b) / static_cast<double>(nb);
  return out;
}

Result<nlohmann::json> measure_pair(const PairsOptions& opt, const Pair& pair, const BackendConfig& cfg) {
  auto made = make_backend(cfg);
  if (!made) return made.status();
  Backend& backend = **made;
  const DeviceSpec& d = backend.device();
  CONCORD_RETURN_IF_ERROR(backend.prepare_tenant(TenantId{1}, {&pair.a}));
  CONCORD_RETURN_IF_ERROR(backend.prepare_tenant(TenantId{2}, {&pair.b}));
  CONCORD_RETURN_IF_ERROR(backend.start_clock());
  Timer timer(backend, opt.reps);

  // Solo times per (tenant, variant), measured when first asked for.
  std::map<std::pair<int, int>, Solo> solos;
  auto solo_of = [&](const KernelSpec& k, int variant, int tenant) -> Result<Solo> {
    if (auto it = solos.find({tenant, variant}); it != solos.end()) return it->second;
    const int64_t blocks = k.variant(variant).logical_blocks;
    Solo s;
    auto native = timer.time(request(d, LaunchForm::native, {part_of(k, variant, tenant, blocks, 1)}));
    if (!native) return Status(native.status().code(), k.name + " solo: " + native.status().message());
    auto persistent = timer.time(request(d, LaunchForm::persistent, {part_of(k, variant, tenant, blocks, 1)}));
    if (!persistent) return Status(persistent.status().code(), k.name + " solo: " + persistent.status().message());
    s.native = *native;
    s.persistent = *persistent;
    return solos.emplace(std::make_pair(tenant, variant), s).first->second;
  };
  auto sa = solo_of(pair.a, pair.a.default_variant, 1);
  if (!sa) return sa.status();
  auto sb = solo_of(pair.b, pair.b.default_variant, 2);
  if (!sb) return sb.status();
  const double ta = sa->best(), tb = sb->best();
  auto kernel_json = [](const KernelSpec& k, const Solo& s) {
    return nlohmann::json{{"kernel", k.name},          {"size", k.size},           {"logical_blocks", default_variant(k).logical_blocks},
                          {"solo_native_s", s.native}, {"solo_persistent_s", s.persistent}, {"solo_s", s.best()}};
  };
  nlohmann::json pj{{"pair", pair.text},
                    {"class", pair_class(pair.a, pair.b)},
                    {"a", kernel_json(pair.a, *sa)},
                    {"b", kernel_json(pair.b, *sb)},
                    {"serial_s", ta + tb}};
  std::cerr << pair.text << ": solo " << ta * 1e3 << " ms + " << tb * 1e3 << " ms\n";

  pj["versions"] = nlohmann::json::array();
  const nlohmann::json* best = nullptr;
  for (const std::string& rt : opt.ratios) {
    const auto [pa, pb] = *parse_ratio(rt);  // checked before the first measurement
    nlohmann::json vj{{"ratio", rt}, {"parts_a", pa}, {"parts_b", pb}};
    FusionShapeFilter filter;
    filter.parts_a = pa;
    filter.parts_b = pb;
    if (opt.variants == "default") {
      filter.variant_a = pair.a.default_variant;
      filter.variant_b = pair.b.default_variant;
    }
    const std::optional<FusionShape> shape = best_fusion_shape(d, pair.a, pair.b, filter);
    vj["fits"] = shape.has_value();
    if (!shape) {
      const Status why = fused_block_fits(d, default_variant(pair.a), pa, default_variant(pair.b), pb);
      vj["reason"] = opt.variants == "default" ? why.message()
                                               : "no pair of variants fits an SM (default variants: " + why.message() + ")";
      pj["versions"].push_back(vj);
      continue;
    }
    const int va = shape->variant_a, vb = shape->variant_b;
    vj["variant_a"] = pair.a.variant(va).name;
    vj["variant_b"] = pair.b.variant(vb).name;
    vj["threads_a"] = pair.a.variant(va).threads_per_block;
    vj["threads_b"] = pair.b.variant(vb).threads_per_block;
    vj["blocks_per_sm"] = shape->blocks_per_sm;
    auto fa = solo_of(pair.a, va, 1);
    if (!fa) return fa.status();
    auto fb = solo_of(pair.b, vb, 2);
    if (!fb) return fb.status();
    // The fused variants' own grids and solo times set the load ratios.
    const int64_t ga = pair.a.variant(va).logical_blocks, gb = pair.b.variant(vb).logical_blocks;
    const double ua = fa->best(), ub = fb->best();
    vj["solo_a_s"] = ua;
    vj["solo_b_s"] = ub;
    auto fused = [&, pa = pa, pb = pb](int64_t blocks_a, int64_t blocks_b) {
      return timer.time(
          request(d, LaunchForm::persistent, {part_of(pair.a, va, 1, blocks_a, pa), part_of(pair.b, vb, 2, blocks_b, pb)}));
    };
    auto whole = fused(ga, gb);
    if (!whole) {
      vj["error"] = whole.status().to_string();
      std::cerr << pair.text << " " << rt << ": " << whole.status().to_string() << "\n";
      pj["versions"].push_back(vj);
      continue;
    }
    vj["whole"] = {{"fused_s", *whole}, {"over_slower_solo", *whole / std::max(ta, tb)}, {"speedup_over_serial", (ta + tb) / *whole}};
    // The two-stage model: y = fused time over A's solo time for its range, against L.
    nlohmann::json points = nlohmann::json::array();
    std::vector<std::pair<double, double>> ly;
    for (double l : opt.knee_points) {
      const Load at = load_at(l, ga, gb, ua, ub);
      auto t = fused(at.blocks_a, at.blocks_b);
      if (!t) return Status(t.status().code(), pair.text + " " + rt + " at load ratio " + std::to_string(l) + ": " + t.status().message());
      ly.emplace_back(at.ratio(), *t / at.x_a);
      points.push_back({{"load_ratio", at.ratio()}, {"blocks_a", at.blocks_a}, {"blocks_b", at.blocks_b}, {"fused_s", *t}, {"y", ly.back().second}});
    }
    vj["points"] = points;
    auto line = [](std::pair<double, double> p, std::pair<double, double> q) {
      const double m = (q.second - p.second) / (q.first - p.first);
      return std::pair{m, p.second - m * p.first};
    };
    const auto [m1, c1] = line(ly[0], ly[1]);
    const auto [m2, c2] = line(ly[2], ly[3]);
    double knee = std::abs(m1 - m2) > 1e-12 ? (c2 - c1) / (m1 - m2) : std::numeric_limits<double>::quiet_NaN();
    const bool clamped = !(knee >= ly[0].first && knee <= ly[3].first);
    if (clamped) knee = std::isnan(knee) || knee > ly[3].first ? ly[3].first : ly[0].first;
    const Load at = load_at(knee, ga, gb, ua, ub);
    auto t = fused(at.blocks_a, at.blocks_b);
    if (!t) return Status(t.status().code(), pair.text + " " + rt + " at the knee: " + t.status().message());
    vj["knee"] = {{"load_ratio", at.ratio()},
                  {"fit_load_ratio", knee},
                  {"clamped", clamped},
                  {"low_line", {m1, c1}},
                  {"high_line", {m2, c2}},
                  {"blocks_a", at.blocks_a},
                  {"blocks_b", at.blocks_b},
                  {"fused_s", *t},
                  {"solo_a_s", at.x_a},
                  {"solo_b_s", at.x_b},
                  {"over_slower_solo", *t / std::max(at.x_a, at.x_b)},
                  {"speedup_over_serial", (at.x_a + at.x_b) / *t},
                  {"reduction", (at.x_a + at.x_b - *t) / at.x_a}};
    std::cerr << pair.text << " " << rt << " (" << vj["variant_a"].get<std::string>() << "+" << vj["variant_b"].get<std::string>()
              << ", " << shape->blocks_per_sm << " blocks/SM): whole " << vj["whole"]["over_slower_solo"].get<double>() << "x the slower solo, knee L="
              << at.ratio() << " " << vj["knee"]["over_slower_solo"].get<double>() << "x\n";
    pj["versions"].push_back(vj);
  }
  for (const nlohmann::json& v : pj["versions"]) {
    if (v.contains("knee") && (best == nullptr || v["knee"]["reduction"].get<double>() > (*best)["knee"]["reduction"].get<double>())) {
      best = &v;
    }
  }
  pj["best_ratio"] = best ? (*best)["ratio"] : nlohmann::json(nullptr);
  return pj;
}

}  // namespace

const std::vector<std::string>& default_pairs() {
  static const std::vector<std::string> p = {
      // tensor-core + CUDA-core (Aker's tgemm-fft, and the inference bodies beside Parboil-like work)
      "tc_gemm:2048+fft_stage:67108864", "tc_gemm:2048+sgemm:2048", "conv_im2col:1024+mri_q:524288",
      "conv_im2col:1024+lbm:4194304", "tc_gemm:2048+stream_triad:67108864",
      // compute-prefer + memory-prefer CUDA-core kernels
      "sgemm:2048+stencil:512", "mri_q:1048576+lbm:8388608", "fma_loop:62914560+stream_triad:838860800",
      "sgemm:2048+hotspot3d:3072", "mri_q:1048576+stream_triad:134217728"};
  return p;
}

const std::vector<std::string>& default_ratios() {
  static const std::vector<std::string> r = {"1:1", "1:2", "2:1", "1:3", "3:1", "1:4", "4:1"};
  return r;
}

int cmd_pairs(const PairsOptions& opt) {
  if (opt.pairs.empty()) return fail(Status::invalid_argument("--pairs: none given"));
  if (opt.ratios.empty()) return fail(Status::invalid_argument("--ratios: none given"));
  if (opt.reps < 1) return fail(Status::invalid_argument("--reps must be >= 1"));
  if (opt.variants != "chosen" && opt.variants != "default") {
    return fail(Status::invalid_argument("--variants: '" + opt.variants + "' is not chosen or default"));
  }
  if (opt.knee_points.size() != 4 || !std::is_sorted(opt.knee_points.begin(), opt.knee_points.end()) ||
      !(opt.knee_points[0] > 0) || !(opt.knee_points[1] > opt.knee_points[0]) || !(opt.knee_points[3] > opt.knee_points[2])) {
    return fail(Status::invalid_argument("--knee-points: want four increasing load ratios > 0 (two low, two high)"));
  }
  std::vector<Pair> pairs;
  for (const std::string& p : opt.pairs) {
    auto parsed = parse_pair(p);
    if (!parsed) return fail(parsed.status());
    pairs.push_back(std::move(*parsed));
  }
  for (const std::string& r : opt.ratios) {
    if (auto parsed = parse_ratio(r); !parsed) return fail(parsed.status());
  }
  auto cfg = lsbe::backend_config(opt.backend, opt.device);
  if (!cfg) return fail(cfg.status());
  auto probe = make_backend(*cfg);
  if (!probe) return fail(probe.status());
  const DeviceSpec device = (*probe)->device();
  nlohmann::json results =
      nlohmann::json::parse(provenance_json(device, (*probe)->name(), concord::build_version(), concord::build_commit()));
  probe->reset();
  results["bench"] = "aker-pairs";
  results["backend"] = opt.backend;
  results["device"] = device.name;
  results["config"] = {{"pairs", opt.pairs}, {"ratios", opt.ratios}, {"knee_points", opt.knee_points}, {"variants", opt.variants}, {"reps", opt.reps}};
  results["target_over_slower_solo"] = kFusedOverSlowerTarget;
  results["pairs"] = nlohmann::json::array();
  results["complete"] = false;
  int rc = 0;
  std::vector<double> best_knee, best_whole;
  for (const Pair& p : pairs) {
    auto pj = measure_pair(opt, p, *cfg);
    if (!pj) {
      std::cerr << "aker_bench: " << p.text << ": " << pj.status().to_string() << "\n";
      results["pairs"].push_back({{"pair", p.text}, {"error", pj.status().to_string()}});
      rc = 1;
      if (pj.status().code() == StatusCode::device_error) break;
    } else {
      for (const nlohmann::json& v : (*pj)["versions"]) {
        if (v.contains("knee") && v["ratio"] == (*pj)["best_ratio"]) {
          best_knee.push_back(v["knee"]["over_slower_solo"].get<double>());
          best_whole.push_back(v["whole"]["over_slower_solo"].get<double>());
        }
      }
      results["pairs"].push_back(std::move(*pj));
    }
    if (Status s = write_file_atomically(opt.out, results.dump(1) + "\n"); !s) return fail(s);
  }
  results["median_best_knee_over_slower_solo"] = best_knee.empty() ? nlohmann::json(nullptr) : nlohmann::json(percentile(best_knee, 50));
  results["median_best_whole_over_slower_solo"] = best_whole.empty() ? nlohmann::json(nullptr) : nlohmann::json(percentile(best_whole, 50));
  results["complete"] = rc == 0;
  if (Status s = write_file_atomically(opt.out, results.dump(1) + "\n"); !s) return fail(s);
  return rc;
}

}  // namespace concord::aker_bench
