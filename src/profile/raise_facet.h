// RAISE's metrics as a profile facet: {"metrics": {"AOC": 0-10, ...}, "class": "COM"|"MEM"|"LAT"}.
#pragma once

#include <string>

#include "concord/raise.h"
#include "concord/status.h"

namespace concord::profile {

std::string raise_facet_to_json(const RaiseVector& metrics);
// The metrics of a "raise" facet; every metric present, finite and within 0-10, the class one of
// COM, MEM, LAT. Errors name the field.
Result<RaiseVector> raise_facet_from_json(const std::string& json);
// The class stored with the metrics.
Result<RaiseClass> raise_facet_class(const std::string& json);

}  // namespace concord::profile
