#include "channel_raw.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>

namespace concord::channel {

using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A malformed field: its path and what is wrong. Thrown inside the reader, turned into a
// parse_error Status at its boundary.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw FieldError(path + ": " + what); }

std::string type_name(const json& v) { return v.type_name(); }

const json& member(const json& obj, const std::string& path, const char* key) {
  if (!obj.is_object()) fail(path, "expected an object, got " + type_name(obj));
  if (!obj.contains(key)) fail(path.empty() ? key : path + "." + key, "missing");
  return obj.at(key);
}

std::string join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

int64_t read_int(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) {
  const json& v = member(obj, path, key);
  const std::string p = join(path, key);
  if (!v.is_number_integer()) fail(p, "expected an integer, got " + type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(p, "out of range");
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail(p, std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

uint64_t read_uint(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    fail(join(path, key), "expected a non-negative integer, got " + type_name(v));
  }
  return v.get<uint64_t>();
}

double read_number(const json& obj, const std::string& path, const char* key, bool nullable = false) {
  const json& v = member(obj, path, key);
  const std::string p = join(path, key);
  if (v.is_null() && nullable) return kNaN;
  if (!v.is_number()) fail(p, std::string("expected a number") + (nullable ? " or null" : "") + ", got " + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) fail(p, "expected a finite non-negative number");
  return x;
}

bool read_bool(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_boolean()) fail(join(path, key), "expected true or false, got " + type_name(v));
  return v.get<bool>();
}

std::string read_string(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_string()) fail(join(path, key), "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

const json& read_array(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_array()) fail(join(path, key), "expected an array, got " + type_name(v));
  return v;
}

// Non-negative finite numbers (or null, read as NaN, where `nullable`), `expected` of them when
// it is not negative; `shape` says what that count is made of.
std::vector<double> read_numbers(const json& obj, const std::string& path, const char* key, int64_t expected,
                                 const std::string& shape, bool nullable) {
  const json& a = read_array(obj, path, key);
  const std::string p = join(path, key);
  if (expected >= 0 && static_cast<int64_t>(a.size()) != expected) {
    fail(p, "expected " + shape + " = " + std::to_string(expected) + " numbers, got " + std::to_string(a.size()));
  }
  std::vector<double> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const json& v = a[i];
    if (v.is_null() && nullable) {
      out.push_back(kNaN);
      continue;
    }
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      fail(p + "[" + std::to_string(i) + "]",
           std::string("expected a finite non-negative number") + (nullable ? " or null" : "") + ", got " + v.dump());
    }
    out.push_back(v.get<double>());
  }
  return out;
}

