#include "policy/aker/aker_facet.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace concord::policy {
namespace {

using nlohmann::json;

json points_json(const std::vector<AkerPoint>& points) {
  json out = json::array();
  for (const AkerPoint& p : points) out.push_back({p.x, p.y});
  return out;
}

Status field_error(const std::string& field, const std::string& why) {
  return Status::parse_error("aker facet: field '" + field + "': " + why);
}

Result<double> number(const json& j, const std::string& key, const std::string& where, bool positive) {
  const std::string field = where + key;
  if (!j.contains(key) || !j.at(key).is_number()) return field_error(field, "missing or not a number");
  const double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0 || (positive && v == 0)) {
    return field_error(field, std::string(positive ? "must be above 0" : "must be finite and not negative") + ", is " +
                                  j.at(key).dump());
  }
  return v;
}

Result<std::string> text(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_string() || j.at(key).get<std::string>().empty()) {
    return field_error(where + key, "missing or not a non-empty string");
  }
  return j.at(key).get<std::string>();
}

Result<int64_t> integer(const json& j, const std::string& key, const std::string& where, int64_t min) {
  if (!j.contains(key) || !j.at(key).is_number_integer()) return field_error(where + key, "missing or not an integer");
  const auto v = j.at(key).get<int64_t>();
  if (v < min) return field_error(where + key, "must be at least " + std::to_string(min) + ", is " + std::to_string(v));
  return v;
}

// [[x, y], ...] with x > 0 and y > 0.
Result<std::vector<AkerPoint>> points(const json& j, const std::string& key, const std::string& where) {
  const std::string field = where + key;
  if (!j.contains(key) || !j.at(key).is_array()) return field_error(field, "missing or not an array");
  std::vector<AkerPoint> out;
  for (size_t i = 0; i < j.at(key).size(); ++i) {
    const json& p = j.at(key)[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) {
      return field_error(at, "not a pair of numbers");
    }
    const double x = p[0].get<double>(), y = p[1].get<double>();
    if (!std::isfinite(x) || !std::isfinite(y) || !(x > 0) || !(y > 0)) return field_error(at, "values must be above 0, is " + p.dump());
    out.push_back({x, y});
  }
  return out;
}

}  // namespace

std::string aker_facet_to_json(const AkerFacet& f) {
  json fused = json::array();
  for (const AkerFusedEntry& e : f.fused) {
    fused.push_back({{"partner", e.partner},
                     {"partner_variant", e.partner_variant},
                     {"partner_size", e.partner_size},
                     {"self_parts", e.self_parts},
                     {"partner_parts", e.partner_parts},
                     {"self_seconds", e.self_seconds},
                     {"points", points_json(e.points)}});
  }
  return json{{"class", to_string(f.cls)},
              {"tensor", f.utilisation.tensor},
              {"compute_utilization", f.utilisation.compute},
              {"memory_utilization", f.utilisation.memory},
              {"solo", points_json(f.solo)},
              {"fused", fused}}
      .dump();
}

Result<AkerFacet> aker_facet_from_json(const std::string& text_in) {
  const json j = json::parse(text_in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::parse_error("aker facet: not a JSON object");
  AkerFacet f;
  auto cls = text(j, "class", "");
  if (!cls) return cls.status();
  auto c = aker_class_from_string(*cls);
  if (!c) return field_error("class", "must be tensor, compute, memory or neutral, is \"" + *cls + "\"");
  f.cls = *c;
  if (!j.contains("tensor") || !j.at("tensor").is_boolean()) return field_error("tensor", "missing or not true/false");
  f.utilisation.tensor = j.at("tensor").get<bool>();
  if ((f.cls == AkerClass::tensor) != f.utilisation.tensor) {
    return field_error("class", "\"" + *cls + "\" does not agree with 'tensor' = " + j.at("tensor").dump());
  }
  auto compute = number(j, "compute_utilization", "", false);
  if (!compute) return compute.status();
  auto memory = number(j, "memory_utilization", "", false);
  if (!memory) return memory.status();
  f.utilisation.compute = *compute;
  f.utilisation.memory = *memory;
  auto solo = points(j, "solo", "");
  if (!solo) return solo.status();
  f.solo = std::move(*solo);
  if (!j.contains("fused") || !j.at("fused").is_array()) return field_error("fused", "missing or not an array");
  for (size_t i = 0; i < j.at("fused").size(); ++i) {
    const json& e = j.at("fused")[i];
    const std::string where = "fused[" + std::to_string(i) + "].";
    if (!e.is_object()) return field_error("fused[" + std::to_string(i) + "]", "not an object");
    AkerFusedEntry out;
    auto partner = text(e, "partner", where);
    if (!partner) return partner.status();
    auto variant = text(e, "partner_variant", where);
    if (!variant) return variant.status();
    auto size = integer(e, "partner_size", where, 1);
    if (!size) return size.status();
    auto a = integer(e, "self_parts", where, 1);
    if (!a) return a.status();
    auto b = integer(e, "partner_parts", where, 1);
    if (!b) return b.status();
    auto self = number(e, "self_seconds", where, true);
    if (!self) return self.status();
    auto pts = points(e, "points", where);
    if (!pts) return pts.status();
    out.partner = *partner;
    out.partner_variant = *variant;
    out.partner_size = *size;
    out.self_parts = static_cast<int>(*a);
    out.partner_parts = static_cast<int>(*b);
    out.self_seconds = *self;
    out.points = std::move(*pts);
    f.fused.push_back(std::move(out));
  }
  return f;
}

std::vector<FacetCodec> aker_facet_codecs() {
  FacetCodec c;
  c.name = kAkerFacetName;
  c.check = [](const std::string& json) { return aker_facet_from_json(json).status(); };
  return {c};
}

}  // namespace concord::policy
