#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "concord/profile.h"

namespace concord {

std::string ProfileKey::to_string() const {
  return gpu + "/" + driver + "/" + kernel + "/" + variant + "/" + std::to_string(size);
}

const char* to_string(ProfileField f) {
  switch (f) {
    case ProfileField::sm_curve: return "sm_curve";
    case ProfileField::cache: return "cache";
    case ProfileField::cache_pressure: return "cache_pressure";
    case ProfileField::tlp: return "tlp";
    case ProfileField::linear: return "linear";
  }
  return "?";
}

std::string ProfileFields::to_string() const {
  std::string out;
  for (ProfileField f : kAllProfileFields) {
    if (contains(f)) out += (out.empty() ? "" : ", ") + std::string(concord::to_string(f));
  }
  return out.empty() ? "none" : out;
}

ProfileFields measured_fields(const KernelProfile& p) {
  ProfileFields out;
  auto any_nonzero = [](const std::array<double, 4>& a) {
    return std::any_of(a.begin(), a.end(), [](double v) { return v != 0; });
  };
  if (!p.sm_curve.empty()) out = out | ProfileFields{ProfileField::sm_curve};
  if (any_nonzero(p.cache_seconds)) out = out | ProfileFields{ProfileField::cache};
  if (any_nonzero(p.cache_pressure_seconds)) out = out | ProfileFields{ProfileField::cache_pressure};
  if (!p.tlp_seconds.empty()) out = out | ProfileFields{ProfileField::tlp};
  if (p.linear_slope != 0 || p.linear_intercept != 0) out = out | ProfileFields{ProfileField::linear};
  return out;
}

namespace {

Status bad_field(const std::string& field, const std::string& reason) {
  return Status::invalid_argument("field '" + field + "': " + reason);
}

std::string number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// Finite and >= 0 (or > 0 when `positive`).
Status check_time(const std::string& field, double v, bool positive) {
  if (!std::isfinite(v)) return bad_field(field, "not a finite number");
  if (v < 0 || (positive && v == 0)) return bad_field(field, (positive ? "must be > 0, is " : "must be >= 0, is ") + number(v));
  return Status::ok();
}

}  // namespace

Status validate_profile(const KernelProfile& p) {
  if (p.key.kernel.empty()) return bad_field("key.kernel", "empty");
  if (p.key.variant.empty()) return bad_field("key.variant", "empty");
  if (p.key.size <= 0) return bad_field("key.size", "must be > 0, is " + std::to_string(p.key.size));
  if (p.logical_blocks < 0) return bad_field("logical_blocks", "must be >= 0");
  CONCORD_RETURN_IF_ERROR(check_time("flops_per_block", p.flops_per_block, false));
  CONCORD_RETURN_IF_ERROR(check_time("bytes_per_block", p.bytes_per_block, false));
  if (p.threads_per_block < 0 || p.registers_per_thread < 0 || p.shared_bytes_per_block < 0 || p.blocks_per_sm < 0) {
    return bad_field("resources", "counts must be >= 0");
  }
  for (size_t i = 0; i < p.sm_curve.size(); ++i) {
    const std::string f = "sm_curve[" + std::to_string(i) + "]";
    if (p.sm_curve[i].sms <= 0) return bad_field(f, "SM count must be > 0, is " + std::to_string(p.sm_curve[i].sms));
    if (i > 0 && p.sm_curve[i].sms <= p.sm_curve[i - 1].sms) {
      return bad_field(f, std::string(p.sm_curve[i].sms == p.sm_curve[i - 1].sms ? "duplicate" : "unsorted") + " SM count " +
                              std::to_string(p.sm_curve[i].sms) + " after " + std::to_string(p.sm_curve[i - 1].sms) +
                              " (SM counts must be strictly ascending)");
    }
    CONCORD_RETURN_IF_ERROR(check_time(f + " seconds", p.sm_curve[i].seconds, true));
  }
  for (size_t i = 0; i < 4; ++i) {
    CONCORD_RETURN_IF_ERROR(check_time("cache_seconds[" + std::to_string(i) + "]", p.cache_seconds[i], false));
    CONCORD_RETURN_IF_ERROR(check_time("cache_pressure_seconds[" + std::to_string(i) + "]", p.cache_pressure_seconds[i], false));
  }
  for (size_t i = 0; i < p.tlp_seconds.size(); ++i) {
    CONCORD_RETURN_IF_ERROR(check_time("tlp_seconds[" + std::to_string(i) + "]", p.tlp_seconds[i], true));
  }
  if (!std::isfinite(p.linear_intercept)) return bad_field("linear.intercept", "not a finite number");
  if (!std::isfinite(p.linear_slope)) return bad_field("linear.slope", "not a finite number");
  CONCORD_RETURN_IF_ERROR(check_time("linear.fit_error", p.linear_fit_error, false));
  if (p.demand_sms < 0) return bad_field("demand_sms", "must be >= 0");
  if (!std::isfinite(p.demand) || p.demand < 0 || p.demand > 1) return bad_field("demand", "must be within [0, 1], is " + number(p.demand));
  CONCORD_RETURN_IF_ERROR(check_time("compute_utilization", p.compute_utilization, false));
  CONCORD_RETURN_IF_ERROR(check_time("memory_utilization", p.memory_utilization, false));
  CONCORD_RETURN_IF_ERROR(check_time("profile_seconds", p.profile_seconds, false));
  return Status::ok();
}

std::vector<int> plan_sm_sweep(int sm_count, int step, bool full) {
  std::set<int> counts;
  step = std::max(1, step);
  if (full) {
    for (int n = step; n < sm_count; n += step) counts.insert(n);
  } else {
    for (int n = step; n < sm_count; n *= 2) counts.insert(n);
  }
  counts.insert(sm_count);
  return {counts.begin(), counts.end()};
}

namespace {

size_t knee_index(const std::vector<SmCurvePoint>& curve, double tolerance) {
  const double all = curve.back().seconds;
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].seconds <= all * (1.0 + tolerance)) return i;
  }
  return curve.size() - 1;
}

}  // namespace

