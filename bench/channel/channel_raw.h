// The VRAM channel probe's raw timings (docs/channel_probe.md): what concord_channel_probe
// measures on the GPU and concord_channel_analyze reads. One C++ form and one JSON form, written
// and read here, so the probe and the analysis cannot drift apart. A run that could not be
// measured (its aggressor never came up, its window was not covered) is NaN here and null in JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "concord/status.h"

namespace concord::channel {

inline constexpr const char* kRawFormat = "concord-channel-probe";
inline constexpr int kRawVersion = 1;

struct ProbeConfig {
  std::string mode;              // quick, full or smoke
  uint64_t seed = 0;
  int64_t buffer_bytes = 0;      // the probed buffer, 2 MiB aligned
  int64_t page_bytes = 0;        // 2 MiB: the GPU page of large allocations
  int victim_sms = 0;            // SMs [0, victim_sms) run the victim
  int aggressor_sms = 0;         // the next aggressor_sms SMs run the aggressor
  int victim_warps_per_sm = 0;
  int aggressor_warps_per_sm = 0;
  double run_us = 0;             // the victim's measuring window per run
};

// Latency of single loads in SM cycles, and victim-alone throughput (GB/s) of three access kinds.
struct Calibration {
  std::vector<double> l2_hit_cycles;        // a line read again at once
  std::vector<double> dram_cycles;          // a line read after the L2 was flushed
  std::vector<double> after_discard_cycles; // a line read, discarded from the L2, read again
  double stream_gbps = 0;            // all chunks of many pages (DRAM-bound)
  double class_gbps = 0;             // one chunk offset over the victim's pages (fits in L2)
  double class_discard_gbps = 0;     // the same, each chunk discarded from the L2 after its read
  double sm_clock_mhz_start = 0;     // SM clock measured (clock64 against %globaltimer)
  double sm_clock_mhz_end = 0;
};

// Victim throughput (GB/s) with its chunk offsets V: alone (twice, for the run-to-run noise), and
// beside an aggressor reading V in other pages (equal), offsets disjoint from V, or random ones.
struct ConditionRep {
  std::vector<int> victim_offsets;
  double alone = 0, alone_again = 0, equal = 0, disjoint = 0, random = 0;
};
struct ConditionsExperiment {
  int granularity = 0;      // chunk bytes
  int offsets_per_set = 0;
  bool discard = false;
  std::vector<ConditionRep> reps;
};

// Victim throughput (GB/s) for every pair of offset classes (victim reads class i, aggressor j):
// "cross_page": class i is chunk offset offsets[i] in every victim page, the aggressor's in other
// pages; "same_page": both read their chunk of the one page `page`.
struct InterferenceMap {
  std::string name;
  std::string kind;          // cross_page or same_page
  int granularity = 0;
  bool discard = false;
  int64_t page = -1;         // same_page: the page index within the buffer
  std::vector<int> offsets;  // chunk offsets within a page, one per class
  int reps = 0;
  std::vector<double> alone;   // [rep][class]
  std::vector<double> shared;  // [rep][victim class][aggressor class]; same_page diagonal NaN
  int classes() const { return static_cast<int>(offsets.size()); }
};

// SGDRC's Algorithm 1: two lines read at once by one warp after the L2 was flushed, timed in SM
// cycles; the partner of base b at delta d is chunk (base_offsets[b] + d) mod chunks-per-page of
// the same page.
struct LatencyProbe {
  int granularity = 0;
  std::vector<int64_t> base_pages;
  std::vector<int> base_offsets;
  std::vector<int> deltas;
  int reps = 0;
  std::vector<double> pair_cycles;    // [base][delta][rep]
  std::vector<double> single_cycles;  // [base][rep]: the base line alone
};

struct RawProbe {
  nlohmann::json provenance;  // build and device identity (provenance_json)
  ProbeConfig config;
  Calibration calibration;
  std::vector<ConditionsExperiment> conditions;
  std::vector<InterferenceMap> maps;
  std::optional<LatencyProbe> latency;
};

nlohmann::json raw_to_json(const RawProbe& raw);
// An error names the field ("maps[1].shared: expected 2 x 32 x 32 = 2048 numbers, got 2000").
Result<RawProbe> raw_from_json(const nlohmann::json& j);
// Reads and parses a file; an error names the file and the field.
Result<RawProbe> read_raw_file(const std::string& path);

}  // namespace concord::channel
