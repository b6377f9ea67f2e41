// The spec parser's fields: a tenant, its steps (kernels that must fit the device), its arrival
// process and the files of arrival times it may name.
#include "workload/parser.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "concord/occupancy.h"
#include "concord/suggest.h"
#include "concord/suite.h"

namespace concord::workload_impl {

std::optional<TenantSpec> Parser::parse_tenant(const YAML::Node& n, const std::string& at) {
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

std::optional<KernelStep> Parser::parse_step(const YAML::Node& n, const std::string& at) {
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
void Parser::check_fits(const KernelSpec& k, const YAML::Node& node, const std::string& at) {
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

std::optional<ArrivalProcess> Parser::parse_arrival(const YAML::Node& n, const std::string& at) {
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
std::vector<Seconds> Parser::read_timestamps(const YAML::Node& node, const std::string& field, const std::string& file) {
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

}  // namespace concord::workload_impl
