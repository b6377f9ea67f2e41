// The placement rule (src/core/placement_rule.cpp): the one place a placement is checked against the
// device and the kernels (Backend::can_implement applies it; the engine checks only what its own
// state decides: the launch, its pending blocks, its variant), and the shapes fused blocks may take.
#pragma once

#include <optional>
#include <vector>

#include "concord/backend.h"
#include "concord/device.h"
#include "concord/kernel.h"
#include "concord/status.h"

namespace concord {

// The placement rule both backends apply (can_implement): SM set within the device, variants and
// ranges within the kernels' grids, cache policies and forms the kernels' capabilities allow, one
// block within the SM limits; for a fused pair, both kernels elastic in the persistent form, each
// part a whole number of warps, at most kMaxFusedParts parts, and the fused block (a parts of A, b
// of B) within one block's and one SM's threads, registers and shared memory.
inline constexpr int kMaxFusedParts = 15;  // named barriers 1..15, one per part (0 is __syncthreads)
// Static shared memory the fused wrapper itself holds (its per-part chunk slots and a flag).
inline constexpr int kFusedWrapperSharedBytes = 256;
Status check_dispatch_resources(const DeviceSpec& device, const DispatchRequest& request,
                                const Capabilities& first, const Capabilities* second);
// Registers per thread a fused block of `threads` threads may use on `device` so that one block
// fits an SM: the CUDA backend compiles fused kernels with this cap, and the rule checks the
// kernels' registers against it.
int fused_register_cap(const DeviceSpec& device, int threads);

// Whether a fused block of `parts_a` parts of variant `a` and `parts_b` parts of variant `b` fits
// (the fused-pair half of check_dispatch_resources): at most kMaxFusedParts parts (one named barrier
// each), whole warps per part, the block's threads and shared memory (the wrapper's included)
// within one block's limits, the larger body's registers within fused_register_cap, and one such
// block within an SM. unsupported (invalid_argument for a part count below 1) names what is over.
Status fused_block_fits(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                        int parts_b);
// The fused block as one variant (threads, registers per thread, shared memory with the wrapper's),
// for occupancy: max_resident_blocks(device, fused_block_variant(...)) fused blocks fit an SM.
KernelVariant fused_block_variant(const KernelVariant& a, int parts_a, const KernelVariant& b, int parts_b);
// Every ratio a:b with a + b <= max_parts (and <= kMaxFusedParts) whose fused block fits, with the
// fused blocks resident per SM: Aker's fused versions of a pair (its section 5.4).
struct FusionRatio {
  int parts_a = 1;
  int parts_b = 1;
  int blocks_per_sm = 0;
};
std::vector<FusionRatio> fusion_ratios_that_fit(const DeviceSpec& device, const KernelVariant& a, const KernelVariant& b,
                                                int max_parts = kMaxFusedParts);
// The registers per thread a fused block of (a, parts_a, b, parts_b) is compiled with: the most
// that still let as many such blocks share an SM as the kernels' declared registers allow
// (max_resident_blocks of fused_block_variant), so that the compiled kernel keeps the occupancy a
// fusion was chosen for; never below the larger declared count, never above
// fused_register_cap(device, threads).
int fused_block_register_cap(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                             int parts_b);

// A fused block's shape: a block-size variant of each kernel, the parts of each per block, and
// how many such blocks fit an SM.
struct FusionShape {
  int variant_a = 0;
  int variant_b = 0;
  int parts_a = 1;
  int parts_b = 1;
  int blocks_per_sm = 0;
  int threads = 0;  // of one fused block
  // Warps resident on a full SM: the occupancy the fused kernel runs at.
  int resident_warps() const { return blocks_per_sm * ((threads + 31) / 32); }
};
// What a choice of shape may be restricted to (-1: any): a variant a launch already runs, or the
// ratio of a measured version.
struct FusionShapeFilter {
  int variant_a = -1;
  int variant_b = -1;
  int parts_a = -1;
  int parts_b = -1;
  int max_parts = kMaxFusedParts;
};
// Every shape of (a, b) within `filter` whose fused block fits (fused_block_fits), variants in
// index order, then ratios as fusion_ratios_that_fit lists them.
std::vector<FusionShape> fusion_shapes_that_fit(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                                const FusionShapeFilter& filter = {});
// The fewest fused blocks per SM a chosen shape should leave when any shape allows it: with one
// block per SM, a fused launch's parts wait on each other's tails and the SM idles between them.
inline constexpr int kMinFusedBlocksPerSm = 2;
// The shape fusion uses when nothing was measured: among the shapes within `filter`, those with
// at least kMinFusedBlocksPerSm blocks per SM if there are any, and of them the one with the most
// resident warps per SM (occupancy: each part's throughput grows with the warps it keeps busy);
// ties go to more blocks per SM, then to the kernels' default variants, then to fewer parts.
// nullopt when no shape fits.
std::optional<FusionShape> best_fusion_shape(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                             const FusionShapeFilter& filter = {});

}  // namespace concord
