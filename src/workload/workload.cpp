// Workload spec parser: YAML in, Workload out; every error names file, line, field and reason.
#include "concord/workload.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

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

namespace {

class Parser {
 public:
  Parser(std::string source, std::filesystem::path base_dir)
      : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  Result<Workload> parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      return Status::parse_error(source_ + ":" + std::to_string(e.mark.line + 1) + ": bad YAML: " + e.msg);
    }
    if (!root.IsMap()) return error(root, "", "the top level must be a mapping with 'tenants'");
    Workload w;
    w.source = source_;
    CONCORD_RETURN_IF_ERROR(only_keys(root, "", {"name", "tenants"}));
    if (root["name"]) {
      auto name = scalar(root["name"], "name");
      if (!name) return name.status();
      w.name = *name;
    }
    const YAML::Node tenants = root["tenants"];
    if (!tenants) return error(root, "tenants", "missing");
    if (!tenants.IsSequence() || tenants.size() == 0) {
      return error(tenants, "tenants", "must be a non-empty list");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tenants.size(); ++i) {
      auto t = parse_tenant(tenants[i], "tenants[" + std::to_string(i) + "]");
      if (!t) return t.status();
      if (!names.insert(t->name).second) {
        return error(tenants[i], "tenants[" + std::to_string(i) + "].name", "duplicate tenant name '" + t->name + "'");
      }
      w.tenants.push_back(std::move(*t));
    }
    if (w.name.empty()) w.name = std::filesystem::path(source_).stem().string();
    return w;
  }

 private:
  Status error(const YAML::Node& node, const std::string& field, const std::string& reason) const {
    std::string where = source_;
    if (node.IsDefined() && node.Mark().line >= 0) where += ":" + std::to_string(node.Mark().line + 1);
    return Status::parse_error(where + ": " + (field.empty() ? "" : "field '" + field + "': ") + reason);
  }

  Status only_keys(const YAML::Node& map, const std::string& at, std::set<std::string> allowed) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>();
      if (!allowed.count(key)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        return error(kv.first, at.empty() ? key : at + "." + key, "unknown field (expected one of: " + list + ")");
      }
    }
    return Status::ok();
  }

  Result<std::string> scalar(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) return error(n, field, "must be a scalar");
    return n.as<std::string>();
  }

  Result<double> number(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) return error(n, field, "must be a number");
    try {
      return n.as<double>();
    } catch (const YAML::Exception&) {
      return error(n, field, "must be a number, got '" + n.as<std::string>() + "'");
    }
  }

  Result<int64_t> positive_int(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) return error(n, field, "must be a positive integer");
    int64_t v = 0;
    try {
      v = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      return error(n, field, "must be a positive integer, got '" + n.as<std::string>() + "'");
    }
    if (v <= 0) return error(n, field, "must be > 0, got " + std::to_string(v));
    return v;
  }

  Result<TenantSpec> parse_tenant(const YAML::Node& n, const std::string& at) {
    if (!n.IsMap()) return error(n, at, "must be a mapping");
    CONCORD_RETURN_IF_ERROR(
        only_keys(n, at, {"name", "class", "requests", "arrival", "target_ms", "raise_type", "kernels"}));
    TenantSpec t;
    if (!n["name"]) return error(n, at + ".name", "missing");
    auto name = scalar(n["name"], at + ".name");
    if (!name) return name.status();
    if (name->empty()) return error(n["name"], at + ".name", "must not be empty");
    t.name = *name;
    if (n["class"]) {
      auto cls = scalar(n["class"], at + ".class");
      if (!cls) return cls.status();
      if (*cls == "LC" || *cls == "lc") t.cls = TenantClass::latency_critical;
      else if (*cls == "BE" || *cls == "be") t.cls = TenantClass::best_effort;
      else return error(n["class"], at + ".class", "must be LC or BE, got '" + *cls + "'");
    }
    if (n["requests"]) {
      auto r = positive_int(n["requests"], at + ".requests");
      if (!r) return r.status();
      t.requests = static_cast<int>(*r);
    }
    if (n["arrival"]) {
      auto a = parse_arrival(n["arrival"], at + ".arrival");
      if (!a) return a.status();
      t.arrival = std::move(*a);
    }
    if (t.arrival.kind == ArrivalProcess::Kind::timestamps) {
      if (n["requests"] && static_cast<size_t>(t.requests) != t.arrival.timestamps.size()) {
        return error(n["requests"], at + ".requests",
                     "is " + std::to_string(t.requests) + " but the arrival timestamps give " +
                         std::to_string(t.arrival.timestamps.size()) + " requests");
      }
      t.requests = static_cast<int>(t.arrival.timestamps.size());
    }
    if (n["target_ms"]) {
      auto target = number(n["target_ms"], at + ".target_ms");
      if (!target) return target.status();
      if (*target <= 0) return error(n["target_ms"], at + ".target_ms", "must be > 0");
      t.latency_target = *target * 1e-3;
    }
    if (n["raise_type"]) {
      auto type = scalar(n["raise_type"], at + ".raise_type");
      if (!type) return type.status();
      t.raise_type = raise_class_from_string(*type);
      if (!t.raise_type) return error(n["raise_type"], at + ".raise_type", "must be COM, MEM or LAT, got '" + *type + "'");
    }
    if (t.cls == TenantClass::latency_critical && t.latency_target <= 0) {
      return error(n, at + ".target_ms", "an LC tenant needs a latency target");
    }
    const YAML::Node kernels = n["kernels"];
    if (!kernels) return error(n, at + ".kernels", "missing");
    if (!kernels.IsSequence() || kernels.size() == 0) return error(kernels, at + ".kernels", "must be a non-empty list");
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto step = parse_step(kernels[i], at + ".kernels[" + std::to_string(i) + "]");
      if (!step) return step.status();
      t.steps.push_back(std::move(*step));
    }
    return t;
  }

  Result<KernelStep> parse_step(const YAML::Node& n, const std::string& at) {
    if (!n.IsMap()) return error(n, at, "must be a mapping with 'kernel'");
    CONCORD_RETURN_IF_ERROR(only_keys(n, at, {"kernel", "size", "count", "variant", "dims"}));
    if (!n["kernel"]) return error(n, at + ".kernel", "missing");
    auto name = scalar(n["kernel"], at + ".kernel");
    if (!name) return name.status();
    const SuiteEntry* entry = nullptr;
    for (const auto& e : suite_catalog()) {
      if (e.name == *name) entry = &e;
    }
    if (!entry) return error(n["kernel"], at + ".kernel", "unknown kernel '" + *name + "' (see `concord kernels`)");
    int64_t size = entry->default_size;
    if (n["size"]) {
      auto s = positive_int(n["size"], at + ".size");
      if (!s) return s.status();
      size = *s;
    }
    std::optional<BlockSizes> dims;
    if (const YAML::Node d = n["dims"]) {
      // Threads per block of the min, mid and max variants (RAISE Table IV's kernel dimensions).
      if (!d.IsSequence() || d.size() != 3) return error(d, at + ".dims", "must be a list of three block sizes [min, mid, max]");
      BlockSizes b{};
      for (size_t i = 0; i < 3; ++i) {
        auto t = positive_int(d[i], at + ".dims[" + std::to_string(i) + "]");
        if (!t) return t.status();
        b[i] = static_cast<int>(std::min<int64_t>(*t, 1 << 20));
      }
      if (!(b[0] <= b[1] && b[1] <= b[2])) return error(d, at + ".dims", "must be ascending: min <= mid <= max");
      dims = b;
    }
    auto spec = make_suite_kernel(*name, size);
    if (!spec) return error(n["size"] ? n["size"] : n, at + ".size", spec.status().message());
    if (dims) {
      spec = make_suite_kernel(*name, size, dims);
      if (!spec) return error(n["dims"], at + ".dims", spec.status().message());
    }
    KernelStep step{std::move(*spec), 1};
    if (n["count"]) {
      auto c = positive_int(n["count"], at + ".count");
      if (!c) return c.status();
      step.count = static_cast<int>(*c);
    }
    if (n["variant"]) {
      auto v = scalar(n["variant"], at + ".variant");
      if (!v) return v.status();
      auto idx = step.kernel.find_variant(*v);
      if (!idx) return error(n["variant"], at + ".variant", "kernel '" + *name + "' has no variant '" + *v + "'");
      step.kernel.default_variant = *idx;
    }
    return step;
  }

  Result<ArrivalProcess> parse_arrival(const YAML::Node& n, const std::string& at) {
    ArrivalProcess a;
    if (n.IsScalar()) {
      const std::string kind = n.as<std::string>();
      if (kind == "closed") return a;
      return error(n, at, "must be 'closed' or a mapping {poisson: RATE} / {timestamps: FILE or list}");
    }
    if (!n.IsMap()) return error(n, at, "must be 'closed' or a mapping");
    CONCORD_RETURN_IF_ERROR(only_keys(n, at, {"poisson", "timestamps"}));
    if (n["poisson"] && n["timestamps"]) return error(n, at, "give either poisson or timestamps, not both");
    if (n["poisson"]) {
      auto rate = number(n["poisson"], at + ".poisson");
      if (!rate) return rate.status();
      if (*rate <= 0) return error(n["poisson"], at + ".poisson", "rate must be > 0 requests per second");
      a.kind = ArrivalProcess::Kind::poisson;
      a.rate_per_s = *rate;
      return a;
    }
    const YAML::Node ts = n["timestamps"];
    if (!ts) return error(n, at, "empty arrival mapping");
    a.kind = ArrivalProcess::Kind::timestamps;
    if (ts.IsSequence()) {
      for (size_t i = 0; i < ts.size(); ++i) {
        auto v = number(ts[i], at + ".timestamps[" + std::to_string(i) + "]");
        if (!v) return v.status();
        a.timestamps.push_back(*v);
      }
    } else {
      auto file = scalar(ts, at + ".timestamps");
      if (!file) return file.status();
      auto loaded = read_timestamps(ts, at + ".timestamps", *file);
      if (!loaded) return loaded.status();
      a.timestamps = std::move(*loaded);
    }
    if (a.timestamps.empty()) return error(ts, at + ".timestamps", "no timestamps");
    for (size_t i = 0; i < a.timestamps.size(); ++i) {
      if (a.timestamps[i] < 0 || (i > 0 && a.timestamps[i] < a.timestamps[i - 1])) {
        return error(ts, at + ".timestamps", "timestamps must be >= 0 and non-decreasing (entry " + std::to_string(i) + ")");
      }
    }
    return a;
  }

  // A file of arrival times in seconds, one per line; '#' starts a comment.
  Result<std::vector<Seconds>> read_timestamps(const YAML::Node& node, const std::string& field,
                                               const std::string& file) const {
    std::filesystem::path p(file);
    if (p.is_relative()) p = base_dir_ / p;
    std::ifstream in(p);
    if (!in) return error(node, field, "cannot open timestamps file '" + p.string() + "'");
    std::vector<Seconds> out;
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      std::istringstream ls(line);
      double v = 0;
      if (!(ls >> v)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        return Status::parse_error(p.string() + ":" + std::to_string(line_no) + ": not a number: '" + line + "'");
      }
      out.push_back(v);
    }
    return out;
  }

  std::string source_;
  std::filesystem::path base_dir_;
};

}  // namespace

Result<Workload> parse_workload(const std::string& yaml_text, const std::string& source_name) {
  return Parser(source_name, std::filesystem::current_path()).parse(yaml_text);
}

Result<Workload> load_workload_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found(path + ": cannot open workload spec");
  std::stringstream buf;
  buf << in.rdbuf();
  return Parser(path, std::filesystem::path(path).parent_path()).parse(buf.str());
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
