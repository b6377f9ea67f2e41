#include "intercept/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "concord/memory_quota.h"

namespace concord::intercept {
namespace {

Status bad(const char* var, const std::string& value, const std::string& want) {
  return Status::invalid_argument(std::string(var) + "='" + value + "': " + want);
}

}  // namespace

std::string sanitize_name(const std::string& raw) {
  std::string out;
  for (char c : raw) {
    if (out.size() == ipc::limits::kNameBytes) break;
    if (c >= 0x20 && c < 0x7f) out += c;
  }
  return out.empty() ? "tenant" : out;
}

Result<InterceptConfig> parse_config(const std::function<const char*(const char*)>& lookup,
                                     const std::string& default_name) {
  InterceptConfig config;
  auto get = [&](const char* var) -> std::string {
    const char* v = lookup(var);
    return v ? std::string(v) : std::string();
  };
  if (const std::string v = get("CONCORD_DISABLE"); !v.empty()) {
    if (v != "0" && v != "1") return bad("CONCORD_DISABLE", v, "must be 0 or 1");
    config.disabled = v == "1";
  }
  if (const std::string v = get("CONCORD_SOCKET"); !v.empty()) config.socket_path = v;

  const std::string cls = get("CONCORD_CLASS");
  if (cls.empty() || cls == "be") {
    config.tenant.cls = TenantClass::best_effort;
  } else if (cls == "lc") {
    config.tenant.cls = TenantClass::latency_critical;
  } else {
    return bad("CONCORD_CLASS", cls, "must be lc or be");
  }
  if (const std::string v = get("CONCORD_LC_REFUSED"); !v.empty()) {
    if (v != "be" && v != "pass-through") return bad("CONCORD_LC_REFUSED", v, "must be be or pass-through");
    if (config.tenant.cls != TenantClass::latency_critical) return bad("CONCORD_LC_REFUSED", v, "is for lc tenants only (CONCORD_CLASS=lc)");
    config.tenant.on_lc_refused = v == "be" ? ipc::LcRefusal::best_effort : ipc::LcRefusal::refuse;
  } else if (config.tenant.cls == TenantClass::latency_critical) {
    config.tenant.on_lc_refused = ipc::LcRefusal::best_effort;
  }
  const std::string target = get("CONCORD_TARGET_MS");
  if (config.tenant.cls == TenantClass::latency_critical) {
    if (target.empty()) return Status::invalid_argument("CONCORD_CLASS=lc needs CONCORD_TARGET_MS (the request latency target, ms)");
    char* end = nullptr;
    errno = 0;
    const double ms = std::strtod(target.c_str(), &end);
    const double max_ms = static_cast<double>(ipc::limits::kMaxLatencyTargetNs) / 1e6;
    if (errno != 0 || end == target.c_str() || *end != '\0' || !std::isfinite(ms) || ms <= 0 || ms > max_ms) {
      return bad("CONCORD_TARGET_MS", target, "must be a number of milliseconds in (0, " + std::to_string(max_ms) + "]");
    }
    config.tenant.latency_target_ns = static_cast<uint64_t>(std::llround(ms * 1e6));
    if (config.tenant.latency_target_ns == 0) return bad("CONCORD_TARGET_MS", target, "is below one nanosecond");
  } else if (!target.empty()) {
    return bad("CONCORD_TARGET_MS", target, "is for lc tenants only (CONCORD_CLASS=lc)");
  }
  // GPU memory: an LC tenant's reservation, a BE tenant's own limit (the daemon's books decide).
  for (const auto& [var, lc_only] : {std::pair{"CONCORD_MEMORY_RESERVE", true}, std::pair{"CONCORD_MEMORY_LIMIT", false}}) {
    const std::string v = get(var);
    if (v.empty()) continue;
    const bool is_lc = config.tenant.cls == TenantClass::latency_critical;
    if (lc_only && !is_lc) return bad(var, v, "is for lc tenants only (CONCORD_CLASS=lc; a BE tenant's own limit is CONCORD_MEMORY_LIMIT)");
    if (!lc_only && is_lc) return bad(var, v, "is for be tenants only (an LC tenant reserves its memory: CONCORD_MEMORY_RESERVE)");
    Result<uint64_t> bytes = parse_bytes(v);
    if (!bytes.is_ok()) return bad(var, v, bytes.status().message());
    if (*bytes == 0) return bad(var, v, "is 0 (leave it unset to ask for none)");
    if (*bytes > ipc::limits::kMaxMemoryBytes) return bad(var, v, "is over " + format_bytes(ipc::limits::kMaxMemoryBytes));
    config.tenant.memory_bytes = *bytes;
  }
  if (const std::string v = get("CONCORD_WEIGHT"); !v.empty()) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long w = std::strtoull(v.c_str(), &end, 10);
    if (errno != 0 || end == v.c_str() || *end != '\0' || v[0] == '-' || w < 1 || w > ipc::limits::kMaxWeight) {
      return bad("CONCORD_WEIGHT", v, "must be an integer in [1, " + std::to_string(ipc::limits::kMaxWeight) + "]");
    }
    config.tenant.weight = static_cast<uint32_t>(w);
  }
  if (const std::string v = get("CONCORD_NAME"); !v.empty()) {
    if (v.size() > ipc::limits::kNameBytes) {
      return bad("CONCORD_NAME", v, "is longer than " + std::to_string(ipc::limits::kNameBytes) + " bytes");
    }
    for (char c : v) {
      if (c < 0x20 || c >= 0x7f) return bad("CONCORD_NAME", v, "must be printable ASCII");
    }
    config.tenant.name = v;
  } else {
    config.tenant.name = sanitize_name(default_name);
  }
  config.stats_path = get("CONCORD_INTERCEPT_STATS");
  if (const std::string v = get("CONCORD_INTERCEPT_LOG"); !v.empty()) {
    if (v != "0" && v != "1") return bad("CONCORD_INTERCEPT_LOG", v, "must be 0 or 1");
    config.log = v == "1";
  }
  if (const std::string v = get("CONCORD_GREEN_CONTEXTS"); !v.empty()) {
    if (v != "0" && v != "1") return bad("CONCORD_GREEN_CONTEXTS", v, "must be 0 or 1");
    config.green_contexts = v == "1";
  }
  if (const std::string v = get("CONCORD_ROOM"); !v.empty()) {
    if (v != "0" && v != "1") return bad("CONCORD_ROOM", v, "must be 0 or 1");
    config.room = v == "1";
  }
  if (const std::string v = get("CONCORD_RECONNECT"); !v.empty()) {
    if (v != "0" && v != "1") return bad("CONCORD_RECONNECT", v, "must be 0 or 1");
    config.reconnect = v == "1";
  }
  for (auto [name, field] : {std::pair{"CONCORD_POLL_US", &config.poll_us}, std::pair{"CONCORD_BE_POLL_US", &config.be_poll_us}}) {
    const std::string v = get(name);
    if (v.empty()) continue;
    char* end = nullptr;
    errno = 0;
    const unsigned long long us = std::strtoull(v.c_str(), &end, 10);
    if (errno != 0 || end == v.c_str() || *end != '\0' || v[0] == '-' || us < 1 || us > 100'000) {
      return bad(name, v, "must be an integer number of microseconds in [1, 100000]");
    }
    *field = static_cast<uint32_t>(us);
  }
  if (const std::string v = get("CONCORD_MARKER_EVERY"); !v.empty()) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (errno != 0 || end == v.c_str() || *end != '\0' || v[0] == '-' || n < 1 || n > 65536) {
      return bad("CONCORD_MARKER_EVERY", v, "must be an integer number of launches in [1, 65536]");
    }
    config.marker_every = static_cast<uint32_t>(n);
  }
  return config;
}

}  // namespace concord::intercept