// Chunk offsets within a page: integers in [0, chunks), distinct where `distinct`.
std::vector<int> read_offsets(const json& obj, const std::string& path, const char* key, int64_t chunks, bool distinct) {
  const json& a = read_array(obj, path, key);
  const std::string p = join(path, key);
  std::vector<int> out;
  std::set<int> seen;
  for (size_t i = 0; i < a.size(); ++i) {
    const json& v = a[i];
    const std::string pi = p + "[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) fail(pi, "expected an integer, got " + type_name(v));
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x >= chunks) fail(pi, std::to_string(x) + " is outside [0, " + std::to_string(chunks) + ")");
    if (distinct && !seen.insert(static_cast<int>(x)).second) fail(pi, std::to_string(x) + " appears twice");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

// A chunk size: a power of two from 512 bytes up to the page.
int read_granularity(const json& obj, const std::string& path, int64_t page_bytes) {
  const int64_t g = read_int(obj, path, "granularity", 512, page_bytes);
  if ((g & (g - 1)) != 0) fail(join(path, "granularity"), std::to_string(g) + " is not a power of two");
  return static_cast<int>(g);
}

json nullable(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json numbers(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(nullable(x));
  return a;
}

ProbeConfig read_config(const json& j) {
  const std::string p = "config";
  const json& c = member(j, "", "config");
  ProbeConfig cfg;
  cfg.mode = read_string(c, p, "mode");
  cfg.seed = read_uint(c, p, "seed");
  cfg.page_bytes = read_int(c, p, "page_bytes", 4096, int64_t{1} << 40);
  if ((cfg.page_bytes & (cfg.page_bytes - 1)) != 0) fail("config.page_bytes", "not a power of two");
  cfg.buffer_bytes = read_int(c, p, "buffer_bytes", cfg.page_bytes, std::numeric_limits<int64_t>::max());
  cfg.victim_sms = static_cast<int>(read_int(c, p, "victim_sms", 1, 4096));
  cfg.aggressor_sms = static_cast<int>(read_int(c, p, "aggressor_sms", 1, 4096));
  cfg.victim_warps_per_sm = static_cast<int>(read_int(c, p, "victim_warps_per_sm", 1, 64));
  cfg.aggressor_warps_per_sm = static_cast<int>(read_int(c, p, "aggressor_warps_per_sm", 1, 64));
  cfg.run_us = read_number(c, p, "run_us");
  return cfg;
}

Calibration read_calibration(const json& j) {
  const std::string p = "calibration";
  const json& c = member(j, "", "calibration");
  Calibration cal;
  cal.l2_hit_cycles = read_numbers(c, p, "l2_hit_cycles", -1, "", false);
  cal.dram_cycles = read_numbers(c, p, "dram_cycles", -1, "", false);
  cal.after_discard_cycles = read_numbers(c, p, "after_discard_cycles", -1, "", false);
  cal.stream_gbps = read_number(c, p, "stream_gbps", true);
  cal.class_gbps = read_number(c, p, "class_gbps", true);
  cal.class_discard_gbps = read_number(c, p, "class_discard_gbps", true);
  cal.sm_clock_mhz_start = read_number(c, p, "sm_clock_mhz_start", true);
  cal.sm_clock_mhz_end = read_number(c, p, "sm_clock_mhz_end", true);
  return cal;
}

ConditionsExperiment read_conditions(const json& c, const std::string& p, int64_t page_bytes) {
  ConditionsExperiment e;
  e.granularity = read_granularity(c, p, page_bytes);
  const int64_t chunks = page_bytes / e.granularity;
  e.offsets_per_set = static_cast<int>(read_int(c, p, "offsets_per_set", 1, chunks));
  e.discard = read_bool(c, p, "discard");
  const json& reps = read_array(c, p, "reps");
  for (size_t r = 0; r < reps.size(); ++r) {
    const std::string pr = p + ".reps[" + std::to_string(r) + "]";
    ConditionRep rep;
    rep.victim_offsets = read_offsets(reps[r], pr, "victim_offsets", chunks, true);
    if (static_cast<int>(rep.victim_offsets.size()) != e.offsets_per_set) {
      fail(pr + ".victim_offsets", "expected offsets_per_set = " + std::to_string(e.offsets_per_set) + " offsets, got " +
                                       std::to_string(rep.victim_offsets.size()));
    }
    rep.alone = read_number(reps[r], pr, "alone", true);
    rep.alone_again = read_number(reps[r], pr, "alone_again", true);
    rep.equal = read_number(reps[r], pr, "equal", true);
    rep.disjoint = read_number(reps[r], pr, "disjoint", true);
    rep.random = read_number(reps[r], pr, "random", true);
    e.reps.push_back(std::move(rep));
  }
  return e;
}

InterferenceMap read_map(const json& m, const std::string& p, const ProbeConfig& cfg) {
  InterferenceMap map;
  map.name = read_string(m, p, "name");
  map.kind = read_string(m, p, "kind");
  if (map.kind != "cross_page" && map.kind != "same_page") {
    fail(p + ".kind", "'" + map.kind + "' is neither cross_page nor same_page");
  }
  map.granularity = read_granularity(m, p, cfg.page_bytes);
  const int64_t chunks = cfg.page_bytes / map.granularity;
  map.discard = read_bool(m, p, "discard");
  if (map.kind == "same_page") map.page = read_int(m, p, "page", 0, cfg.buffer_bytes / cfg.page_bytes - 1);
  map.offsets = read_offsets(m, p, "offsets", chunks, true);
  if (map.offsets.size() < 2) fail(p + ".offsets", "a map needs two classes or more");
  map.reps = static_cast<int>(read_int(m, p, "reps", 1, 1000));
  const int64_t k = map.classes();
  map.alone = read_numbers(m, p, "alone", map.reps * k,
                           std::to_string(map.reps) + " reps x " + std::to_string(k) + " classes", true);
  map.shared = read_numbers(m, p, "shared", map.reps * k * k,
                            std::to_string(map.reps) + " x " + std::to_string(k) + " x " + std::to_string(k), true);
  return map;
}

LatencyProbe read_latency(const json& l, const ProbeConfig& cfg) {
  const std::string p = "latency";
  LatencyProbe lat;
  lat.granularity = read_granularity(l, p, cfg.page_bytes);
  const int64_t chunks = cfg.page_bytes / lat.granularity;
  const int64_t pages = cfg.buffer_bytes / cfg.page_bytes;
  const json& bp = read_array(l, p, "base_pages");
  for (size_t i = 0; i < bp.size(); ++i) {
    const std::string pi = p + ".base_pages[" + std::to_string(i) + "]";
    if (!bp[i].is_number_integer()) fail(pi, "expected an integer, got " + type_name(bp[i]));
    const int64_t x = bp[i].get<int64_t>();
    if (x < 0 || x >= pages) fail(pi, std::to_string(x) + " is outside [0, " + std::to_string(pages) + ")");
    lat.base_pages.push_back(x);
  }
  lat.base_offsets = read_offsets(l, p, "base_offsets", chunks, false);
  if (lat.base_offsets.size() != lat.base_pages.size()) {
    fail(p + ".base_offsets", "expected one per base page (" + std::to_string(lat.base_pages.size()) + "), got " +
                                  std::to_string(lat.base_offsets.size()));
  }
  if (lat.base_pages.empty()) fail(p + ".base_pages", "no bases");
  lat.deltas = read_offsets(l, p, "deltas", chunks, true);
  for (size_t i = 0; i < lat.deltas.size(); ++i) {
    if (lat.deltas[i] == 0) fail(p + ".deltas[" + std::to_string(i) + "]", "a delta of 0 is the base itself");
  }
  if (lat.deltas.empty()) fail(p + ".deltas", "no deltas");
  lat.reps = static_cast<int>(read_int(l, p, "reps", 1, 1000));
  const int64_t b = static_cast<int64_t>(lat.base_pages.size()), d = static_cast<int64_t>(lat.deltas.size());
  lat.pair_cycles = read_numbers(l, p, "pair_cycles", b * d * lat.reps,
                                 std::to_string(b) + " bases x " + std::to_string(d) + " deltas x " +
                                     std::to_string(lat.reps) + " reps",
                                 false);
  lat.single_cycles = read_numbers(l, p, "single_cycles", b * lat.reps,
                                   std::to_string(b) + " bases x " + std::to_string(lat.reps) + " reps", false);
  return lat;
}

}  // namespace

json raw_to_json(const RawProbe& raw) {
  json j;
  j["format"] = kRawFormat;
  j["version"] = kRawVersion;
  j["provenance"] = raw.provenance.is_null() ? json::object() : raw.provenance;
  const auto& c = raw.config;
  j["config"] = {{"mode", c.mode},
                 {"seed", c.seed},
                 {"buffer_bytes", c.buffer_bytes},
                 {"page_bytes", c.page_bytes},
                 {"victim_sms", c.victim_sms},
                 {"aggressor_sms", c.aggressor_sms},
                 {"victim_warps_per_sm", c.victim_warps_per_sm},
                 {"aggressor_warps_per_sm", c.aggressor_warps_per_sm},
                 {"run_us", c.run_us}};
  const auto& cal = raw.calibration;
  j["calibration"] = {{"l2_hit_cycles", cal.l2_hit_cycles},
                      {"dram_cycles", cal.dram_cycles},
                      {"after_discard_cycles", cal.after_discard_cycles},
                      {"stream_gbps", nullable(cal.stream_gbps)},
                      {"class_gbps", nullable(cal.class_gbps)},
                      {"class_discard_gbps", nullable(cal.class_discard_gbps)},
                      {"sm_clock_mhz_start", nullable(cal.sm_clock_mhz_start)},
                      {"sm_clock_mhz_end", nullable(cal.sm_clock_mhz_end)}};
  j["conditions"] = json::array();
  for (const auto& e : raw.conditions) {
    json reps = json::array();
    for (const auto& r : e.reps) {
      reps.push_back({{"victim_offsets", r.victim_offsets},
                      {"alone", nullable(r.alone)},
                      {"alone_again", nullable(r.alone_again)},
                      {"equal", nullable(r.equal)},
                      {"disjoint", nullable(r.disjoint)},
                      {"random", nullable(r.random)}});
    }
    j["conditions"].push_back(
        {{"granularity", e.granularity}, {"offsets_per_set", e.offsets_per_set}, {"discard", e.discard}, {"reps", reps}});
  }
  j["maps"] = json::array();
  for (const auto& m : raw.maps) {
    json o = {{"name", m.name},
              {"kind", m.kind},
              {"granularity", m.granularity},
              {"discard", m.discard},
              {"offsets", m.offsets},
              {"reps", m.reps},
              {"alone", numbers(m.alone)},
              {"shared", numbers(m.shared)}};
    if (m.kind == "same_page") o["page"] = m.page;
    j["maps"].push_back(std::move(o));
  }
  if (raw.latency) {
    const auto& l = *raw.latency;
    j["latency"] = {{"granularity", l.granularity},
                    {"base_pages", l.base_pages},
                    {"base_offsets", l.base_offsets},
                    {"deltas", l.deltas},
                    {"reps", l.reps},
                    {"pair_cycles", l.pair_cycles},
                    {"single_cycles", l.single_cycles}};
  } else {
    j["latency"] = nullptr;
  }
  return j;
}

Result<RawProbe> raw_from_json(const json& j) {
  RawProbe raw;
  try {
    if (!j.is_object()) fail("raw probe JSON", "expected an object, got " + type_name(j));
    const std::string format = read_string(j, "", "format");
    if (format != kRawFormat) fail("format", "'" + format + "' is not " + kRawFormat);
    const int64_t version = read_int(j, "", "version", 0, 1 << 20);
    if (version != kRawVersion) {
      fail("version", std::to_string(version) + " is not the version this analysis reads (" + std::to_string(kRawVersion) + ")");
    }
    raw.provenance = member(j, "", "provenance");
    if (!raw.provenance.is_object()) fail("provenance", "expected an object, got " + type_name(raw.provenance));
    raw.config = read_config(j);
    raw.calibration = read_calibration(j);
    const json& conditions = read_array(j, "", "conditions");
    for (size_t i = 0; i < conditions.size(); ++i) {
      raw.conditions.push_back(read_conditions(conditions[i], "conditions[" + std::to_string(i) + "]", raw.config.page_bytes));
    }
    const json& maps = read_array(j, "", "maps");
    for (size_t i = 0; i < maps.size(); ++i) {
      raw.maps.push_back(read_map(maps[i], "maps[" + std::to_string(i) + "]", raw.config));
    }
    const json& latency = member(j, "", "latency");
    if (!latency.is_null()) raw.latency = read_latency(latency, raw.config);
  } catch (const FieldError& e) {
    return Status::parse_error(e.what());
  } catch (const json::exception& e) {
    return Status::parse_error(e.what());
  }
  return raw;
}

Result<RawProbe> read_raw_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::io_error(path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    return Status::parse_error(path + ": not JSON: " + e.what());
  }
  auto raw = raw_from_json(j);
  if (!raw) return Status::parse_error(path + ": " + raw.status().message());
  return raw;
}

}  // namespace concord::channel
