#include "policy/sharing.h"

#include <algorithm>
#include <cmath>

namespace concord::policy {

Result<SmSharing> sharing_param(const std::string& policy, const PolicyParams& params) {
  auto it = params.find("sharing");
  if (it == params.end() || it->second == "native") return SmSharing::native;
  if (it->second == "arbitrate") return SmSharing::arbitrate;
  return Status::invalid_argument(policy + ": parameter 'sharing' must be native or arbitrate (got '" + it->second + "')");
}

const char* sharing_name(SmSharing s) { return s == SmSharing::arbitrate ? "arbitrate" : "native"; }

SmOccupants occupants_of(const SchedContext& ctx) {
  SmOccupants o;
  const int n = ctx.device().sm_count;
  o.per_sm.assign(static_cast<size_t>(n), BlockFootprint{0, 0, 0});
  for (const RunningDispatch& d : ctx.running()) {
    BlockFootprint f{0, 0, 0};
    for (size_t k = 0; k < d.kernels.size(); ++k) {
      const BlockFootprint one = footprint_of(ctx.device(), d.kernels[k]->variant(d.variants[k]));
      f.threads += one.threads * d.parts_per_block[k];
      f.registers += one.registers * d.parts_per_block[k];
      f.shared_bytes += one.shared_bytes * d.parts_per_block[k];
    }
    d.placement.sms.for_each([&](int sm) {
      if (sm >= n) return;
      BlockFootprint& t = o.per_sm[static_cast<size_t>(sm)];
      t.threads += f.threads;
      t.registers += f.registers;
      t.shared_bytes += f.shared_bytes;
    });
  }
  return o;
}

double resource_share(const BlockFootprint& k, const BlockFootprint& others) {
  // FEDCM's example: a kernel asking 3 MB of shared memory next to kernels asking 4 and 1 gets
  // 3 / (3 + 4 + 1). Resources the kernel does not use do not count against it.
  double sum = 0;
  int used = 0;
  auto add = [&](double mine, double theirs) {
    if (mine <= 0) return;
    sum += mine / (mine + theirs);
    ++used;
  };
  add(k.shared_bytes, others.shared_bytes);
  add(k.registers, others.registers);
  add(k.threads, others.threads);
  return used > 0 ? sum / used : 1.0;
}

double resource_share(const BlockFootprint& k, const std::vector<BlockFootprint>& others) {
  BlockFootprint total{0, 0, 0};
  for (const auto& o : others) {
    total.threads += o.threads;
    total.registers += o.registers;
    total.shared_bytes += o.shared_bytes;
  }
  return resource_share(k, total);
}

double mean_share(const BlockFootprint& kernel, const SmOccupants& occ, const SmSet& sms) {
  double u = 0;
  int n = 0;
  sms.for_each([&](int sm) {
    if (static_cast<size_t>(sm) >= occ.per_sm.size()) return;
    u += resource_share(kernel, occ.per_sm[static_cast<size_t>(sm)]);
    ++n;
  });
  return n > 0 ? u / n : 1.0;
}

namespace {

int capped_tlp(double share, int occupancy) {
  return std::clamp(static_cast<int>(std::ceil(share * occupancy - 1e-9)), 1, occupancy);
}

}  // namespace

Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share, SmSharing sharing) {
  Placement p;
  p.sms = sms;
  p.cache = cache;
  const Capabilities caps = ctx.capabilities(kernel);
  if (!caps.persistent_form) return p;  // opaque: native
  const bool whole = sms.count() >= ctx.device().sm_count;
  const int occupancy = max_resident_blocks(ctx.device(), kernel.variant(kernel.default_variant));
  const bool cap = share < 0.999 && occupancy > 1 && caps.tlp;
  if (whole && (sharing == SmSharing::native || !cap)) return p;  // native: alone there, or left to the hardware
  p.form = LaunchForm::persistent;
  if (cap) p.tlp = capped_tlp(share, occupancy);
  return p;
}

Result<int> regrow_shared(SchedContext& ctx) {
  const auto running = ctx.running();
  if (running.empty()) return 0;
  SmOccupants occ;
  bool have_occ = false;
  std::vector<std::pair<DispatchId, int>> raise;
  for (const RunningDispatch& d : running) {
    if (d.placement.form != LaunchForm::persistent || d.placement.tlp <= 0 || d.kernels.size() != 1) continue;
    const KernelSpec& k = *d.kernels[0];
    if (!ctx.capabilities(k).resize) continue;
    const BlockFootprint fp = footprint_of(ctx.device(), k.variant(d.variants[0]));
    const int occupancy = max_resident_blocks(ctx.device(), fp);
    if (d.placement.tlp >= occupancy) continue;
    if (!have_occ) {
      occ = occupants_of(ctx);
      have_occ = true;
    }
    // The others on its SMs: everybody there minus itself.
    double u = 0;
    int n = 0;
    d.placement.sms.for_each([&](int sm) {
      if (static_cast<size_t>(sm) >= occ.per_sm.size()) return;
      BlockFootprint others = occ.per_sm[static_cast<size_t>(sm)];
      others.threads -= fp.threads;
      others.registers -= fp.registers;
      others.shared_bytes -= fp.shared_bytes;
      u += resource_share(fp, others);
      ++n;
    });
    const double share = n > 0 ? u / n : 1.0;
    const int tlp = share >= 0.999 ? occupancy : capped_tlp(share, occupancy);
    if (tlp > d.placement.tlp) raise.emplace_back(d.id, tlp);
  }
  for (const auto& [id, tlp] : raise) CONCORD_RETURN_IF_ERROR(ctx.set_tlp(id, tlp));
  return static_cast<int>(raise.size());
}

}  // namespace concord::policy
