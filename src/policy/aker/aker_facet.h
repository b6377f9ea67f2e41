// Aker's profile facet (the data the `aker` and `tacker` policies own in the profile store; `concord
// profile aker` fills it, the policies read it from KernelVariant::facets):
//   {"class": "tensor"|"compute"|"memory"|"neutral", "tensor": bool,
//    "compute_utilization": share, "memory_utilization": share,
//    "solo": [[logical blocks, seconds], ...],
//    "fused": [{"partner": kernel, "partner_variant": name, "partner_size": size,
//               "self_parts": a, "partner_parts": b, "self_seconds": X_k1,
//               "points": [[load ratio, fused seconds / X_k1], ...]}, ...]}
// This kernel is K_1 of each fused entry (its whole grid runs), the partner K_2 (a sub-range).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "concord/facet_codec.h"
#include "concord/status.h"
#include "policy/aker/aker_class.h"
#include "policy/aker/aker_model.h"

namespace concord::policy {

// The facet's name in the profile store and in KernelVariant::facets.
inline constexpr const char* kAkerFacetName = "aker";

struct AkerFusedEntry {
  std::string partner;
  std::string partner_variant;
  int64_t partner_size = 0;
  int self_parts = 1;
  int partner_parts = 1;
  double self_seconds = 0;          // K_1's solo time the points are normalised by
  std::vector<AkerPoint> points;    // (load ratio, fused seconds / self_seconds)
};

struct AkerFacet {
  AkerClass cls = AkerClass::neutral;
  AkerUtilisation utilisation;
  std::vector<AkerPoint> solo;  // (logical blocks, seconds); empty: not measured
  std::vector<AkerFusedEntry> fused;
};

std::string aker_facet_to_json(const AkerFacet& facet);
// Every field checked: types, shares and times finite and not negative, blocks and ratios
// positive, parts >= 1. Errors name the field ("aker facet: field 'fused[1].points[2]': ...").
Result<AkerFacet> aker_facet_from_json(const std::string& json);

// The facet's codec for the profile store (concord/facet_codec.h; registered through the generated
// builtin_facet_codecs()).
std::vector<FacetCodec> aker_facet_codecs();

}  // namespace concord::policy