std::vector<int> refine_near_knee(const std::vector<SmCurvePoint>& curve, int step, double tolerance, int extra) {
  if (curve.size() < 2) return {};
  const size_t k = knee_index(curve, tolerance);
  if (k == 0) return {};
  const int lo = curve[k - 1].sms, hi = curve[k].sms;
  std::vector<int> out;
  const int gaps = (hi - lo) / std::max(1, step);
  if (gaps <= 1) return out;
  // Evenly spaced points strictly between lo and hi, on multiples of step.
  const int n = std::min(extra, gaps - 1);
  for (int i = 1; i <= n; ++i) {
    int sms = lo + static_cast<int>(std::lround(static_cast<double>(hi - lo) * i / (n + 1) / step)) * step;
    if (sms > lo && sms < hi && (out.empty() || out.back() != sms)) out.push_back(sms);
  }
  return out;
}

int demand_sms(const std::vector<SmCurvePoint>& curve, double tolerance) {
  if (curve.empty()) return 0;
  return curve[knee_index(curve, tolerance)].sms;
}

Result<LinearFit> fit_linear(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return Status::invalid_argument("linear fit: needs two or more points");
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double den = n * sxx - sx * sx;
  if (std::abs(den) < 1e-300) return Status::invalid_argument("linear fit: all x are equal");
  LinearFit f;
  f.slope = (n * sxy - sx * sy) / den;
  f.intercept = (sy - f.slope * sx) / n;
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double fit = f.intercept + f.slope * x[i];
    err += y[i] != 0 ? std::abs(fit - y[i]) / std::abs(y[i]) : std::abs(fit);
  }
  f.mean_relative_error = err / n;
  return f;
}

std::string profile_to_json(const KernelProfile& p) {
  nlohmann::json j;
  j["key"] = {{"gpu", p.key.gpu}, {"driver", p.key.driver}, {"kernel", p.key.kernel}, {"variant", p.key.variant},
              {"size", p.key.size}};
  j["elastic"] = p.elastic;
  j["logical_blocks"] = p.logical_blocks;
  j["flops_per_block"] = p.flops_per_block;
  j["bytes_per_block"] = p.bytes_per_block;
  j["resources"] = {{"threads_per_block", p.threads_per_block}, {"registers_per_thread", p.registers_per_thread},
                    {"shared_bytes_per_block", p.shared_bytes_per_block}, {"blocks_per_sm", p.blocks_per_sm}};
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& pt : p.sm_curve) curve.push_back({pt.sms, pt.seconds});
  j["sm_curve"] = curve;
  j["cache_seconds"] = p.cache_seconds;
  j["cache_pressure_seconds"] = p.cache_pressure_seconds;
  j["tlp_seconds"] = p.tlp_seconds;
  j["linear"] = {{"intercept", p.linear_intercept}, {"slope", p.linear_slope}, {"fit_error", p.linear_fit_error}};
  j["demand_sms"] = p.demand_sms;
  j["demand"] = p.demand;
  j["compute_utilization"] = p.compute_utilization;
  j["memory_utilization"] = p.memory_utilization;
  j["profile_seconds"] = p.profile_seconds;
  return j.dump();
}

