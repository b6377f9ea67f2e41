// PBS's effective bandwidth (the PBS paper, Table III and Section III-B) and the
// profile facet it needs. On NVIDIA the co-running miss rates of one tenant cannot be read online
// (per-kernel counters serialize kernels: docs/hardware.md), so the rates come from an offline Nsight
// Compute pass, stored as the "pbs" facet of a kernel variant:
//   {"requested_bytes_per_block": B, "l1_miss_rate": m1, "l2_miss_rate": m2}
// and the online part is the tenant's logical blocks per second from its progress counters.
//   BW  = B x m1 x m2 x blocks/s          (DRAM bytes/s attributable to the tenant)
//   CMR = m1 x m2                          (combined miss rate)
//   EB  = BW / CMR = B x blocks/s          (bytes delivered to the cores per second)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/facet_codec.h"
#include "concord/status.h"

namespace concord::policy {

inline constexpr const char* kPbsFacetName = "pbs";

struct PbsFacet {
  double requested_bytes_per_block = 0;  // global load + store bytes the body requests (L1's input)
  double l1_miss_rate = 1;               // in (0, 1]
  double l2_miss_rate = 1;               // in (0, 1]
};

std::string pbs_facet_to_json(const PbsFacet& facet);
// Every field present, finite, bytes > 0 and miss rates in (0, 1]; errors name the field.
Result<PbsFacet> pbs_facet_from_json(const std::string& json);

// Nsight Compute metrics the facet is made of (base units), and the facet of one launch that ran
// `logical_blocks` blocks: requested bytes = global load + store bytes through L1 over the blocks;
// miss rates = 1 - sector hit rate (a hit rate of 100% is kept as a miss rate of 1e-3, so EB stays
// finite). Errors name a missing metric.
inline constexpr const char* kNcuGlobalLoadBytes = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum";
inline constexpr const char* kNcuGlobalStoreBytes = "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum";
inline constexpr const char* kNcuL1HitRate = "l1tex__t_sector_hit_rate.pct";
inline constexpr const char* kNcuL2HitRate = "lts__t_sector_hit_rate.pct";
Result<PbsFacet> pbs_facet_from_ncu(const std::map<std::string, double>& metrics, int64_t logical_blocks);

// The facet attached to `variant`, or, when it was not profiled, the spec's DRAM bytes per
// logical block as the requested bytes with miss rates of 1 (no cache amplification known; 1 byte
// when the spec states none). An error only for a malformed facet.
Result<PbsFacet> pbs_facet_of(const KernelVariant& variant);
// Whether `variant` carries a measured `pbs` facet (concord profile ncu stores it).
bool has_pbs_facet(const KernelVariant& variant);

struct EffectiveBandwidth {
  double bw = 0;   // DRAM bytes per second
  double cmr = 1;  // combined miss rate
  double eb = 0;   // bytes per second delivered to the cores
};
// EB of a tenant that finished `blocks_per_s` logical blocks per second of a kernel with `facet`.
EffectiveBandwidth effective_bandwidth(const PbsFacet& facet, double blocks_per_s);

// The facet's codec for the profile store (concord/facet_codec.h; registered through the generated
// builtin_facet_codecs()).
std::vector<FacetCodec> pbs_facet_codecs();

}  // namespace concord::policy
