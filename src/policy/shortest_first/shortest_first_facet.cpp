#include "policy/shortest_first/shortest_first_facet.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace concord::policy {

std::string shortest_first_facet_to_json(double seconds) { return nlohmann::json{{"seconds", seconds}}.dump(); }

Result<double> shortest_first_facet_from_json(const std::string& json) {
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::parse_error("shortest_first facet: not a JSON object");
  if (!j.contains("seconds") || !j["seconds"].is_number()) {
    return Status::parse_error("shortest_first facet: field 'seconds': missing or not a number");
  }
  const double s = j["seconds"].get<double>();
  if (!std::isfinite(s) || s <= 0) {
    return Status::parse_error("shortest_first facet: field 'seconds': must be finite and above 0, is " + j["seconds"].dump());
  }
  return s;
}

std::vector<FacetCodec> shortest_first_facet_codecs() {
  FacetCodec c;
  c.name = kShortestFirstFacetName;
  c.check = [](const std::string& json) { return shortest_first_facet_from_json(json).status(); };
  return {c};
}

}  // namespace concord::policy
