// shortest-first's profile facet: a kernel variant's measured time alone on the whole GPU,
// {"seconds": S}. Where a kernel has one (attached from the profile store), the policy orders by
// it instead of the estimator's figure. docs/architecture.md, "Adding a policy", walks through it.
#pragma once

#include <string>
#include <vector>

#include "concord/facet_codec.h"
#include "concord/status.h"

namespace concord::policy {

inline constexpr const char* kShortestFirstFacetName = "shortest_first";

std::string shortest_first_facet_to_json(double seconds);
// The seconds of a facet: present, a finite number above 0. Errors name the field.
Result<double> shortest_first_facet_from_json(const std::string& json);
// The facet's codec for the profile store (concord/facet_codec.h).
std::vector<FacetCodec> shortest_first_facet_codecs();

}  // namespace concord::policy
