#include "mechanism/sm_sharing.h"

#include <algorithm>
#include <cmath>

namespace concord::policy {

BlockFootprint SmOccupants::on(int sm) const {
  for (const Group& g : groups) {
    if (g.sms.contains(sm)) return g.load;
  }
  return BlockFootprint{0, 0, 0};
}

BlockFootprint dispatch_footprint(const DeviceSpec& device, const RunningDispatch& d) {
  BlockFootprint f{0, 0, 0};
  for (size_t k = 0; k < d.kernels.size(); ++k) {
    const BlockFootprint one = footprint_of(device, d.kernels[k]->variant(d.variants[k]));
    f.threads += one.threads * d.parts_per_block[k];
    f.registers += one.registers * d.parts_per_block[k];
    f.shared_bytes += one.shared_bytes * d.parts_per_block[k];
  }
  return f;
}

void SmLoad::reset(int sm_count) {
  per_sm_.assign(static_cast<size_t>(std::max(sm_count, 0)), BlockFootprint{0, 0, 0});
  held_.clear();
}

void SmLoad::add(DispatchId id, const SmSet& sms, const BlockFootprint& f) {
  held_.push_back({id, sms, f});
  sms.for_each([&](int sm) {
    if (static_cast<size_t>(sm) >= per_sm_.size()) return;
    BlockFootprint& l = per_sm_[static_cast<size_t>(sm)];
    l.threads += f.threads;
    l.registers += f.registers;
    l.shared_bytes += f.shared_bytes;
  });
}

void SmLoad::remove(DispatchId id) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.id == id; });
  if (it == held_.end()) return;
  const BlockFootprint f = it->footprint;
  it->sms.for_each([&](int sm) {
    if (static_cast<size_t>(sm) >= per_sm_.size()) return;
    BlockFootprint& l = per_sm_[static_cast<size_t>(sm)];
    l.threads -= f.threads;
    l.registers -= f.registers;
    l.shared_bytes -= f.shared_bytes;
  });
  *it = held_.back();
  held_.pop_back();
}

double SmLoad::mean_share(const BlockFootprint& kernel, const SmSet& sms) const {
  // Neighbouring SMs mostly carry the same load: the last share is reused while it repeats.
  double u = 0;
  int n = 0;
  BlockFootprint last{-1, -1, -1};
  double last_share = 1.0;
  sms.for_each([&](int sm) {
    if (static_cast<size_t>(sm) >= per_sm_.size()) return;
    const BlockFootprint& l = per_sm_[static_cast<size_t>(sm)];
    if (l.threads != last.threads || l.registers != last.registers || l.shared_bytes != last.shared_bytes) {
      last = l;
      last_share = resource_share(kernel, l);
    }
    u += last_share;
    ++n;
  });
  return n > 0 ? u / n : 1.0;
}

SmOccupants occupants_of(const SchedContext& ctx, std::optional<DispatchId> exclude) {
  SmOccupants o;
  o.groups.push_back({ctx.device().all_sms(), BlockFootprint{0, 0, 0}});
  for (const RunningDispatch& d : ctx.running()) {
    if (exclude && d.id == *exclude) continue;
    const BlockFootprint f = dispatch_footprint(ctx.device(), d);
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

namespace {

int capped_tlp(double share, int occupancy) {
  return std::clamp(static_cast<int>(std::ceil(share * occupancy - 1e-9)), 1, occupancy);
}

}  // namespace

Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share) {
  Placement p;
  p.sms = sms;
  p.cache = cache;
  const Capabilities caps = ctx.capabilities(kernel);
  if (!caps.persistent_form) return p;  // opaque: native
  const bool whole = sms.count() >= ctx.device().sm_count;
  const int occupancy = max_resident_blocks(ctx.device(), kernel.variant(kernel.default_variant));
  const bool cap = share < 0.999 && occupancy > 1 && caps.tlp;
  if (whole) return p;  // native: the block scheduler decides
  p.form = LaunchForm::persistent;
  if (cap) p.tlp = capped_tlp(share, occupancy);
  return p;
}

}  // namespace concord::policy
