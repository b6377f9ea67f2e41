// KernelSpec and friends: what a kernel is, independent of where it runs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace concord {

// How a launch's global loads use the caches (FEDCM s0/s1/s2/s12 on NVIDIA: docs/hardware.md).
enum class CachePolicy : uint8_t {
  normal = 0,        // s0: default caching
  l1_bypass = 1,     // s1: ld.global.cg / L1::no_allocate
  l2_evict_first = 2,// s2: ld.global.cs / L2::evict_first (or a streaming access-policy window)
  both = 3,          // s12
};
inline constexpr CachePolicy kAllCachePolicies[] = {CachePolicy::normal, CachePolicy::l1_bypass,
                                                    CachePolicy::l2_evict_first, CachePolicy::both};
const char* to_string(CachePolicy p);
std::optional<CachePolicy> cache_policy_from_string(const std::string& s);
inline bool bypasses_l1(CachePolicy p) { return p == CachePolicy::l1_bypass || p == CachePolicy::both; }
inline bool evicts_l2_first(CachePolicy p) {
  return p == CachePolicy::l2_evict_first || p == CachePolicy::both;
}

// Which functional unit bounds the kernel's arithmetic.
enum class ComputeUnit : uint8_t { fp32 = 0, tensor = 1 };

// One block-size variant of a kernel (RAISE's Min/Mid/Max dimensions). Work per logical block
// scales with the block size, so the logical grid changes with the variant.
struct KernelVariant {
  std::string name;              // "min", "mid", "max"; "min@8" when not the usual block size
  int threads_per_block = 256;
  int registers_per_thread = 32;
  int shared_bytes_per_block = 0;
  int64_t logical_blocks = 1;    // size of the logical grid
  int items_per_block = 1;       // work items (elements, points, cells) one logical block covers
  double flops_per_block = 0;    // per logical block
  double bytes_per_block = 0;    // DRAM bytes per logical block
  // Profile data policies own, measured for this variant and attached from the profile store:
  // facet name ("raise") -> JSON object, read only by the policy that owns the facet (RAISE's
  // metric vector: src/policy/raise/raise_facet.h). Empty when not profiled.
  std::map<std::string, std::string> facets;

  int warps_per_block() const { return (threads_per_block + 31) / 32; }
};

// A measured point of duration against SM count (from the profiler).
struct SmCurvePoint {
  int sms = 0;
  double seconds = 0;
};

// Seconds at `sms` SMs from a measured curve (ascending SM counts, non-empty): linear between
// points, perfect scaling below the first point, flat above the last.
double curve_seconds(const std::vector<SmCurvePoint>& curve, int sms);

struct KernelSpec {
  std::string name;              // suite name, e.g. "hotspot"
  int64_t size = 0;              // problem size the spec was built for
  bool elastic = true;           // written against the device API; false = opaque library kernel
  ComputeUnit unit = ComputeUnit::fp32;
  std::vector<KernelVariant> variants;  // at least one; index 0 is the default
  int default_variant = 0;
  // Cache sensitivity (simulator): fraction by which a logical block slows when it loses the
  // L1 (own bypass, or pollution by another kernel on the same SM) or its share of L2.
  double l1_sensitivity = 0.0;
  double l2_sensitivity = 0.0;
  // Measured duration against SM count for the default variant, full TLP, normal caching;
  // empty when not profiled (the simulator then uses a roofline).
  std::vector<SmCurvePoint> sm_curve;
  // Measured slowdown of each cache policy against normal caching on every SM (index by
  // CachePolicy); 1 when not profiled.
  std::array<double, 4> cache_slowdown{1, 1, 1, 1};
  // The same measured beside a streaming kernel sharing every SM; 0 when not measured.
  std::array<double, 4> cache_slowdown_pressure{0, 0, 0, 0};

  const KernelVariant& variant(int index) const { return variants.at(static_cast<size_t>(index)); }
  int variant_count() const { return static_cast<int>(variants.size()); }
  // Index of a variant by name ("min" also finds "min@8"; "min@64" finds a min slot of 64
  // threads), or nullopt.
  std::optional<int> find_variant(const std::string& name) const;
};

// A variant name split into its slot and, for "min@8", its block size (nullopt when the name has
// none); nullopt overall when the part after '@' is not a positive integer.
struct VariantName {
  std::string slot;
  std::optional<int> threads;
};
std::optional<VariantName> parse_variant_name(const std::string& name);

// Per-SM resource footprint of one block and how many fit on an SM.
struct BlockFootprint {
  int threads = 0;
  int registers = 0;  // the block's whole register allocation: warps * registers_per_warp
  int shared_bytes = 0;
  // Registers are allocated per warp, each warp's from one sub-partition of the register file.
  int warps = 0;
  int registers_per_warp = 0;
};

}  // namespace concord
