// The spec parser: the document as a whole (one document, bounded nesting, the top-level keys),
// its diagnostics, and the readers of keys, names and numbers every field uses.
#include "workload/parser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "concord/occupancy.h"
#include "concord/suggest.h"
#include "concord/suite.h"

namespace concord::workload_impl {

WorkloadCheck Parser::parse(const std::string& text) {
  WorkloadCheck out;
  out.workload.source = source_;
  try {
    parse_into(text, out.workload);
  } catch (const YAML::Exception& e) {
    // Every yaml-cpp exception type ends here (bad conversions, invalid nodes, recursion depth).
    report_at_line(e.mark.is_null() ? 0 : e.mark.line + 1, "", "bad YAML: " + e.msg);
  } catch (const std::bad_alloc&) {
    report_at_line(0, "", "the spec needs more memory than is available");
  }
  // In the order of the spec's lines; a problem inside a timestamps file sits at the line
  // that names the file.
  std::stable_sort(diags_.begin(), diags_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [line, d] : diags_) out.diagnostics.push_back(std::move(d));
  if (dropped_errors_ + dropped_warnings_ > 0) {
    out.diagnostics.push_back({dropped_errors_ ? SpecDiagnostic::Severity::error : SpecDiagnostic::Severity::warning,
                               StatusCode::parse_error, source_, 0, "",
                               std::to_string(dropped_errors_) + " more errors and " + std::to_string(dropped_warnings_) +
                                   " more warnings, not listed"});
  }
  return out;
}

void Parser::parse_into(const std::string& text, Workload& w) {
  if (const auto [depth, line] = yaml_nesting(text); depth > spec_limits::kNestingDepth) {
    report_at_line(line, "", "nesting deeper than " + std::to_string(spec_limits::kNestingDepth) +
                                 " levels (the spec limit): a workload spec needs a few");
    return;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    report_at_line(e.mark.line + 1, "", "bad YAML: " + e.msg);
    return;
  }
  if (const int line = second_document_line(text)) {
    report_at_line(line, "", "a second YAML document ('---'): a spec is one document");
  }
  if (root.IsNull()) {
    report_at_line(0, "", "the spec is empty: the top level must be a mapping with 'tenants'");
    return;
  }
  if (!root.IsMap()) {
    error(root, "", "the top level must be a mapping with 'tenants'");
    return;
  }
  const auto keys = check_keys(root, "", {"name", "tenants"});
  if (auto n = get(keys, "name")) {
    if (auto name = name_of(*n, "name")) w.name = *name;
  }
  const auto tenants = get(keys, "tenants");
  if (!tenants) {
    error(root, "tenants", "missing");
  } else if (!tenants->IsSequence() || tenants->size() == 0) {
    error(*tenants, "tenants", "must be a non-empty list");
  } else if (static_cast<int64_t>(tenants->size()) > spec_limits::kTenants) {
    error(*tenants, "tenants", "has " + std::to_string(tenants->size()) + " tenants, over the limit of " +
                                   std::to_string(spec_limits::kTenants));
  } else {
    std::map<std::string, int> first_line;
    int64_t launches = 0;
    bool launches_reported = false;
    size_t i = 0;
    for (const YAML::Node& tn : *tenants) {
      const std::string at = "tenants[" + std::to_string(i++) + "]";
      auto t = parse_tenant(tn, at);
      if (!t) continue;
      if (auto [it, fresh] = first_line.emplace(t->name, line_of(tn)); !fresh) {
        error(tn, at + ".name", "duplicate tenant name '" + t->name + "' (first at line " + std::to_string(it->second) + ")");
      }
      const auto tenant_launches = checked_mul(t->launches_per_request(), t->requests);
      const auto all = tenant_launches ? checked_add(launches, *tenant_launches) : std::nullopt;
      if (!launches_reported && (!all || *all > spec_limits::kLaunches)) {
        error(tn, at, "the workload's launches (requests x launches per request, all tenants) pass the limit of " +
                          std::to_string(spec_limits::kLaunches));
        launches_reported = true;
      }
      launches = all.value_or(launches);
      w.tenants.push_back(std::move(*t));
    }
  }
  if (w.name.empty()) w.name = std::filesystem::path(source_).stem().string();
}

// The fields of a mapping by name. Reports keys that are not plain scalars, unknown keys and
// repeated keys (both lines named); a repeated key keeps its first value.
std::map<std::string, YAML::Node> Parser::check_keys(const YAML::Node& map, const std::string& at, const std::set<std::string>& allowed) {
  std::map<std::string, YAML::Node> fields;
  std::map<std::string, int> lines;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {
      error(kv.first, at, "a key must be a plain name, not a list or a mapping");
      continue;
    }
    const std::string key = kv.first.Scalar();
    const std::string path = at.empty() ? key : at + "." + key;
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      error(kv.first, path, "unknown field (expected one of: " + list + ")");
      continue;
    }
    if (auto it = lines.find(key); it != lines.end()) {
      error(kv.first, path, "repeated: given at line " + std::to_string(it->second) + " and again at line " +
                                std::to_string(line_of(kv.first)));
      continue;
    }
    lines[key] = line_of(kv.first);
    fields.emplace(key, kv.second);
  }
  return fields;
}

