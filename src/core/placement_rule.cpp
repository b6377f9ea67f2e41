// The placement rule (concord/placement_rule.h), the one place a placement is checked: what it
// may ask of the device, from the kernels' declared resources alone, so the simulator and the CUDA
// backend accept and refuse the same requests and the engine checks only its own state.
#include "concord/placement_rule.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "concord/backend.h"
#include "concord/occupancy.h"

namespace concord {
namespace {

std::string describe(const DispatchPart& p) {
  return "tenant " + std::to_string(p.tenant.value) + " kernel '" + p.kernel->name + "'";
}

std::string footprint_text(int threads, int registers, int shared) {
  return std::to_string(threads) + " threads, " + std::to_string(registers) + " registers, " + std::to_string(shared) +
         " bytes of shared memory";
}

Status check_part(const DeviceSpec& device, const DispatchRequest& request, const DispatchPart& p, const Capabilities& caps) {
  // Error text is built only when a check fails (this runs on every dispatch).
  const auto who = [&] { return "dispatch " + std::to_string(request.id.value) + ": " + describe(p); };
  if (p.variant < 0 || p.variant >= p.kernel->variant_count()) {
    return Status::invalid_argument(who() + ": field 'variant': " + std::to_string(p.variant) + " is not one of its " +
                                    std::to_string(p.kernel->variant_count()) + " variants");
  }
  const KernelVariant& v = p.kernel->variant(p.variant);
  if (p.range.begin < 0 || p.range.end > v.logical_blocks || p.range.begin > p.range.end) {
    return Status::invalid_argument(who() + ": field 'range': [" + std::to_string(p.range.begin) + ", " +
                                    std::to_string(p.range.end) + ") is not within its logical grid [0, " +
                                    std::to_string(v.logical_blocks) + ")");
  }
  if (!caps.split_range && p.range != BlockRange{0, v.logical_blocks}) {
    return Status::unsupported(who() + ": field 'range': this kernel runs only its whole grid (no split ranges)");
  }
  if (p.variant != p.kernel->default_variant && !caps.block_variants) {
    return Status::unsupported(who() + ": field 'variant': this kernel has only its default block size here");
  }
  const Placement& pl = request.placement;
  if (bypasses_l1(pl.cache) && !caps.l1_bypass) {
    return Status::unsupported(who() + ": field 'cache': " + to_string(pl.cache) + " needs L1 bypass, which this kernel cannot do");
  }
  if (evicts_l2_first(pl.cache) && !caps.l2_evict_first) {
    return Status::unsupported(who() + ": field 'cache': " + to_string(pl.cache) + " needs L2 evict-first, which this kernel cannot do");
  }
  if (pl.form == LaunchForm::persistent && !caps.persistent_form) {
    return Status::unsupported(who() + ": field 'form': the persistent form needs an elastic kernel");
  }
  if ((pl.tlp > 0 || pl.tight_tlp > 0) && (pl.form != LaunchForm::persistent || !caps.tlp)) {
    return Status::unsupported(who() + ": field 'tlp': a TLP limit needs the persistent form of an elastic kernel");
  }
  if (v.threads_per_block > device.sm.max_threads_per_block) {
    return Status::unsupported(who() + ": variant '" + v.name + "': " + std::to_string(v.threads_per_block) +
                               " threads per block exceed the device's " + std::to_string(device.sm.max_threads_per_block));
  }
  if (v.shared_bytes_per_block > device.sm.max_shared_bytes_per_block) {
    return Status::unsupported(who() + ": variant '" + v.name + "': " + std::to_string(v.shared_bytes_per_block) +
                               " bytes of shared memory per block exceed the device's " +
                               std::to_string(device.sm.max_shared_bytes_per_block));
  }
  const BlockFootprint f = footprint_of(device, v);
  if (max_resident_blocks(device, f) < 1) {
    return Status::unsupported(who() + ": variant '" + v.name + "': one block (" +
                               footprint_text(f.threads, f.registers, f.shared_bytes) + ") does not fit an SM of " +
                               device.name);
  }
  return Status::ok();
}

}  // namespace

int fused_register_cap(const DeviceSpec& device, int threads) {
  const int warps = std::max(1, (threads + 31) / 32);
  const int unit = std::max(1, device.sm.register_alloc_unit);
  const int sp = std::clamp(device.sm.register_sub_partitions, 1, kMaxRegisterSubPartitions);
  // Registers are allocated per warp in units of `unit`, each warp's from one sub-partition of the
  // register file, so `warps` warps fit where ceil(warps / sp) of them fit in one sub-partition;
  // the compiler's cap is a multiple of 8.
  const int per_warp = device.sm.max_registers / ((warps + sp - 1) / sp * sp) / unit * unit;
  return std::min(device.sm.max_registers_per_thread, per_warp / 32 / 8 * 8);
}

Status fused_block_fits(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                        int parts_b) {
  const std::string ratio = "at ratio " + std::to_string(parts_a) + ":" + std::to_string(parts_b);
  if (parts_a < 1 || parts_b < 1) {
    return Status::invalid_argument(ratio + ": field 'parts_per_block': each kernel needs at least one part");
  }
  if (parts_a + parts_b > kMaxFusedParts) {
    return Status::unsupported(ratio + ": field 'parts_per_block': needs more than " + std::to_string(kMaxFusedParts) +
                               " named barriers (one per part)");
  }
  for (const KernelVariant* v : {&a, &b}) {
    if (v->threads_per_block % 32 != 0) {
      return Status::unsupported(ratio + ": variant '" + v->name + "' has " + std::to_string(v->threads_per_block) +
                                 " threads per part: a fused part must be a whole number of warps");
    }
  }
  const int threads = parts_a * a.threads_per_block + parts_b * b.threads_per_block;
  const int shared = parts_a * a.shared_bytes_per_block + parts_b * b.shared_bytes_per_block + kFusedWrapperSharedBytes;
  if (threads > device.sm.max_threads_per_block) {
    return Status::unsupported(ratio + ": the fused block has " + std::to_string(threads) +
                               " threads, more than a block may have (" + std::to_string(device.sm.max_threads_per_block) +
                               ")");
  }
  if (shared > device.sm.max_shared_bytes_per_block) {
    return Status::unsupported(ratio + ": the fused block needs " + std::to_string(shared) +
                               " bytes of shared memory, more than a block may have (" +
                               std::to_string(device.sm.max_shared_bytes_per_block) + ")");
  }
  // One kernel holds both bodies: every thread gets the larger body's registers, capped so that
  // one block fits (the CUDA backend compiles fused kernels with this cap).
  const int registers = std::max(a.registers_per_thread, b.registers_per_thread);
  const int cap = fused_register_cap(device, threads);
  if (registers > cap) {
    return Status::unsupported(ratio + ": " + std::to_string(registers) + " registers per thread over " +
                               std::to_string(threads) + " threads exceed an SM's " +
                               std::to_string(device.sm.max_registers) + " registers (at most " + std::to_string(cap) +
                               " per thread)");
  }
  const BlockFootprint f = footprint_of(device, fused_block_variant(a, parts_a, b, parts_b));
  if (max_resident_blocks(device, f) < 1) {
    return Status::unsupported(ratio + ": the fused block (" + footprint_text(f.threads, f.registers, f.shared_bytes) +
                               ") does not fit an SM of " + device.name);
  }
  return Status::ok();
}

KernelVariant fused_block_variant(const KernelVariant& a, int parts_a, const KernelVariant& b, int parts_b) {
  KernelVariant fused;
  fused.name = a.name + "x" + std::to_string(parts_a) + "+" + b.name + "x" + std::to_string(parts_b);
  fused.threads_per_block = parts_a * a.threads_per_block + parts_b * b.threads_per_block;
  fused.registers_per_thread = std::max(a.registers_per_thread, b.registers_per_thread);
  fused.shared_bytes_per_block =
      parts_a * a.shared_bytes_per_block + parts_b * b.shared_bytes_per_block + kFusedWrapperSharedBytes;
  return fused;
}

std::vector<FusionRatio> fusion_ratios_that_fit(const DeviceSpec& device, const KernelVariant& a, const KernelVariant& b,
                                                int max_parts) {
  std::vector<FusionRatio> out;
  const int most = std::min(max_parts, kMaxFusedParts);
  for (int pa = 1; pa < most; ++pa) {
    for (int pb = 1; pa + pb <= most; ++pb) {
      if (!fused_block_fits(device, a, pa, b, pb)) continue;
      const KernelVariant v = fused_block_variant(a, pa, b, pb);
      out.push_back({pa, pb, max_resident_blocks(device, v)});
    }
  }
  return out;
}

int fused_block_register_cap(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                             int parts_b) {
  const KernelVariant fused = fused_block_variant(a, parts_a, b, parts_b);
  const int one_block = fused_register_cap(device, fused.threads_per_block);
  const int blocks = std::max(1, max_resident_blocks(device, fused));
  const int kept = fused_register_cap(device, fused.threads_per_block * blocks);
  return std::min(one_block, std::max(fused.registers_per_thread, kept));
}

std::vector<FusionShape> fusion_shapes_that_fit(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                                const FusionShapeFilter& filter) {
  std::vector<FusionShape> out;
  for (int va = 0; va < a.variant_count(); ++va) {
    if (filter.variant_a >= 0 && va != filter.variant_a) continue;
    for (int vb = 0; vb < b.variant_count(); ++vb) {
      if (filter.variant_b >= 0 && vb != filter.variant_b) continue;
      const KernelVariant& ka = a.variant(va);
      const KernelVariant& kb = b.variant(vb);
      for (const FusionRatio& r : fusion_ratios_that_fit(device, ka, kb, filter.max_parts)) {
        if ((filter.parts_a >= 0 && r.parts_a != filter.parts_a) || (filter.parts_b >= 0 && r.parts_b != filter.parts_b)) continue;
        out.push_back({va, vb, r.parts_a, r.parts_b, r.blocks_per_sm,
                       r.parts_a * ka.threads_per_block + r.parts_b * kb.threads_per_block});
      }
    }
  }
  return out;
}

std::optional<FusionShape> best_fusion_shape(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                             const FusionShapeFilter& filter) {
  const std::vector<FusionShape> shapes = fusion_shapes_that_fit(device, a, b, filter);
  const bool several = std::any_of(shapes.begin(), shapes.end(),
                                   [](const FusionShape& s) { return s.blocks_per_sm >= kMinFusedBlocksPerSm; });
  const auto rank = [&](const FusionShape& s) {
    const int defaults = (s.variant_a == a.default_variant ? 1 : 0) + (s.variant_b == b.default_variant ? 1 : 0);
    return std::make_tuple(s.resident_warps(), s.blocks_per_sm, defaults, -(s.parts_a + s.parts_b));
  };
  std::optional<FusionShape> best;
  for (const FusionShape& s : shapes) {
    if (several && s.blocks_per_sm < kMinFusedBlocksPerSm) continue;
    if (!best || rank(s) > rank(*best)) best = s;
  }
  return best;
}

Status check_dispatch_resources(const DeviceSpec& device, const DispatchRequest& request, const Capabilities& first,
                                const Capabilities* second) {
  const auto id = [&] { return "dispatch " + std::to_string(request.id.value); };
  if (request.parts.empty() || request.parts.size() > 2) {
    return Status::invalid_argument(id() + ": field 'parts': a dispatch has one part, or two when fused (has " +
                                    std::to_string(request.parts.size()) + ")");
  }
  for (const DispatchPart& p : request.parts) {
    if (p.kernel == nullptr) return Status::invalid_argument(id() + ": field 'kernel': a part has no kernel");
  }
  if (request.parts.size() == 2 && second == nullptr) {
    return Status::internal(id() + ": the capabilities of the second part are missing");
  }
  const Placement& pl = request.placement;
  if (pl.sms.empty()) return Status::invalid_argument(id() + ": field 'sms': the SM set is empty");
  if (!pl.sms.is_subset_of(device.all_sms())) {
    return Status::invalid_argument(id() + ": field 'sms': " + pl.sms.to_string() + " names SMs beyond the device's " +
                                    std::to_string(device.sm_count));
  }
  if (pl.tlp < 0 || pl.tight_tlp < 0) {
    return Status::invalid_argument(id() + ": field 'tlp': limits must be >= 0 (0: as many as fit)");
  }
  if (pl.tight_tlp > 0 && pl.tight_sms.empty()) {
    return Status::invalid_argument(id() + ": field 'tight_sms': a tighter TLP limit names no SMs to apply to");
  }
  if (pl.l2_persist && evicts_l2_first(pl.cache)) {
    return Status::invalid_argument(id() + ": field 'l2_persist': keeping data in L2 contradicts cache policy '" +
                                    std::string(to_string(pl.cache)) + "', which evicts it first");
  }
  if (request.parts.size() == 2 && (!first.fusion || !second->fusion)) {
    const DispatchPart& opaque = first.fusion ? request.parts[1] : request.parts[0];
    return Status::unsupported(id() + ": fusing '" + request.parts[0].kernel->name + "' with '" +
                               request.parts[1].kernel->name + "': field 'fusion': " + describe(opaque) +
                               " is not an elastic kernel (fusion needs two)");
  }
  CONCORD_RETURN_IF_ERROR(check_part(device, request, request.parts[0], first));
  if (request.parts.size() == 1) {
    if (request.parts[0].parts_per_block != 1) {
      return Status::invalid_argument(id() + ": " + describe(request.parts[0]) +
                                      ": field 'parts_per_block': an unfused dispatch has one part per block");
    }
    return Status::ok();
  }

  // A fused pair: a parts of A and b parts of B in one block, each part on its own named barrier.
  const DispatchPart& a = request.parts[0];
  const DispatchPart& b = request.parts[1];
  CONCORD_RETURN_IF_ERROR(check_part(device, request, b, *second));
  const auto who = [&] { return id() + ": fusing " + describe(a) + " with " + describe(b); };
  if (pl.form != LaunchForm::persistent) {
    return Status::unsupported(who() + ": field 'form': fusion runs in the persistent form only");
  }
  const Status fits = fused_block_fits(device, a.kernel->variant(a.variant), a.parts_per_block,
                                       b.kernel->variant(b.variant), b.parts_per_block);
  if (!fits) return Status(fits.code(), who() + " " + fits.message());
  return Status::ok();
}

}  // namespace concord
