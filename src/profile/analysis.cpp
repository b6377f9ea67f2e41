#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "concord/profile.h"

namespace concord {

std::string ProfileKey::to_string() const {
  return gpu + "/" + driver + "/" + kernel + "/" + variant + "/" + std::to_string(size);
}

const char* to_string(AkerClass c) {
  switch (c) {
    case AkerClass::tensor_core: return "tensor-core";
    case AkerClass::compute_prefer: return "compute-prefer";
    case AkerClass::memory_prefer: return "memory-prefer";
    case AkerClass::neutral: return "neutral";
  }
  return "?";
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

AkerClass aker_class(ComputeUnit unit, double compute_utilization, double memory_utilization) {
  if (unit == ComputeUnit::tensor) return AkerClass::tensor_core;
  if (memory_utilization > 0.5) return AkerClass::memory_prefer;
  if (compute_utilization > 0.5) return AkerClass::compute_prefer;
  return AkerClass::neutral;
}

std::vector<size_t> critical_kernels(const std::vector<double>& seconds, double sigma) {
  std::vector<size_t> idx(seconds.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  const size_t keep = std::min(idx.size(), static_cast<size_t>(std::ceil(std::clamp(sigma, 0.0, 1.0) * idx.size())));
  idx.resize(keep);
  return idx;
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
  j["aker_class"] = to_string(p.aker_class);
  j["profile_seconds"] = p.profile_seconds;
  if (p.raise) {
    nlohmann::json r;
    for (int i = 0; i < kRaiseMetrics; ++i) r[raise_metric_info()[static_cast<size_t>(i)].abbr] = (*p.raise)[static_cast<size_t>(i)];
    j["raise"] = r;
    j["raise_class"] = to_string(p.raise_class);
  }
  return j.dump();
}

Result<KernelProfile> profile_from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    KernelProfile p;
    const auto& k = j.at("key");
    p.key = {k.at("gpu").get<std::string>(), k.at("driver").get<std::string>(), k.at("kernel").get<std::string>(),
             k.at("variant").get<std::string>(), k.at("size").get<int64_t>()};
    p.elastic = j.at("elastic").get<bool>();
    p.logical_blocks = j.at("logical_blocks").get<int64_t>();
    p.flops_per_block = j.at("flops_per_block").get<double>();
    p.bytes_per_block = j.at("bytes_per_block").get<double>();
    const auto& r = j.at("resources");
    p.threads_per_block = r.at("threads_per_block").get<int>();
    p.registers_per_thread = r.at("registers_per_thread").get<int>();
    p.shared_bytes_per_block = r.at("shared_bytes_per_block").get<int>();
    p.blocks_per_sm = r.at("blocks_per_sm").get<int>();
    for (const auto& pt : j.at("sm_curve")) p.sm_curve.push_back({pt.at(0).get<int>(), pt.at(1).get<double>()});
    p.cache_seconds = j.at("cache_seconds").get<std::array<double, 4>>();
    if (j.contains("cache_pressure_seconds")) p.cache_pressure_seconds = j.at("cache_pressure_seconds").get<std::array<double, 4>>();
    p.tlp_seconds = j.at("tlp_seconds").get<std::vector<double>>();
    p.linear_intercept = j.at("linear").at("intercept").get<double>();
    p.linear_slope = j.at("linear").at("slope").get<double>();
    p.linear_fit_error = j.at("linear").at("fit_error").get<double>();
    p.demand_sms = j.at("demand_sms").get<int>();
    p.demand = j.at("demand").get<double>();
    p.compute_utilization = j.at("compute_utilization").get<double>();
    p.memory_utilization = j.at("memory_utilization").get<double>();
    const std::string cls = j.at("aker_class").get<std::string>();
    for (AkerClass c : {AkerClass::tensor_core, AkerClass::compute_prefer, AkerClass::memory_prefer, AkerClass::neutral}) {
      if (cls == to_string(c)) p.aker_class = c;
    }
    p.profile_seconds = j.at("profile_seconds").get<double>();
    if (j.contains("raise")) {  // written since RAISE metrics were added; older payloads lack it
      RaiseVector v{};
      for (int i = 0; i < kRaiseMetrics; ++i) v[static_cast<size_t>(i)] = j.at("raise").at(raise_metric_info()[static_cast<size_t>(i)].abbr).get<double>();
      p.raise = v;
      const auto cls = raise_class_from_string(j.at("raise_class").get<std::string>());
      if (!cls) return Status::parse_error("profile JSON: raise_class must be COM, MEM or LAT");
      p.raise_class = *cls;
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Status::parse_error(std::string("profile JSON: ") + e.what());
  }
}

}  // namespace concord