namespace {

// Reads j[name] into `out` when present; a value of the wrong type is an error naming the field.
// Integers must be JSON integers within T's range (a float such as 1e30 converted to int is
// undefined behaviour), and numbers finite.
template <typename T>
void read_field(const nlohmann::json& j, const char* name, T& out, const std::string& prefix = "") {
  if (!j.contains(name)) return;
  const auto& v = j.at(name);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number_integer()) throw std::invalid_argument("field '" + prefix + name + "': not an integer");
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                          : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
    if (!fits) throw std::invalid_argument("field '" + prefix + name + "': out of range");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      throw std::invalid_argument("field '" + prefix + name + "': not a finite number");
    }
  }
  try {
    out = v.get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("field '" + prefix + name + "': " + e.what());
  }
}

// "profile JSON (kernel variant size): " once the key is known.
std::string where(const KernelProfile& p) {
  if (p.key.kernel.empty()) return "profile JSON: ";
  return "profile JSON (" + p.key.kernel + " " + p.key.variant + " " + std::to_string(p.key.size) + "): ";
}

}  // namespace

Result<KernelProfile> profile_from_json(const std::string& text) {
  KernelProfile p;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) return Status::parse_error("profile JSON: not an object");
    if (!j.contains("key") || !j.at("key").is_object()) return Status::parse_error("profile JSON: field 'key': missing or not an object");
    const auto& k = j.at("key");
    for (const char* f : {"gpu", "driver", "kernel", "variant", "size"}) {
      if (!k.contains(f)) return Status::parse_error(std::string("profile JSON: field 'key.") + f + "': missing");
    }
    read_field(k, "gpu", p.key.gpu, "key.");
    read_field(k, "driver", p.key.driver, "key.");
    read_field(k, "kernel", p.key.kernel, "key.");
    read_field(k, "variant", p.key.variant, "key.");
    read_field(k, "size", p.key.size, "key.");
    read_field(j, "elastic", p.elastic);
    read_field(j, "logical_blocks", p.logical_blocks);
    read_field(j, "flops_per_block", p.flops_per_block);
    read_field(j, "bytes_per_block", p.bytes_per_block);
    if (j.contains("resources")) {
      const auto& r = j.at("resources");
      if (!r.is_object()) return Status::parse_error("profile JSON: field 'resources': not an object");
      read_field(r, "threads_per_block", p.threads_per_block, "resources.");
      read_field(r, "registers_per_thread", p.registers_per_thread, "resources.");
      read_field(r, "shared_bytes_per_block", p.shared_bytes_per_block, "resources.");
      read_field(r, "blocks_per_sm", p.blocks_per_sm, "resources.");
    }
    if (j.contains("sm_curve")) {
      const auto& c = j.at("sm_curve");
      if (!c.is_array()) return Status::parse_error("profile JSON: field 'sm_curve': not a list");
      for (size_t i = 0; i < c.size(); ++i) {
        const auto& pt = c[i];
        if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number_integer() || !pt[1].is_number() ||
            pt[0].get<int64_t>() < 0 || pt[0].get<int64_t>() > std::numeric_limits<int>::max()) {
          return Status::parse_error("profile JSON: field 'sm_curve[" + std::to_string(i) + "]': expected [SM count, seconds]");
        }
        p.sm_curve.push_back({pt[0].get<int>(), pt[1].get<double>()});
      }
    }
    read_field(j, "cache_seconds", p.cache_seconds);
    read_field(j, "cache_pressure_seconds", p.cache_pressure_seconds);
    read_field(j, "tlp_seconds", p.tlp_seconds);
    if (j.contains("linear")) {
      const auto& l = j.at("linear");
      if (!l.is_object()) return Status::parse_error("profile JSON: field 'linear': not an object");
      read_field(l, "intercept", p.linear_intercept, "linear.");
      read_field(l, "slope", p.linear_slope, "linear.");
      read_field(l, "fit_error", p.linear_fit_error, "linear.");
    }
    read_field(j, "demand_sms", p.demand_sms);
    read_field(j, "demand", p.demand);
    read_field(j, "compute_utilization", p.compute_utilization);
    read_field(j, "memory_utilization", p.memory_utilization);
    read_field(j, "profile_seconds", p.profile_seconds);
  } catch (const nlohmann::json::exception& e) {
    return Status::parse_error(where(p) + e.what());
  } catch (const std::invalid_argument& e) {
    return Status::parse_error(where(p) + e.what());
  }
  if (Status s = validate_profile(p); !s) return Status::parse_error(where(p) + s.message());
  return p;
}

}  // namespace concord
