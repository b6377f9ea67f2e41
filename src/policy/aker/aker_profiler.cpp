// Fills Aker's facet by timing kernels and fused pairs through the Backend interface.
#include "policy/aker/aker_profiler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "policy/aker/aker_facet.h"
#include "profile/profiler.h"
#include "profile/timer.h"
#include "concord/placement_rule.h"
#include "concord/backend_factory.h"

namespace concord::profile {
namespace {

using policy::AkerFacet;
using policy::AkerFusedEntry;
using policy::AkerPoint;

// What was measured about one variant of a kernel on this backend.
struct Measured {
  const KernelSpec* spec = nullptr;
  int variant = 0;
  AkerFacet facet;
  double persistent_seconds = 0;  // whole grid on every SM, persistent form (X_k1 of its fusions)
  std::optional<policy::AkerSoloModel> solo;
};

Launch whole_launch(const Backend& b, const KernelSpec& k, int variant, bool persistent) {
  Launch l;
  l.kernel = &k;
  l.variant = variant;
  l.range = {0, k.variant(variant).logical_blocks};
  l.placement.sms = b.device().all_sms();
  l.placement.form = persistent ? LaunchForm::persistent : LaunchForm::native;
  return l;
}

Result<Measured> measure_kernel(Backend& b, Timer& timer, const KernelSpec& k, int variant, int reps) {
  Measured m;
  m.spec = &k;
  m.variant = variant;
  const Capabilities caps = b.capabilities(k);
  const KernelVariant& v = k.variant(variant);
  Launch l = whole_launch(b, k, variant, caps.persistent_form);
  auto whole = timer.median(l, reps);
  if (!whole) return whole.status();
  if (!(*whole > 0)) return Status::internal("aker profile: " + k.name + " took no time");
  m.persistent_seconds = caps.persistent_form ? *whole : 0;
  const DeviceSpec& dev = b.device();
  policy::AkerUtilisation& u = m.facet.utilisation;
  u.tensor = k.unit == ComputeUnit::tensor;
  const double blocks = static_cast<double>(v.logical_blocks);
  u.compute = v.flops_per_block * blocks / *whole / (u.tensor ? dev.tensor_flops : dev.fp32_flops);
  u.memory = v.bytes_per_block * blocks / *whole / dev.dram_bytes_per_s;
  m.facet.cls = policy::aker_class(u);
  if (caps.split_range) {
    for (double f : {0.125, 0.25, 0.5}) {
      const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(f * blocks));
      if (!m.facet.solo.empty() && static_cast<double>(n) <= m.facet.solo.back().x) continue;
      l.range = {0, n};
      auto t = timer.median(l, reps);
      if (!t) return t.status();
      m.facet.solo.push_back({static_cast<double>(n), *t});
    }
    if (m.facet.solo.empty() || m.facet.solo.back().x < blocks) m.facet.solo.push_back({blocks, *whole});
    if (auto solo = policy::AkerSoloModel::fit(m.facet.solo)) m.solo = std::move(*solo);
  }
  return m;
}

// The points of one fused version of (a, b), each (load ratio, fused time / K_1's solo time for
// its range). For a ratio r: K_1 whole beside K_2's first n blocks, n from K_2's solo line; where
// K_2's whole grid falls short of r, K_2 whole beside the part of K_1 whose solo time is X_k2 / r
// (with R fixed the fused time scales with X_k1: the paper's second observation, 6.2). The
// ratios: a coarse sweep (kAkerSweepRatios, and K_2's first one and two blocks: the least it can
// add), then kAkerKneeFactors times the knee the sweep's fit shows (a ratio of 1 when it shows
// none). One point per distinct pair of ranges. Errors: what the backend refuses, and the model's
// fit over all points, with the span of ratios measured.
Result<std::vector<AkerPoint>> measure_version(Backend& b, Timer& timer, const Measured& a, const Measured& bm, int self_parts,
                                               int partner_parts, int reps) {
  const int64_t self_blocks = a.spec->variant(a.variant).logical_blocks;
  const int64_t partner_blocks = bm.spec->variant(bm.variant).logical_blocks;
  const auto clamp_blocks = [](double want, int64_t most) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::min(want, 9e18))), 1, most);
  };
  // K_1's solo time for n of its blocks: measured whole, from its line for a part.
  const auto self_seconds = [&](int64_t n) {
    return n == self_blocks || !a.solo ? a.persistent_seconds : a.solo->seconds(static_cast<double>(n));
  };
  std::map<std::pair<int64_t, int64_t>, AkerPoint> by_ranges;  // (K_1 blocks, K_2 blocks) -> point
  auto measure = [&](int64_t n1, int64_t n2) -> Status {
    if (by_ranges.count({n1, n2})) return Status::ok();
    const double x1 = self_seconds(n1);
    if (!(x1 > 0)) return Status::ok();  // a part of K_1 its line gives no time: no ratio to place
    Launch l = whole_launch(b, *a.spec, a.variant, true);
    l.range = {0, n1};
    l.partner = Launch::Partner{bm.spec, bm.variant, {0, n2}, TenantId{1}, self_parts, partner_parts};
    CONCORD_RETURN_IF_ERROR(timer.can_run(l));
    auto t = timer.median(l, reps);
    if (!t) return t.status();
    by_ranges[{n1, n2}] = {bm.solo->seconds(static_cast<double>(n2)) / x1, *t / x1};
    return Status::ok();
  };
  auto at_ratio = [&](double ratio) -> Status {
    const int64_t n2 = clamp_blocks(bm.solo->blocks_within(ratio * a.persistent_seconds), partner_blocks);
    if (n2 < partner_blocks || !a.solo) return measure(self_blocks, n2);
    // K_2's whole grid: as much of K_1 as makes the ratio.
    const double x2 = bm.solo->seconds(static_cast<double>(partner_blocks));
    return measure(clamp_blocks(a.solo->blocks_within(x2 / ratio), self_blocks), partner_blocks);
  };
  auto points = [&] {
    std::vector<AkerPoint> all;
    for (const auto& [ranges, p] : by_ranges) all.push_back(p);
    std::sort(all.begin(), all.end(), [](const AkerPoint& x, const AkerPoint& y) { return x.x < y.x; });
    std::vector<AkerPoint> out;
    for (const AkerPoint& p : all) {
      // Ratios that barely differ (a solo line's floor) add no information to a fit.
      if (p.x > 0 && (out.empty() || p.x > out.back().x * (1 + 1e-3))) out.push_back(p);
    }
    return out;
  };
  for (int64_t n : {int64_t{1}, std::min<int64_t>(2, partner_blocks)}) CONCORD_RETURN_IF_ERROR(measure(self_blocks, n));
  for (double ratio : kAkerSweepRatios) CONCORD_RETURN_IF_ERROR(at_ratio(ratio));
  auto coarse = policy::AkerFusedModel::fit(points());
  const double knee = coarse ? coarse->opportune_ratio() : 1.0;
  for (double f : kAkerKneeFactors) CONCORD_RETURN_IF_ERROR(at_ratio(f * knee));
  std::vector<AkerPoint> out = points();
  if (out.empty()) return Status::invalid_argument("fused model: no point with a positive load ratio");
  if (auto fit = policy::AkerFusedModel::fit(out); !fit) {
    char span[96];
    std::snprintf(span, sizeof span, " (%zu points at load ratios %.3g to %.3g)", out.size(), out.front().x, out.back().x);
    return Status(fit.status().code(), fit.status().message() + span);
  }
  return out;
}

}  // namespace

