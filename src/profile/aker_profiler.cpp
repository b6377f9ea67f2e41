// Fills Aker's facet by timing kernels and fused pairs through the Backend interface.
#include <algorithm>
#include <cmath>
#include <memory>

#include "policy/aker/aker_facet.h"
#include "profile/profiler.h"
#include "profile/timer.h"

namespace concord::profile {
namespace {

using policy::AkerFacet;
using policy::AkerFusedEntry;
using policy::AkerPoint;

// What was measured about one kernel (its default variant) on this backend.
struct Measured {
  const KernelSpec* spec = nullptr;
  AkerFacet facet;
  double persistent_seconds = 0;  // whole grid on every SM, persistent form (X_k1 of its fusions)
  std::optional<policy::AkerSoloModel> solo;
};

Launch whole_launch(const Backend& b, const KernelSpec& k, bool persistent) {
  Launch l;
  l.kernel = &k;
  l.variant = k.default_variant;
  l.range = {0, k.variant(k.default_variant).logical_blocks};
  l.placement.sms = b.device().all_sms();
  l.placement.form = persistent ? LaunchForm::persistent : LaunchForm::native;
  return l;
}

Result<Measured> measure_kernel(Backend& b, Timer& timer, const KernelSpec& k, int reps) {
  Measured m;
  m.spec = &k;
  const Capabilities caps = b.capabilities(k);
  const KernelVariant& v = k.variant(k.default_variant);
  Launch l = whole_launch(b, k, caps.persistent_form);
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

// One fused version of (a, b) at ratio parts: the points, or why not.
Result<std::vector<AkerPoint>> measure_version(Backend& b, Timer& timer, const Measured& a, const Measured& bm, int self_parts,
                                               int partner_parts, int reps) {
  std::vector<AkerPoint> points;
  const int64_t partner_blocks = bm.spec->variant(bm.spec->default_variant).logical_blocks;
  for (double ratio : policy::kAkerProfileRatios) {
    const double want = bm.solo->blocks_within(ratio * a.persistent_seconds);
    const auto n = std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::min(want, 9e18))), 1, partner_blocks);
    Launch l = whole_launch(b, *a.spec, true);
    l.partner = Launch::Partner{bm.spec, bm.spec->default_variant, {0, n}, TenantId{1}, self_parts, partner_parts};
    CONCORD_RETURN_IF_ERROR(timer.can_run(l));
    auto t = timer.median(l, reps);
    if (!t) return t.status();
    const double achieved = bm.solo->seconds(static_cast<double>(n)) / a.persistent_seconds;
    // A ratio K_2's grid cannot reach repeats the one before: keep one point for it.
    if (!points.empty() && achieved <= points.back().x) continue;
    points.push_back({achieved, *t / a.persistent_seconds});
  }
  return points;
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
  std::map<std::string, Measured> measured;
  for (const KernelSpec& k : options.kernels) {
    progress << "aker: " << k.name << " (size " << k.size << "): class and solo line\n";
    auto m = measure_kernel(*backend, timer, k, options.reps);
    if (!m) return Status(m.status().code(), k.name + ": " + m.status().message());
    measured[k.name] = std::move(*m);
  }
  for (const auto& [an, bn] : options.pairs) {
    const Measured& a = measured.at(an);
    const Measured& b = measured.at(bn);
    if (!(a.persistent_seconds > 0) || !b.solo) {
      report.skipped.push_back(an + "+" + bn + ": both kernels must be elastic with sub-ranges on this backend");
      continue;
    }
    for (const auto& [sp, pp] : options.ratios) {
      const std::string name = an + "+" + bn + " " + std::to_string(sp) + ":" + std::to_string(pp);
      progress << "aker: " << name << "\n";
      auto points = measure_version(*backend, timer, a, b, sp, pp, options.reps);
      if (!points) {
        if (points.status().code() != StatusCode::unsupported && points.status().code() != StatusCode::invalid_argument) {
          return Status(points.status().code(), name + ": " + points.status().message());
        }
        report.skipped.push_back(name + ": " + points.status().message());
        continue;
      }
      if (auto fit = policy::AkerFusedModel::fit(*points); !fit) {
        report.skipped.push_back(name + ": " + fit.status().message());
        continue;
      }
      AkerFusedEntry e;
      e.partner = b.spec->name;
      e.partner_variant = b.spec->variant(b.spec->default_variant).name;
      e.partner_size = b.spec->size;
      e.self_parts = sp;
      e.partner_parts = pp;
      e.self_seconds = a.persistent_seconds;
      e.points = std::move(*points);
      measured.at(an).facet.fused.push_back(std::move(e));
      ++report.versions;
    }
  }
  for (auto& [name, m] : measured) {
    ProfileKey key = device;
    key.kernel = m.spec->name;
    key.variant = m.spec->variant(m.spec->default_variant).name;
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
