#include "policy/raise/raise_facet.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace concord::policy {

std::string raise_facet_to_json(const RaiseVector& metrics) {
  nlohmann::json m = nlohmann::json::object();
  for (size_t i = 0; i < metrics.size(); ++i) m[raise_metric_info()[i].abbr] = metrics[i];
  return nlohmann::json{{"metrics", m}, {"class", to_string(raise_class(metrics))}}.dump();
}

namespace {

Result<nlohmann::json> parse_object(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::parse_error("raise facet: not a JSON object");
  return j;
}

}  // namespace

Result<RaiseVector> raise_facet_from_json(const std::string& json) {
  auto j = parse_object(json);
  if (!j) return j.status();
  if (!j->contains("metrics") || !j->at("metrics").is_object()) {
    return Status::parse_error("raise facet: field 'metrics': missing or not an object");
  }
  const auto& m = j->at("metrics");
  RaiseVector v{};
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = raise_metric_info()[i].abbr;
    if (!m.contains(name) || !m.at(name).is_number()) {
      return Status::parse_error("raise facet: field 'metrics." + name + "': missing or not a number");
    }
    v[i] = m.at(name).get<double>();
    if (!std::isfinite(v[i]) || v[i] < 0 || v[i] > 10) {
      return Status::parse_error("raise facet: field 'metrics." + name + "': must be within 0-10, is " + m.at(name).dump());
    }
  }
  CONCORD_RETURN_IF_ERROR(raise_facet_class(json).status());
  return v;
}

Result<RaiseClass> raise_facet_class(const std::string& json) {
  auto j = parse_object(json);
  if (!j) return j.status();
  if (!j->contains("class") || !j->at("class").is_string()) {
    return Status::parse_error("raise facet: field 'class': missing or not a string");
  }
  auto c = raise_class_from_string(j->at("class").get<std::string>());
  if (!c) return Status::parse_error("raise facet: field 'class': must be COM, MEM or LAT, is " + j->at("class").dump());
  return *c;
}

std::vector<FacetCodec> raise_facet_codecs() {
  FacetCodec c;
  c.name = kRaiseFacetName;
  c.check = [](const std::string& json) { return raise_facet_from_json(json).status(); };
  // Exports of schema v2 and older carried the metrics in each profile ("raise", "raise_class").
  c.legacy_field = "raise";
  c.from_legacy = [](const std::string& profile_json) -> Result<std::string> {
    const auto entry = nlohmann::json::parse(profile_json, nullptr, /*allow_exceptions=*/false);
    if (entry.is_discarded() || !entry.is_object() || !entry.contains("raise")) {
      return Status::parse_error("field 'raise': missing");
    }
    const nlohmann::json old{{"metrics", entry["raise"]}, {"class", entry.value("raise_class", nlohmann::json("LAT"))}};
    auto metrics = raise_facet_from_json(old.dump());
    if (!metrics) return Status(metrics.status().code(), "field 'raise': " + metrics.status().message());
    return raise_facet_to_json(*metrics);
  };
  return {c};
}

}  // namespace concord::policy