Result<AkerProfileReport> profile_aker(ProfileStore& store, const BackendConfig& config, const AkerProfileOptions& options,
                                       std::ostream& progress) {
  if (options.reps < 1) return Status::invalid_argument("aker profile: reps must be >= 1");
  for (const auto& [a, b] : options.ratios) {
    if (a < 1 || b < 1) return Status::invalid_argument("aker profile: ratio parts must be >= 1, not " + std::to_string(a) + ":" + std::to_string(b));
  }
  auto find = [&](const std::string& name) -> const KernelSpec* {
    for (const KernelSpec& k : options.kernels) {
      if (k.name == name) return &k;
    }
    return nullptr;
  };
  for (const auto& [a, b] : options.pairs) {
    if (!find(a) || !find(b)) return Status::invalid_argument("aker profile: pair " + a + "+" + b + " names a kernel not profiled");
    if (a == b) return Status::invalid_argument("aker profile: pair " + a + "+" + b + " fuses a kernel with itself");
  }
  auto made = make_backend(config);
  if (!made) return made.status();
  std::unique_ptr<Backend> backend = std::move(*made);
  CONCORD_RETURN_IF_ERROR(backend->start_clock());
  const ProfileKey device = device_key(*backend);
  Timer timer(*backend);
  AkerProfileReport report;
  // (kernel, variant) -> what was measured: every kernel's default variant, and each variant a
  // fused version uses.
  std::map<std::pair<std::string, int>, Measured> measured;
  auto measure_variant = [&](const KernelSpec& k, int variant) -> Result<const Measured*> {
    const auto key = std::make_pair(k.name, variant);
    if (auto it = measured.find(key); it != measured.end()) return &it->second;
    progress << "aker: " << k.name << " (size " << k.size << ", variant " << k.variant(variant).name << "): class and solo line\n";
    auto m = measure_kernel(*backend, timer, k, variant, options.reps);
    if (!m) return Status(m.status().code(), k.name + ": " + m.status().message());
    return &measured.emplace(key, std::move(*m)).first->second;
  };
  for (const KernelSpec& k : options.kernels) {
    auto m = measure_variant(k, k.default_variant);
    if (!m) return m.status();
  }
  const DeviceSpec& dev = backend->device();
  for (const auto& [an, bn] : options.pairs) {
    const KernelSpec& ka = *find(an);
    const KernelSpec& kb = *find(bn);
    const Measured& a0 = measured.at({an, ka.default_variant});
    const Measured& b0 = measured.at({bn, kb.default_variant});
    if (!(a0.persistent_seconds > 0) || !b0.solo) {
      report.skipped.push_back(an + "+" + bn + ": both kernels must be elastic with sub-ranges on this backend");
      continue;
    }
    for (const auto& [sp, pp] : options.ratios) {
      std::string name = an + "+" + bn + " " + std::to_string(sp) + ":" + std::to_string(pp);
      FusionShapeFilter filter;
      filter.parts_a = sp;
      filter.parts_b = pp;
      if (options.default_variants) {
        filter.variant_a = ka.default_variant;
        filter.variant_b = kb.default_variant;
      }
      const auto shape = best_fusion_shape(dev, ka, kb, filter);
      if (!shape) {
        report.skipped.push_back(name + ": no " + (options.default_variants ? "fused block of the default variants" : "pair of variants") +
                                 " fits an SM at this ratio");
        continue;
      }
      name += " (" + ka.variant(shape->variant_a).name + "+" + kb.variant(shape->variant_b).name + ", " +
              std::to_string(shape->blocks_per_sm) + " blocks/SM)";
      progress << "aker: " << name << "\n";
      auto ma = measure_variant(ka, shape->variant_a);
      if (!ma) return ma.status();
      auto mb = measure_variant(kb, shape->variant_b);
      if (!mb) return mb.status();
      const Measured& a = **ma;
      const Measured& b = **mb;
      if (!(a.persistent_seconds > 0) || !b.solo) {
        report.skipped.push_back(name + ": no solo line for these variants");
        continue;
      }
      auto points = measure_version(*backend, timer, a, b, sp, pp, options.reps);
      if (!points) {
        if (points.status().code() != StatusCode::unsupported && points.status().code() != StatusCode::invalid_argument) {
          return Status(points.status().code(), name + ": " + points.status().message());
        }
        report.skipped.push_back(name + ": " + points.status().message());
        continue;
      }
      AkerFusedEntry e;
      e.partner = kb.name;
      e.partner_variant = kb.variant(b.variant).name;
      e.partner_size = kb.size;
      e.self_parts = sp;
      e.partner_parts = pp;
      e.self_seconds = a.persistent_seconds;
      e.points = std::move(*points);
      measured.at({an, a.variant}).facet.fused.push_back(std::move(e));
      ++report.versions;
    }
  }
  for (auto& [name_variant, m] : measured) {
    ProfileKey key = device;
    key.kernel = m.spec->name;
    key.variant = m.spec->variant(m.variant).name;
    key.size = m.spec->size;
    // Keep the stored versions of partners (or ratios) this run did not measure.
    auto old = store.get_facet(key, policy::kAkerFacetName);
    if (!old) return old.status();
    if (*old) {
      if (auto before = policy::aker_facet_from_json(**old)) {
        for (const AkerFusedEntry& e : before->fused) {
          const bool replaced = std::any_of(m.facet.fused.begin(), m.facet.fused.end(), [&](const AkerFusedEntry& n) {
            return n.partner == e.partner && n.partner_variant == e.partner_variant && n.partner_size == e.partner_size &&
                   n.self_parts == e.self_parts && n.partner_parts == e.partner_parts;
          });
          if (!replaced) m.facet.fused.push_back(e);
        }
      }
    }
    CONCORD_RETURN_IF_ERROR(store.put_facet(key, policy::kAkerFacetName, policy::aker_facet_to_json(m.facet)));
    ++report.kernels;
  }
  progress << "aker: " << report.kernels << " kernels, " << report.versions << " fused versions stored; " << report.skipped.size()
           << " versions skipped\n";
  for (const std::string& s : report.skipped) progress << "  skipped " << s << "\n";
  return report;
}

}  // namespace concord::profile
