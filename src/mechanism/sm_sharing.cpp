#include "mechanism/sm_sharing.h"

#include <algorithm>
#include <cmath>

namespace concord::policy {

Result<SmSharing> sharing_param(const std::string& policy, const PolicyParams& params) {
  auto it = params.find("sharing");
  if (it == params.end() || it->second == "native") return SmSharing::native;
  if (it->second == "arbitrate") return SmSharing::arbitrate;
  return Status::invalid_argument(policy + ": parameter 'sharing' must be native or arbitrate (got '" + it->second + "')");
}

BlockFootprint SmOccupants::on(int sm) const {
  for (const Group& g : groups) {
    if (g.sms.contains(sm)) return g.load;
  }
  return BlockFootprint{0, 0, 0};
}

SmOccupants occupants_of(const SchedContext& ctx, std::optional<DispatchId> exclude) {
  SmOccupants o;
  o.groups.push_back({ctx.device().all_sms(), BlockFootprint{0, 0, 0}});
  for (const RunningDispatch& d : ctx.running()) {
    if (exclude && d.id == *exclude) continue;
    BlockFootprint f{0, 0, 0};
    for (size_t k = 0; k < d.kernels.size(); ++k) {
      const BlockFootprint one = footprint_of(ctx.device(), d.kernels[k]->variant(d.variants[k]));
      f.threads += one.threads * d.parts_per_block[k];
      f.registers += one.registers * d.parts_per_block[k];
      f.shared_bytes += one.shared_bytes * d.parts_per_block[k];
    }
    // Split every group by the dispatch's set: the part inside carries its footprint too.
    const size_t n = o.groups.size();
    for (size_t g = 0; g < n; ++g) {
      const SmSet inside = o.groups[g].sms & d.placement.sms;
      if (inside.empty()) continue;
      BlockFootprint load = o.groups[g].load;
      load.threads += f.threads;
      load.registers += f.registers;
      load.shared_bytes += f.shared_bytes;
      const SmSet outside = o.groups[g].sms.minus(d.placement.sms);
      if (outside.empty()) {
        o.groups[g].load = load;
      } else {
        o.groups[g].sms = outside;
        o.groups.push_back({inside, load});
      }
    }
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
  for (const auto& g : occ.groups) {
    const int c = (g.sms & sms).count();
    if (c == 0) continue;
    u += c * resource_share(kernel, g.load);
    n += c;
  }
  return n > 0 ? u / n : 1.0;
}

std::vector<double> share_per_sm(const BlockFootprint& kernel, const SmOccupants& occ, int sm_count) {
  std::vector<double> out(static_cast<size_t>(sm_count), 1.0);
  for (const auto& g : occ.groups) {
    const double u = resource_share(kernel, g.load);
    g.sms.for_each([&](int sm) {
      if (sm < sm_count) out[static_cast<size_t>(sm)] = u;
    });
  }
  return out;
}

SharedPart shared_part(const BlockFootprint& kernel, const SmOccupants& occ, const SmSet& sms) {
  SharedPart p;
  double u = 0;
  for (const auto& g : occ.groups) {
    const SmSet mine = g.sms & sms;
    if (mine.empty()) continue;
    const double share = resource_share(kernel, g.load);
    if (share >= 0.999) continue;
    p.sms = p.sms | mine;
    u += mine.count() * share;
  }
  if (!p.sms.empty()) p.share = u / p.sms.count();
  return p;
}

namespace {

int capped_tlp(double share, int occupancy) {
  return std::clamp(static_cast<int>(std::ceil(share * occupancy - 1e-9)), 1, occupancy);
}

}  // namespace

Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share, SmSharing sharing, const SharedPart* shared) {
  Placement p;
  p.sms = sms;
  p.cache = cache;
  const Capabilities caps = ctx.capabilities(kernel);
  if (!caps.persistent_form) return p;  // opaque: native
  const bool whole = sms.count() >= ctx.device().sm_count;
  const int occupancy = max_resident_blocks(ctx.device(), kernel.variant(kernel.default_variant));
  if (sharing == SmSharing::arbitrate && shared) {
    const bool cap = !shared->sms.empty() && occupancy > 1 && caps.tlp;
    if (!cap) {
      if (whole) return p;  // alone on every SM: a plain launch
      p.form = LaunchForm::persistent;
      return p;
    }
    p.form = LaunchForm::persistent;
    p.tight_sms = shared->sms;
    p.tight_tlp = capped_tlp(shared->share, occupancy);
    return p;
  }
  const bool cap = share < 0.999 && occupancy > 1 && caps.tlp;
  if (whole) return p;  // native: the block scheduler decides
  p.form = LaunchForm::persistent;
  if (cap) p.tlp = capped_tlp(share, occupancy);
  return p;
}

Result<int> regrow_shared(SchedContext& ctx) {
  const auto running = ctx.running();
  if (running.size() < 1) return 0;
  struct Raise {
    DispatchId id;
    SmSet tight;
    int tight_tlp;
  };
  std::vector<Raise> raises;
  for (const RunningDispatch& d : running) {
    if (d.placement.form != LaunchForm::persistent || d.placement.tight_tlp <= 0 || d.kernels.size() != 1) continue;
    const KernelSpec& k = *d.kernels[0];
    if (!ctx.capabilities(k).resize) continue;
    const BlockFootprint fp = footprint_of(ctx.device(), k.variant(d.variants[0]));
    const int occupancy = max_resident_blocks(ctx.device(), fp);
    // Its share next to the others, on the SMs it shares now (a subset of its tight SMs: kernels
    // that came later were capped themselves, not it).
    const SharedPart now = shared_part(fp, occupants_of(ctx, d.id), d.placement.tight_sms);
    const int tight_tlp = now.sms.empty() ? 0 : std::max(d.placement.tight_tlp, capped_tlp(now.share, occupancy));
    if (now.sms == d.placement.tight_sms && tight_tlp == d.placement.tight_tlp) continue;
    raises.push_back({d.id, now.sms, tight_tlp});
  }
  for (const auto& r : raises) CONCORD_RETURN_IF_ERROR(ctx.set_tlp(r.id, 0, r.tight, r.tight_tlp));
  return static_cast<int>(raises.size());
}

}  // namespace concord::policy
