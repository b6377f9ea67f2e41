// Workload spec parser and checker: YAML in, Workload and every problem out. Each problem names
// file, line, field and reason; the parse goes on after a problem so that one pass finds them all.
#include "concord/workload.h"

#include <algorithm>
#include <filesystem>

#include "workload/parser.h"

namespace concord {

const char* to_string(ArrivalProcess::Kind k) {
  switch (k) {
    case ArrivalProcess::Kind::closed_loop: return "closed";
    case ArrivalProcess::Kind::poisson: return "poisson";
    case ArrivalProcess::Kind::timestamps: return "timestamps";
  }
  return "?";
}

int64_t TenantSpec::launches_per_request() const {
  int64_t n = 0;
  for (const auto& s : steps) n += s.count;
  return n;
}

std::string SpecDiagnostic::to_string() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  s += ": ";
  if (severity == Severity::warning) s += "warning: ";
  if (!field.empty()) s += "field '" + field + "': ";
  return s + reason;
}

bool WorkloadCheck::ok() const { return error_count() == 0; }

size_t WorkloadCheck::error_count() const {
  return static_cast<size_t>(std::count_if(diagnostics.begin(), diagnostics.end(), [](const SpecDiagnostic& d) {
    return d.severity == SpecDiagnostic::Severity::error;
  }));
}

Status WorkloadCheck::status() const {
  // The message lists this many errors, then says how many more there are.
  constexpr size_t kListed = 50;
  std::string message;
  StatusCode code = StatusCode::ok;
  size_t errors = 0;
  for (const SpecDiagnostic& d : diagnostics) {
    if (d.severity != SpecDiagnostic::Severity::error) continue;
    if (errors == 0) code = d.code;
    if (errors < kListed) message += (errors ? "\n" : "") + d.to_string();
    ++errors;
  }
  if (errors == 0) return Status::ok();
  if (errors > kListed) message += "\n... and " + std::to_string(errors - kListed) + " more errors";
  return {code, message};
}

using workload_impl::Parser;
using workload_impl::read_regular_file;

WorkloadCheck check_workload(const std::string& yaml_text, const std::string& source_name, const DeviceSpec* device) {
  Parser parser(source_name, std::filesystem::current_path(), device);
  if (static_cast<int64_t>(yaml_text.size()) > spec_limits::kSpecBytes) {
    WorkloadCheck out;
    out.workload.source = source_name;
    out.diagnostics.push_back({SpecDiagnostic::Severity::error, StatusCode::parse_error, source_name, 0, "",
                               "the spec is larger than the limit of " + std::to_string(spec_limits::kSpecBytes) + " bytes"});
    return out;
  }
  return parser.parse(yaml_text);
}

WorkloadCheck check_workload_file(const std::string& path, const DeviceSpec* device) {
  auto text = read_regular_file(path, spec_limits::kSpecBytes);
  if (!text) {
    WorkloadCheck out;
    out.workload.source = path;
    const std::string reason = text.status().code() == StatusCode::not_found
                                   ? "cannot open workload spec: " + text.status().message()
                                   : "cannot read workload spec: it " + text.status().message();
    out.diagnostics.push_back({SpecDiagnostic::Severity::error,
                               text.status().code() == StatusCode::invalid_argument ? StatusCode::parse_error
                                                                                    : text.status().code(),
                               path, 0, "", reason});
    return out;
  }
  return Parser(path, std::filesystem::path(path).parent_path(), device).parse(*text);
}

Result<Workload> parse_workload(const std::string& yaml_text, const std::string& source_name) {
  WorkloadCheck c = check_workload(yaml_text, source_name);
  if (!c.ok()) return c.status();
  return std::move(c.workload);
}

Result<Workload> load_workload_file(const std::string& path) {
  WorkloadCheck c = check_workload_file(path);
  if (!c.ok()) return c.status();
  return std::move(c.workload);
}

std::string tenant_fingerprint(const TenantSpec& t) {
  std::ostringstream o;
  o << to_string(t.cls) << "|req=" << t.requests << "|arr=" << to_string(t.arrival.kind) << ":" << t.arrival.rate_per_s;
  for (Seconds s : t.arrival.timestamps) o << "," << s;
  for (const auto& s : t.steps) {
    o << "|" << s.kernel.name << ":" << s.kernel.size << ":" << s.kernel.default_variant << "x" << s.count;
    for (const auto& v : s.kernel.variants) o << "/" << v.threads_per_block;  // dims change alone-times
    for (const auto& pt : s.kernel.sm_curve) o << "@" << pt.sms << "=" << pt.seconds;  // measured curves change alone-times
  }
  return o.str();
}

}  // namespace concord
