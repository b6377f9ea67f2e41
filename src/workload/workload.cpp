// Workload spec parser and checker: YAML in, Workload and every problem out. Each problem names
// file, line, field and reason; the parse goes on after a problem so that one pass finds them all.
#include "concord/workload.h"
#include "concord/suggest.h"

#include <cctype>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "concord/occupancy.h"
#include "concord/suite.h"

namespace concord {

const char* to_string(TenantClass c) { return c == TenantClass::latency_critical ? "LC" : "BE"; }

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

namespace {

// Reads a whole regular file of at most `limit` bytes. Errors say what is wrong with the path,
// never what the file holds (a spec may point anywhere). Opening without blocking and refusing
// anything but a regular file keeps FIFOs and devices such as /dev/zero from hanging the read.
Result<std::string> read_regular_file(const std::filesystem::path& path, int64_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return Status::not_found(why);
    return Status::io_error(why);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::io_error(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Status::invalid_argument("is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(std::string("is not a regular file (") + (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device" : S_ISSOCK(st.st_mode) ? "a socket" : "a special file") + ")");
  }
  const std::string over = "is larger than the limit of " + std::to_string(limit) + " bytes";
  if (st.st_size > limit) return Status::invalid_argument(over);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  // The file may grow while it is read: read at most one byte past the limit.
  while (true) {
    if (got == text.size()) {
      if (static_cast<int64_t>(got) > limit) return Status::invalid_argument(over);
      text.resize(std::min<size_t>(text.size() * 2 + 4096, static_cast<size_t>(limit) + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(got) > limit) return Status::invalid_argument(over);
  text.resize(got);
  return text;
}

// A scalar as the spec wrote it, shortened for messages.
std::string shown(const std::string& s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "...";
}

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Decimal integer, optional leading '+'; nullopt when the text is anything else or out of range.
// (yaml-cpp would read "010" as octal 8 and "0x10" as 16.)
std::optional<int64_t> parse_decimal(const std::string& text) {
  std::string_view s = text;
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

enum class NumberError { none, not_a_number, not_finite };
// A finite decimal number ("1", "-2.5", "3e-3", optional leading '+').
std::pair<double, NumberError> parse_finite(const std::string& text) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const std::string lower = [&] {
    std::string l(s);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  }();
  for (const char* special : {".nan", "nan", ".inf", "inf", "-.inf", "-inf", "infinity", "-infinity"}) {
    if (lower == special) return {0, NumberError::not_finite};
  }
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return {0, NumberError::not_finite};
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return {0, NumberError::not_a_number};
  if (!std::isfinite(v)) return {0, NumberError::not_finite};
  return {v, NumberError::none};
}

// Checked arithmetic on counts: nullopt on overflow of int64.
std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The line (1-based) where a second YAML document in `text` starts, or 0 when there is none.
// Counted on yaml-cpp's events, two documents at most: YAML::LoadAll never returns on some
// inputs (a lone ',' as a document makes yaml-cpp 0.7 yield empty documents forever).
int second_document_line(const std::string& text) {
  // A second document needs a marker ("---" to start one, "..." to end the first); without one
  // there is nothing to look for, and the spec is not scanned twice.
  if (text.find("---") == std::string::npos && text.find("...") == std::string::npos) return 0;
  class FirstMark : public YAML::EventHandler {
   public:
    int line = -1;
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { note(m); }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      note(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      note(m);
    }
    void OnMapEnd() override {}

   private:
    void note(const YAML::Mark& m) {
      if (line < 0 && !m.is_null()) line = m.line;
    }
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstMark first;
  if (!parser.HandleNextDocument(first)) return 0;
  FirstMark second;
  if (!parser.HandleNextDocument(second)) return 0;
  return std::max(second.line, 0) + 1;
}

class Parser {
 public:
  Parser(std::string source, std::filesystem::path base_dir, const DeviceSpec* device)
      : source_(std::move(source)), base_dir_(std::move(base_dir)), device_(device) {}

  WorkloadCheck parse(const std::string& text) {
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

 private:
  // The deepest YAML nesting in `text` and the 1-based line where it is reached: block levels
  // (distinct indentation columns open at a line) plus flow brackets open at a character, outside
  // quotes and comments. A spec needs a few; yaml-cpp gives up past a few hundred with "bad file".
  static std::pair<int, int> nesting(const std::string& text) {
    std::vector<size_t> indents;
    int flow = 0, deepest = 0, deepest_line = 0, line = 1;
    size_t i = 0;
    while (i < text.size()) {
      size_t col = 0;
      while (i + col < text.size() && text[i + col] == ' ') ++col;
      const size_t start = i + col;
      const bool content = start < text.size() && text[start] != '\n' && text[start] != '#';
      if (content && flow == 0) {
        while (!indents.empty() && indents.back() > col) indents.pop_back();
        if (indents.empty() || indents.back() < col) indents.push_back(col);
      }
      char quote = 0;
      for (i = start; i < text.size() && text[i] != '\n'; ++i) {
        const char c = text[i];
        if (quote) {
          if (quote == '"' && c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') ++i;  // an escape
          else if (c == quote) quote = 0;
          continue;
        }
        if (c == '#' && (i == start || text[i - 1] == ' ')) {
          while (i < text.size() && text[i] != '\n') ++i;
          break;
        }
        if (c == '"' || c == '\'') quote = c;
        else if (c == '[' || c == '{') ++flow;
        else if ((c == ']' || c == '}') && flow > 0) --flow;
        const int depth = static_cast<int>(indents.size()) + flow;
        if (depth > deepest) {
          deepest = depth;
          deepest_line = line;
        }
      }
      if (content && static_cast<int>(indents.size()) + flow > deepest) {
        deepest = static_cast<int>(indents.size()) + flow;
        deepest_line = line;
      }
      ++i;  // the newline
      ++line;
    }
    return {deepest, deepest_line};
  }

  void parse_into(const std::string& text, Workload& w) {
    if (const auto [depth, line] = nesting(text); depth > spec_limits::kNestingDepth) {
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
  std::map<std::string, YAML::Node> check_keys(const YAML::Node& map, const std::string& at,
                                               const std::set<std::string>& allowed) {
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

  std::optional<std::string> name_of(const YAML::Node& n, const std::string& field) {
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

  // A finite number in [lo, hi] (`lo_open`: strictly above lo).
  // A quoted scalar ('12', "12") is a string, whatever it spells: numbers are written bare.
  static bool quoted(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "!"; }

  std::optional<double> number(const YAML::Node& n, const std::string& field, double lo, bool lo_open, double hi,
                               const std::string& unit) {
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

  static std::string fmt_number(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

  // A whole number in 1..max.
  std::optional<int64_t> positive_int(const YAML::Node& n, const std::string& field, int64_t max) {
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

  std::optional<TenantSpec> parse_tenant(const YAML::Node& n, const std::string& at) {
    if (!n.IsMap()) {
      error(n, at, "must be a mapping");
      return std::nullopt;
    }
    const size_t errors_before = errors();
    const auto f = check_keys(n, at, {"name", "class", "requests", "arrival", "target_ms", "raise_type", "kernels"});
    TenantSpec t;
    if (auto name = get(f, "name")) {
      if (auto s = name_of(*name, at + ".name")) t.name = *s;
    } else {
      error(n, at + ".name", "missing");
    }
    if (auto cls = get(f, "class")) {
      if (auto s = scalar(*cls, at + ".class")) {
        if (*s == "LC" || *s == "lc") t.cls = TenantClass::latency_critical;
        else if (*s == "BE" || *s == "be") t.cls = TenantClass::best_effort;
        else error(*cls, at + ".class", "must be LC or BE, got '" + shown(*s) + "'");
      }
    }
    const auto requests = get(f, "requests");
    if (requests) {
      if (auto r = positive_int(*requests, at + ".requests", spec_limits::kRequests)) t.requests = static_cast<int>(*r);
    }
    bool arrival_ok = true;
    if (auto a = get(f, "arrival")) {
      auto arrival = parse_arrival(*a, at + ".arrival");
      if (arrival) t.arrival = std::move(*arrival);
      arrival_ok = arrival.has_value();
    }
    if (arrival_ok && t.arrival.kind == ArrivalProcess::Kind::timestamps) {
      if (requests && static_cast<size_t>(t.requests) != t.arrival.timestamps.size()) {
        error(*requests, at + ".requests",
              "is " + std::to_string(t.requests) + " but the arrival timestamps give " +
                  std::to_string(t.arrival.timestamps.size()) + " requests");
      }
      t.requests = static_cast<int>(t.arrival.timestamps.size());
    }
    bool target_given = false;
    if (auto target = get(f, "target_ms")) {
      target_given = true;
      if (auto ms = number(*target, at + ".target_ms", 0, true, spec_limits::kTargetMs, " ms")) t.latency_target = *ms * 1e-3;
    }
    if (auto type = get(f, "raise_type")) {
      if (auto s = scalar(*type, at + ".raise_type")) {
        std::string upper = *s;
        for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (upper == "COM" || upper == "MEM" || upper == "LAT") {
          t.labels["raise_type"] = upper;
        } else {
          error(*type, at + ".raise_type", "must be COM, MEM or LAT, got '" + shown(*s) + "'");
        }
      }
    }
    if (t.cls == TenantClass::latency_critical && !target_given) {
      error(n, at + ".target_ms", "an LC tenant needs a latency target");
    }
    const auto kernels = get(f, "kernels");
    if (!kernels) {
      error(n, at + ".kernels", "missing");
    } else if (!kernels->IsSequence() || kernels->size() == 0) {
      error(*kernels, at + ".kernels", "must be a non-empty list");
    } else if (static_cast<int64_t>(kernels->size()) > spec_limits::kStepsPerTenant) {
      error(*kernels, at + ".kernels", "has " + std::to_string(kernels->size()) + " steps, over the limit of " +
                                           std::to_string(spec_limits::kStepsPerTenant));
    } else {
      int64_t launches = 0;
      size_t i = 0;
      for (const YAML::Node& k : *kernels) {
        auto step = parse_step(k, at + ".kernels[" + std::to_string(i++) + "]");
        if (!step) continue;
        launches += step->count;  // at most kStepsPerTenant x kCount: far inside int64
        t.steps.push_back(std::move(*step));
      }
      if (launches > spec_limits::kLaunchesPerRequest) {
        error(*kernels, at + ".kernels", "a request has " + std::to_string(launches) + " launches (the sum of the counts), over the limit of " +
                                             std::to_string(spec_limits::kLaunchesPerRequest));
      }
    }
    if (errors() != errors_before) return std::nullopt;
    return t;
  }

  std::optional<KernelStep> parse_step(const YAML::Node& n, const std::string& at) {
    if (!n.IsMap()) {
      error(n, at, "must be a mapping with 'kernel'");
      return std::nullopt;
    }
    const size_t errors_before = errors();
    const auto f = check_keys(n, at, {"kernel", "size", "count", "variant", "dims"});
    const auto kernel = get(f, "kernel");
    if (!kernel) {
      error(n, at + ".kernel", "missing");
      return std::nullopt;
    }
    auto name = scalar(*kernel, at + ".kernel");
    if (!name) return std::nullopt;
    const SuiteEntry* entry = nullptr;
    for (const auto& e : suite_catalog()) {
      if (e.name == *name) entry = &e;
    }
    if (!entry) {
      std::vector<std::string> names;
      for (const auto& e : suite_catalog()) names.push_back(e.name);
      error(*kernel, at + ".kernel", "unknown kernel '" + shown(*name) + "'" + did_you_mean(*name, names) + " (see `concord kernels`)");
      return std::nullopt;
    }
    int64_t size = entry->default_size;
    const auto size_node = get(f, "size");
    if (size_node) {
      if (auto s = positive_int(*size_node, at + ".size", spec_limits::kSize)) size = *s;
    }
    std::optional<BlockSizes> dims;
    const auto dims_node = get(f, "dims");
    if (dims_node) {
      // Threads per block of the min, mid and max variants (RAISE Table IV's kernel dimensions).
      const YAML::Node& d = *dims_node;
      if (!d.IsSequence() || d.size() != 3) {
        error(d, at + ".dims", "must be a list of three block sizes [min, mid, max]");
      } else {
        BlockSizes b{};
        bool good = true;
        for (size_t i = 0; i < 3; ++i) {
          // make_suite_kernel states the body's own bounds; this one only keeps the value an int.
          auto t = positive_int(d[i], at + ".dims[" + std::to_string(i) + "]", 1 << 20);
          if (t) b[i] = static_cast<int>(*t);
          good = good && t.has_value();
        }
        if (good && !(b[0] <= b[1] && b[1] <= b[2])) {
          error(d, at + ".dims", "must be ascending: min <= mid <= max");
          good = false;
        }
        if (good) dims = b;
      }
    }
    KernelStep step;
    if (auto c = get(f, "count")) {
      if (auto v = positive_int(*c, at + ".count", spec_limits::kCount)) step.count = static_cast<int>(*v);
    }
    if (errors() != errors_before) return std::nullopt;
    auto spec = make_suite_kernel(*name, size);
    if (!spec) {
      error(size_node ? *size_node : n, at + ".size", spec.status().message());
      return std::nullopt;
    }
    if (dims) {
      spec = make_suite_kernel(*name, size, dims);
      if (!spec) {
        error(*dims_node, at + ".dims", spec.status().message());
        return std::nullopt;
      }
    }
    step.kernel = std::move(*spec);
    const auto variant = get(f, "variant");
    if (variant) {
      auto v = scalar(*variant, at + ".variant");
      if (!v) return std::nullopt;
      auto idx = step.kernel.find_variant(*v);
      if (!idx) {
        error(*variant, at + ".variant", "kernel '" + *name + "' has no variant '" + shown(*v) + "'");
        return std::nullopt;
      }
      step.kernel.default_variant = *idx;
    }
    if (device_) check_fits(step.kernel, variant ? *variant : n, at);
    if (errors() != errors_before) return std::nullopt;
    return step;
  }

  // A block that does not fit on an empty SM can never be resident: the step could never run.
  void check_fits(const KernelSpec& k, const YAML::Node& node, const std::string& at) {
    const DeviceSpec& dev = *device_;
    for (int i = 0; i < k.variant_count(); ++i) {
      const KernelVariant& v = k.variant(i);
      const BlockFootprint fp = footprint_of(dev, v);
      if (max_resident_blocks(dev, fp) > 0) continue;
      std::string why;
      if (fp.threads > dev.sm.max_threads) why += std::to_string(fp.threads) + " threads (an SM holds " + std::to_string(dev.sm.max_threads) + ")";
      if (fp.registers > dev.sm.max_registers) {
        why += std::string(why.empty() ? "" : ", ") + std::to_string(fp.registers) + " registers (" +
               std::to_string(v.threads_per_block) + " threads x " + std::to_string(v.registers_per_thread) +
               ", allocated per warp; an SM holds " + std::to_string(dev.sm.max_registers) + ")";
      }
      if (fp.shared_bytes > dev.sm.max_shared_bytes) {
        why += std::string(why.empty() ? "" : ", ") + std::to_string(fp.shared_bytes) + " bytes of shared memory (an SM holds " +
               std::to_string(dev.sm.max_shared_bytes) + ")";
      }
      if (why.empty()) why = "an SM holds no block (max_blocks " + std::to_string(dev.sm.max_blocks) + ")";
      const std::string what = "kernel '" + k.name + "' variant '" + v.name + "': one block does not fit on an SM of " +
                               (dev.name.empty() ? std::string("the device") : dev.name) + ": " + why;
      if (i == k.default_variant) {
        error(node, at + (node.IsMap() ? ".kernel" : ".variant"), what + "; the step could never run");
      } else if (warned_.insert(k.name + "/" + std::to_string(k.size) + "/" + v.name).second) {
        warning(node, at + ".kernel", what + "; policies that choose variants (raise and its baselines) do not pick it");
      }
    }
  }

  std::optional<ArrivalProcess> parse_arrival(const YAML::Node& n, const std::string& at) {
    ArrivalProcess a;
    if (n.IsScalar()) {
      if (n.Scalar() == "closed") return a;
      error(n, at, "must be 'closed' or a mapping {poisson: RATE} / {timestamps: FILE or list}");
      return std::nullopt;
    }
    if (!n.IsMap()) {
      error(n, at, "must be 'closed' or a mapping");
      return std::nullopt;
    }
    const size_t errors_before = errors();
    const auto f = check_keys(n, at, {"poisson", "timestamps"});
    const auto poisson = get(f, "poisson");
    const auto ts = get(f, "timestamps");
    if (poisson && ts) {
      error(n, at, "give either poisson or timestamps, not both");
      return std::nullopt;
    }
    if (poisson) {
      auto rate = number(*poisson, at + ".poisson", 0, true, spec_limits::kPoissonRate, " requests per second");
      if (!rate || errors() != errors_before) return std::nullopt;
      a.kind = ArrivalProcess::Kind::poisson;
      a.rate_per_s = *rate;
      return a;
    }
    if (!ts) {
      if (errors() == errors_before) error(n, at, "empty arrival mapping");
      return std::nullopt;
    }
    a.kind = ArrivalProcess::Kind::timestamps;
    const std::string field = at + ".timestamps";
    if (ts->IsSequence()) {
      if (static_cast<int64_t>(ts->size()) > spec_limits::kRequests) {
        error(*ts, field, "has " + std::to_string(ts->size()) + " timestamps, over the limit of " + std::to_string(spec_limits::kRequests));
        return std::nullopt;
      }
      size_t i = 0;
      for (const YAML::Node& e : *ts) {
        const std::string f_i = field + "[" + std::to_string(i) + "]";
        auto v = number(e, f_i, 0, false, spec_limits::kTimestampSeconds, " s");
        if (v && !a.timestamps.empty() && *v < a.timestamps.back()) {
          error(e, f_i, "timestamps must be non-decreasing (" + shown(e.Scalar()) + " follows " + fmt_number(a.timestamps.back()) + ")");
        }
        if (v) a.timestamps.push_back(*v);
        ++i;
      }
    } else if (auto file = scalar(*ts, field)) {
      a.timestamps = read_timestamps(*ts, field, *file);
    }
    if (errors() != errors_before) return std::nullopt;
    if (a.timestamps.empty()) {
      error(*ts, field, "no timestamps");
      return std::nullopt;
    }
    return a;
  }

  // A file of arrival times in seconds, one per line; '#' starts a comment. Problems name the
  // file and line but never quote it: a spec may point at any file.
  std::vector<Seconds> read_timestamps(const YAML::Node& node, const std::string& field, const std::string& file) {
    std::filesystem::path p(file);
    if (p.is_relative()) p = base_dir_ / p;
    auto text = read_regular_file(p, spec_limits::kTimestampFileBytes);
    if (!text) {
      error(node, field, "cannot open timestamps file '" + p.string() + "': " + text.status().message());
      return {};
    }
    std::vector<Seconds> out;
    // Lines reported before the file is given up on.
    constexpr int kMaxBadLines = 10;
    int bad = 0;
    int line_no = 0;
    std::string_view rest = *text;
    while (!rest.empty()) {
      ++line_no;
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      const std::string value = trimmed(line);
      if (value.empty()) continue;
      auto bad_line = [&](const std::string& reason) {
        add(SpecDiagnostic::Severity::error, line_of(node), p.string(), line_no, field, reason);
        ++bad;
      };
      const auto [v, err] = parse_finite(value);
      if (err == NumberError::not_a_number) bad_line("not a number (one arrival time in seconds per line)");
      else if (err == NumberError::not_finite) bad_line("not a finite number");
      else if (v < 0 || v > spec_limits::kTimestampSeconds) bad_line("must be in 0.." + fmt_number(spec_limits::kTimestampSeconds) + " s");
      else if (!out.empty() && v < out.back()) bad_line("timestamps must be non-decreasing");
      else if (static_cast<int64_t>(out.size()) == spec_limits::kRequests) {
        bad_line("more than " + std::to_string(spec_limits::kRequests) + " timestamps, the limit");
        break;
      } else {
        out.push_back(v);
      }
      if (bad == kMaxBadLines) {
        add(SpecDiagnostic::Severity::error, line_of(node), p.string(), line_no, field,
            "stopped reading after " + std::to_string(kMaxBadLines) + " bad lines");
        break;
      }
    }
    return out;
  }

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

}  // namespace

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
