// RAISE's metrics as a profile facet (the data the `raise` policy owns in the profile store; the
// profiler fills it, the policy reads it from KernelVariant::facets): {"metrics": {"AOC": 0-10, ...}, "class": "COM"|"MEM"|"LAT"}.
#pragma once

#include <string>
#include <vector>

#include "policy/raise/raise_metrics.h"
#include "concord/facet_codec.h"
#include "concord/status.h"

namespace concord::policy {

// The facet's name in the profile store and in KernelVariant::facets.
inline constexpr const char* kRaiseFacetName = "raise";

std::string raise_facet_to_json(const RaiseVector& metrics);
// The metrics of a "raise" facet; every metric present, finite and within 0-10, the class one of
// COM, MEM, LAT. Errors name the field.
Result<RaiseVector> raise_facet_from_json(const std::string& json);
// The class stored with the metrics.
Result<RaiseClass> raise_facet_class(const std::string& json);

// The facet's codec for the profile store (concord/facet_codec.h; registered through the generated
// builtin_facet_codecs()).
std::vector<FacetCodec> raise_facet_codecs();

}  // namespace concord::policy
