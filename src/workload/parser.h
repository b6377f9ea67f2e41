// The workload spec parser's insides, shared by src/workload/*.cpp (never included elsewhere):
// text and number helpers (workload_text.cpp) and the Parser, which reads a spec into a Workload
// and every problem into diagnostics (parser.cpp: the document, keys and numbers;
// parser_fields.cpp: tenants, steps, arrivals and timestamp files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "concord/workload.h"

namespace concord::workload_impl {

// Reads a whole regular file of at most `limit` bytes; errors say what is wrong with the path,
// never what the file holds.
Result<std::string> read_regular_file(const std::filesystem::path& path, int64_t limit);
// A scalar as the spec wrote it, shortened for messages.
std::string shown(const std::string& s);
std::string trimmed(std::string_view s);
// A decimal integer ("12", "+3", "-4"), or nothing.
std::optional<int64_t> parse_decimal(const std::string& text);
enum class NumberError { none, not_a_number, not_finite };
// A finite decimal number ("1", "-2.5", "3e-3", optional leading '+').
std::pair<double, NumberError> parse_finite(const std::string& text);
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// The line (1-based) where a second YAML document in `text` starts, or 0 when there is none.
int second_document_line(const std::string& text);
// The deepest YAML nesting in `text` and the 1-based line where it is reached.
std::pair<int, int> yaml_nesting(const std::string& text);

class Parser {
 public:
  Parser(std::string source, std::filesystem::path base_dir, const DeviceSpec* device)
      : source_(std::move(source)), base_dir_(std::move(base_dir)), device_(device) {}

  WorkloadCheck parse(const std::string& text);

 private:
  void parse_into(const std::string& text, Workload& w);

  int line_of(const YAML::Node& n) const {
    if (!n.IsDefined()) return 0;
    const YAML::Mark m = n.Mark();
    return m.is_null() ? 0 : m.line + 1;
  }

  // `spec_line`: where the problem sorts among the spec's (its own line, or for a problem in a
  // timestamps file the line that names the file).
  void add(SpecDiagnostic::Severity sev, int spec_line, const std::string& file, int line, const std::string& field,
           const std::string& reason) {
    const bool is_error = sev == SpecDiagnostic::Severity::error;
    if (is_error) ++error_count_;
    if (diags_.size() == kMaxDiagnostics) {
      ++(is_error ? dropped_errors_ : dropped_warnings_);
      return;
    }
    diags_.push_back({spec_line, {sev, StatusCode::parse_error, file, line, field, reason}});
  }
  void report_at_line(int line, const std::string& field, const std::string& reason) {
    add(SpecDiagnostic::Severity::error, line, source_, line, field, reason);
  }
  void error(const YAML::Node& node, const std::string& field, const std::string& reason) {
    report_at_line(line_of(node), field, reason);
  }
  void warning(const YAML::Node& node, const std::string& field, const std::string& reason) {
    add(SpecDiagnostic::Severity::warning, line_of(node), source_, line_of(node), field, reason);
  }
  size_t errors() const { return error_count_; }

  // The fields of a mapping by name. Reports keys that are not plain scalars, unknown keys and
  // repeated keys (both lines named); a repeated key keeps its first value.
  std::map<std::string, YAML::Node> check_keys(const YAML::Node& map, const std::string& at, const std::set<std::string>& allowed);

  static std::optional<YAML::Node> get(const std::map<std::string, YAML::Node>& fields, const std::string& key) {
    auto it = fields.find(key);
    if (it == fields.end()) return std::nullopt;
    return it->second;
  }

  std::optional<std::string> scalar(const YAML::Node& n, const std::string& field) {
    if (!n.IsScalar()) {
      error(n, field, "must be a scalar");
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<std::string> name_of(const YAML::Node& n, const std::string& field);

  // A quoted scalar ('12', "12") is a string, whatever it spells: numbers are written bare.
  static bool quoted(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "!"; }

  // A finite number in [lo, hi] (`lo_open`: strictly above lo).
  std::optional<double> number(const YAML::Node& n, const std::string& field, double lo, bool lo_open, double hi, const std::string& unit);

  static std::string fmt_number(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

  // A whole number in 1..max.
  std::optional<int64_t> positive_int(const YAML::Node& n, const std::string& field, int64_t max);

  std::optional<TenantSpec> parse_tenant(const YAML::Node& n, const std::string& at);

  std::optional<KernelStep> parse_step(const YAML::Node& n, const std::string& at);

  // A block that does not fit on an empty SM can never be resident: the step could never run.
  void check_fits(const KernelSpec& k, const YAML::Node& node, const std::string& at);

  std::optional<ArrivalProcess> parse_arrival(const YAML::Node& n, const std::string& at);

  // A file of arrival times in seconds, one per line; '#' starts a comment. Problems name the
  // file and line but never quote it: a spec may point at any file.
  std::vector<Seconds> read_timestamps(const YAML::Node& node, const std::string& field, const std::string& file);

  std::string source_;
  std::filesystem::path base_dir_;
  const DeviceSpec* device_;
  // Enough to fix a spec by; the count of the rest is reported.
  static constexpr size_t kMaxDiagnostics = 1000;
  std::vector<std::pair<int, SpecDiagnostic>> diags_;
  size_t error_count_ = 0;
  size_t dropped_errors_ = 0;
  size_t dropped_warnings_ = 0;
  // Variants already warned about ("kernel/size/variant"): one warning each, however many steps.
  std::set<std::string> warned_;
};

}  // namespace concord::workload_impl