std::optional<std::string> Parser::name_of(const YAML::Node& n, const std::string& field) {
  auto s = scalar(n, field);
  if (!s) return std::nullopt;
  if (s->empty()) {
    error(n, field, "must not be empty");
    return std::nullopt;
  }
  if (s->size() > spec_limits::kNameBytes) {
    error(n, field, "is longer than " + std::to_string(spec_limits::kNameBytes) + " bytes");
    return std::nullopt;
  }
  for (unsigned char c : *s) {
    if (c < 0x20 || c == 0x7f) {
      error(n, field, "must not hold control characters");
      return std::nullopt;
    }
  }
  return s;
}

std::optional<double> Parser::number(const YAML::Node& n, const std::string& field, double lo, bool lo_open, double hi, const std::string& unit) {
  if (!n.IsScalar()) {
    error(n, field, "must be a number");
    return std::nullopt;
  }
  if (quoted(n)) {
    error(n, field, "must be a number, got the string \"" + shown(n.Scalar()) + "\" (write numbers without quotes)");
    return std::nullopt;
  }
  const auto [v, err] = parse_finite(n.Scalar());
  if (err == NumberError::not_a_number) {
    error(n, field, "must be a number, got '" + shown(n.Scalar()) + "'");
    return std::nullopt;
  }
  if (err == NumberError::not_finite) {
    error(n, field, "must be a finite number, got '" + shown(n.Scalar()) + "'");
    return std::nullopt;
  }
  if (lo_open ? !(v > lo) : !(v >= lo)) {
    error(n, field, std::string("must be ") + (lo_open ? "> " : ">= ") + fmt_number(lo) + unit + ", got " + shown(n.Scalar()));
    return std::nullopt;
  }
  if (v > hi) {
    error(n, field, "must be at most " + fmt_number(hi) + unit + " (the spec limit), got " + shown(n.Scalar()));
    return std::nullopt;
  }
  return v;
}

// A whole number in 1..max.
std::optional<int64_t> Parser::positive_int(const YAML::Node& n, const std::string& field, int64_t max) {
  if (!n.IsScalar()) {
    error(n, field, "must be a positive integer");
    return std::nullopt;
  }
  if (quoted(n)) {
    error(n, field, "must be a positive integer, got the string \"" + shown(n.Scalar()) + "\" (write numbers without quotes)");
    return std::nullopt;
  }
  const auto v = parse_decimal(n.Scalar());
  if (!v) {
    const bool digits = !n.Scalar().empty() &&
                        n.Scalar().find_first_not_of("+-0123456789") == std::string::npos;
    error(n, field, digits ? "is out of range: must be at most " + std::to_string(max) + " (the spec limit), got '" + shown(n.Scalar()) + "'"
                           : "must be a positive integer, got '" + shown(n.Scalar()) + "'");
    return std::nullopt;
  }
  if (*v <= 0) {
    error(n, field, "must be > 0, got " + std::to_string(*v));
    return std::nullopt;
  }
  if (*v > max) {
    error(n, field, "must be at most " + std::to_string(max) + " (the spec limit), got " + std::to_string(*v));
    return std::nullopt;
  }
  return v;
}

}  // namespace concord::workload_impl
