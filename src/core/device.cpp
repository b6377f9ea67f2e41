#include "concord/device.h"

#include <algorithm>
#include <bitset>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace concord {
namespace {

// Nominal Hopper layout: SMs 2t and 2t+1 form TPC t; TPCs are dealt to `gpcs` GPCs in order,
// the first GPCs taking one more when the count does not divide.
void fill_nominal_topology(DeviceSpec& d, int gpcs) {
  const int tpcs = (d.sm_count + 1) / 2;
  d.tpc_of_sm.assign(static_cast<size_t>(d.sm_count), 0);
  d.gpc_of_sm.assign(static_cast<size_t>(d.sm_count), 0);
  const int base = tpcs / gpcs;
  const int extra = tpcs % gpcs;
  int tpc = 0;
  for (int g = 0; g < gpcs; ++g) {
    const int n = base + (g < extra ? 1 : 0);
    for (int k = 0; k < n; ++k, ++tpc) {
      for (int sm = 2 * tpc; sm < 2 * tpc + 2 && sm < d.sm_count; ++sm) {
        d.tpc_of_sm[static_cast<size_t>(sm)] = tpc;
        d.gpc_of_sm[static_cast<size_t>(sm)] = g;
      }
    }
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int count_distinct(const std::vector<int>& v) {
  // Ids below kMaxSms (every valid spec's) as bits: estimators ask this on every decision.
  SmSet seen;
  for (int x : v) {
    if (x < 0 || x >= kMaxSms) return static_cast<int>(std::set<int>(v.begin(), v.end()).size());
    seen.add(x);
  }
  return seen.count();
}

}  // namespace

int DeviceSpec::tpc_count() const { return count_distinct(tpc_of_sm); }
int DeviceSpec::gpc_count() const { return count_distinct(gpc_of_sm); }

SmSet DeviceSpec::sms_of_tpc(int tpc) const {
  SmSet s;
  for (int sm = 0; sm < sm_count; ++sm) {
    if (tpc_of_sm[static_cast<size_t>(sm)] == tpc) s.add(sm);
  }
  return s;
}

SmSet DeviceSpec::sms_of_gpc(int gpc) const {
  SmSet s;
  for (int sm = 0; sm < sm_count; ++sm) {
    if (gpc_of_sm[static_cast<size_t>(sm)] == gpc) s.add(sm);
  }
  return s;
}

SmSet DeviceSpec::round_up_to_tpcs(const SmSet& sms) const {
  // On the engine's dispatch path: no allocation; the TPCs hit are found from the set's members.
  SmSet tpc_hit;  // TPC ids as bits
  sms.for_each([&](int sm) {
    if (sm < sm_count) tpc_hit.add(tpc_of_sm[static_cast<size_t>(sm)]);
  });
  SmSet out;
  for (int sm = 0; sm < sm_count; ++sm) {
    if (tpc_hit.contains(tpc_of_sm[static_cast<size_t>(sm)])) out.add(sm);
  }
  return out;
}

bool DeviceSpec::spans_all_gpcs(const SmSet& sms) const {
  // GPC ids as bits, without allocating (policies ask this per decision).
  std::bitset<kMaxSms> all, seen;
  for (int sm = 0; sm < sm_count; ++sm) {
    const int g = gpc_of_sm[static_cast<size_t>(sm)];
    if (g < 0 || g >= kMaxSms) return false;  // validate() refuses such specs
    all.set(static_cast<size_t>(g));
    if (sms.contains(sm)) seen.set(static_cast<size_t>(g));
  }
  return seen == all;
}

Status DeviceSpec::validate() const {
  const std::string who = "device '" + name + "': ";
  if (sm_count <= 0 || sm_count > kMaxSms) {
    return Status::invalid_argument(who + "sm_count must be in 1.." + std::to_string(kMaxSms));
  }
  if (static_cast<int>(tpc_of_sm.size()) != sm_count || static_cast<int>(gpc_of_sm.size()) != sm_count) {
    return Status::invalid_argument(who + "tpc_of_sm and gpc_of_sm must have sm_count entries");
  }
  for (int sm = 0; sm < sm_count; ++sm) {
    const int t = tpc_of_sm[static_cast<size_t>(sm)], g = gpc_of_sm[static_cast<size_t>(sm)];
    if (t < 0 || t >= kMaxSms || g < 0 || g >= kMaxSms) {
      return Status::invalid_argument(who + "SM " + std::to_string(sm) + ": tpc_of_sm and gpc_of_sm ids must be in 0.." +
                                      std::to_string(kMaxSms - 1));
    }
  }
  if (sm.max_threads <= 0 || sm.max_registers <= 0 || sm.max_shared_bytes < 0 || sm.max_blocks <= 0 ||
      sm.max_threads_per_block <= 0 || sm.max_registers_per_thread <= 0 || sm.max_shared_bytes_per_block < 0 ||
      sm.register_sub_partitions <= 0) {
    return Status::invalid_argument(who + "per-SM limits must be positive");
  }
  if (sm.register_sub_partitions > kMaxRegisterSubPartitions || sm.max_registers % sm.register_sub_partitions != 0) {
    return Status::invalid_argument(who + "sm.register_sub_partitions must be in 1.." +
                                    std::to_string(kMaxRegisterSubPartitions) + " and divide sm.max_registers");
  }
  if (dram_bytes_per_s <= 0 || fp32_flops <= 0 || tensor_flops <= 0 || l2_bytes <= 0) {
    return Status::invalid_argument(who + "dram_bytes_per_s, fp32_flops, tensor_flops and l2_bytes must be > 0");
  }
  return Status::ok();
}

namespace {

// Per-SM rates by compute capability (CUDA C++ Programming Guide, arithmetic instruction
// throughput; dense FP16 tensor rates from the architecture whitepapers): FP32 lanes, and FP16
// tensor FLOP per clock. 0: not known.
struct SmRates {
  int fp32_lanes = 0;
  int tensor_flop_per_clock = 0;
};
SmRates sm_rates(int major, int minor) {
  if (major == 7) return {64, 1024};                       // Volta, Turing
  if (major == 8 && minor == 0) return {64, 2048};         // A100
  if (major == 8) return {128, 1024};                      // GA10x, Ada
  if (major == 9) return {128, 4096};                      // Hopper
  if (major == 10 || major == 11) return {128, 8192};      // Blackwell data centre
  if (major == 12) return {128, 2048};                     // Blackwell consumer
  return {};
}

}  // namespace

Result<DeviceSpec> spec_from_attributes(const DeviceAttributes& a) {
  const std::string who = "device '" + a.name + "': ";
  const std::pair<const char*, int> required[] = {
      {"sm_count", a.sm_count},
      {"l2_bytes", a.l2_bytes},
      {"max_threads_per_sm", a.max_threads_per_sm},
      {"max_registers_per_sm", a.max_registers_per_sm},
      {"max_shared_bytes_per_sm", a.max_shared_bytes_per_sm},
      {"max_blocks_per_sm", a.max_blocks_per_sm},
      {"max_threads_per_block", a.max_threads_per_block},
      {"max_shared_bytes_per_block_optin", a.max_shared_bytes_per_block_optin},
      {"clock_khz", a.clock_khz},
      {"memory_clock_khz", a.memory_clock_khz},
      {"memory_bus_bits", a.memory_bus_bits},
  };
  for (const auto& [field, value] : required) {
    if (value <= 0) return Status::invalid_argument(who + "attribute " + field + " is " + std::to_string(value) + " (must be > 0)");
  }
  const SmRates rates = sm_rates(a.cc_major, a.cc_minor);
  if (rates.fp32_lanes == 0) {
    return Status::unsupported(who + "compute capability " + std::to_string(a.cc_major) + "." + std::to_string(a.cc_minor) +
                               " has no known per-SM FP32 and tensor rates (src/core/device.cpp, sm_rates)");
  }
  DeviceSpec d;
  d.name = a.name;
  d.sm_count = a.sm_count;
  d.sm.max_threads = a.max_threads_per_sm;
  d.sm.max_registers = a.max_registers_per_sm;
  d.sm.max_shared_bytes = a.max_shared_bytes_per_sm;
  d.sm.max_blocks = a.max_blocks_per_sm;
  d.sm.max_threads_per_block = a.max_threads_per_block;
  d.sm.max_shared_bytes_per_block = a.max_shared_bytes_per_block_optin;
  d.l2_bytes = a.l2_bytes;
  d.clock_hz = a.clock_khz * 1e3;
  d.memory_clock_hz = a.memory_clock_khz * 1e3;
  d.dram_bytes_per_s = 2.0 * a.memory_clock_khz * 1e3 * (a.memory_bus_bits / 8.0);
  d.fp32_flops = static_cast<double>(a.sm_count) * rates.fp32_lanes * 2.0 * d.clock_hz;
  d.tensor_flops = static_cast<double>(a.sm_count) * rates.tensor_flop_per_clock * d.clock_hz;
  fill_nominal_topology(d, 8);
  CONCORD_RETURN_IF_ERROR(d.validate());
  return d;
}

DeviceSpec h100_sxm_spec() {
  DeviceSpec d;
  d.name = "H100 SXM";
  d.sm_count = 132;
  d.l2_bytes = 50.0 * 1024 * 1024;
  d.dram_bytes_per_s = 3.35e12;
  d.fp32_flops = 66.9e12;
  d.tensor_flops = 989e12;
  d.clock_hz = 1.98e9;
  fill_nominal_topology(d, 8);
  return d;
}

DeviceSpec h200_spec() {
  DeviceSpec d = h100_sxm_spec();
  d.name = "H200";
  d.l2_bytes = 60.0 * 1024 * 1024;  // as measured (docs/hardware.md)
  d.dram_bytes_per_s = 4.8e12;
  return d;
}

Result<DeviceSpec> builtin_device(const std::string& name) {
  const std::string n = lower(name);
  if (n == "h100" || n == "h100-sxm" || n == "h100 sxm") return h100_sxm_spec();
  if (n == "h200") return h200_spec();
  return Status::not_found("no built-in device '" + name + "' (known: h100, h200)");
}

Result<DeviceSpec> load_device_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found(path + ": cannot open device file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::parse_error(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::parse_error(path + ": top level must be an object");
  DeviceSpec d;
  if (j.contains("base")) {
    if (!j["base"].is_string()) return Status::parse_error(path + ": field 'base': must be a string");
    auto base = builtin_device(j["base"].get<std::string>());
    if (!base) return Status::parse_error(path + ": field 'base': " + base.status().message());
    d = *base;
  }
  const int old_sm_count = d.sm_count;
  bool topology_given = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    auto need_number = [&]() -> Status {
      if (!v.is_number()) return Status::parse_error(path + ": field '" + key + "': must be a number");
      if (v.get<double>() <= 0) return Status::parse_error(path + ": field '" + key + "': must be > 0");
      return Status::ok();
    };
    if (key == "base") continue;
    if (key == "name") {
      if (!v.is_string()) return Status::parse_error(path + ": field 'name': must be a string");
      d.name = v.get<std::string>();
    } else if (key == "sm_count") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.sm_count = v.get<int>();
    } else if (key == "l2_bytes") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.l2_bytes = v.get<double>();
    } else if (key == "dram_bytes_per_s") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.dram_bytes_per_s = v.get<double>();
    } else if (key == "fp32_flops") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.fp32_flops = v.get<double>();
    } else if (key == "tensor_flops") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.tensor_flops = v.get<double>();
    } else if (key == "clock_hz") {
      CONCORD_RETURN_IF_ERROR(need_number());
      d.clock_hz = v.get<double>();
    } else if (key == "sm") {
      if (!v.is_object()) return Status::parse_error(path + ": field 'sm': must be an object");
      for (auto s = v.begin(); s != v.end(); ++s) {
        if (!s.value().is_number_integer() || s.value().get<int>() <= 0) {
          return Status::parse_error(path + ": field 'sm." + s.key() + "': must be a positive integer");
        }
        const int x = s.value().get<int>();
        if (s.key() == "max_threads") d.sm.max_threads = x;
        else if (s.key() == "max_registers") d.sm.max_registers = x;
        else if (s.key() == "max_shared_bytes") d.sm.max_shared_bytes = x;
        else if (s.key() == "max_blocks") d.sm.max_blocks = x;
        else if (s.key() == "register_alloc_unit") d.sm.register_alloc_unit = x;
        else if (s.key() == "register_sub_partitions") d.sm.register_sub_partitions = x;
        else if (s.key() == "max_threads_per_block") d.sm.max_threads_per_block = x;
        else if (s.key() == "max_registers_per_thread") d.sm.max_registers_per_thread = x;
        else if (s.key() == "max_shared_bytes_per_block") d.sm.max_shared_bytes_per_block = x;
        else return Status::parse_error(path + ": field 'sm." + s.key() + "': unknown field");
      }
    } else if (key == "tpc_of_sm" || key == "gpc_of_sm") {
      if (!v.is_array()) return Status::parse_error(path + ": field '" + key + "': must be an array");
      std::vector<int> ids;
      for (const auto& e : v) {
        if (!e.is_number_integer() || e.get<int>() < 0) {
          return Status::parse_error(path + ": field '" + key + "': entries must be integers >= 0");
        }
        ids.push_back(e.get<int>());
      }
      (key == "tpc_of_sm" ? d.tpc_of_sm : d.gpc_of_sm) = std::move(ids);
      topology_given = true;
    } else {
      return Status::parse_error(path + ": field '" + key + "': unknown field");
    }
  }
  if (!topology_given && d.sm_count != old_sm_count) fill_nominal_topology(d, 8);
  if (Status s = d.validate(); !s) return Status::parse_error(path + ": " + s.message());
  return d;
}

}  // namespace concord
