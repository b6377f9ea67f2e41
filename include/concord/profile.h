// Kernel profiles: what was measured about a kernel on a device, the analysis built on it
// (demand d, linear duration model, classes), and the SQLite profile store.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/raise.h"
#include "concord/status.h"

namespace concord {

struct ProfileKey {
  std::string gpu;     // device name, "NVIDIA H200"
  std::string driver;  // driver version, "580.159.04" (or the CUDA driver API number)
  std::string kernel;
  std::string variant;
  int64_t size = 0;
  bool operator==(const ProfileKey&) const = default;
  std::string to_string() const;
};

enum class AkerClass : uint8_t { tensor_core, compute_prefer, memory_prefer, neutral };
const char* to_string(AkerClass c);

struct KernelProfile {
  ProfileKey key;
  bool elastic = true;
  int64_t logical_blocks = 0;
  double flops_per_block = 0;
  double bytes_per_block = 0;
  // Static resources.
  int threads_per_block = 0;
  int registers_per_thread = 0;
  int shared_bytes_per_block = 0;
  int blocks_per_sm = 0;
  // Duration against SM count (full TLP, normal caching), ascending SM counts.
  std::vector<SmCurvePoint> sm_curve;
  // Duration on every SM for each cache policy (normal, l1-bypass, l2-evict-first, both); 0 = not measured.
  std::array<double, 4> cache_seconds{};
  // The same beside a streaming kernel that shares every SM (stream_triad, half of each kernel's
  // occupancy each), timed to the profiled kernel's own end; 0 = not measured (library kernels,
  // profiles from before session 8). On Hopper a cache policy can cost nothing alone and much
  // under pressure (docs/profiler.md, "Cache policies under pressure").
  std::array<double, 4> cache_pressure_seconds{};
  // Duration on every SM against TLP 1..blocks_per_sm (index tlp-1); empty for opaque kernels.
  std::vector<double> tlp_seconds;
  // Linear model of duration against logical blocks (Aker 6.3): seconds = intercept + slope * blocks.
  double linear_intercept = 0;
  double linear_slope = 0;
  double linear_fit_error = 0;  // mean relative error of the fit on its points
  // Derived.
  int demand_sms = 0;           // FEDCM's d as an SM count: fewest SMs within 10% of the all-SM time
  double demand = 0;            // d as a share of the SMs
  double compute_utilization = 0;  // achieved FLOP/s over peak, on every SM
  double memory_utilization = 0;   // achieved DRAM bytes/s over peak, on every SM
  AkerClass aker_class = AkerClass::neutral;
  // RAISE's eight metrics (0-10) from Nsight Compute, time-weighted over the kernels one launch
  // runs (library calls launch several); absent until `concord profile raise` measured them.
  std::optional<RaiseVector> raise;
  RaiseClass raise_class = RaiseClass::lat;
  double profile_seconds = 0;   // wall time the measurement took

  double all_sm_seconds() const { return sm_curve.empty() ? 0 : sm_curve.back().seconds; }
};

// --- analysis (pure functions, unit-tested)

// SM counts to measure: powers of two from `step` (a TPC) up, plus the full count; `full` = every
// multiple of `step`.
std::vector<int> plan_sm_sweep(int sm_count, int step, bool full);
// More SM counts between the two measured points around the knee (where the time first comes
// within `tolerance` of the all-SM time), at `step` granularity, at most `extra` of them.
std::vector<int> refine_near_knee(const std::vector<SmCurvePoint>& curve, int step, double tolerance, int extra);
// Fewest SMs whose time is within `tolerance` (0.1) of the all-SM time (FEDCM III-A).
int demand_sms(const std::vector<SmCurvePoint>& curve, double tolerance = 0.1);
struct LinearFit {
  double intercept = 0;
  double slope = 0;
  double mean_relative_error = 0;
};
// Least squares y = intercept + slope * x; error = mean |fit - y| / y.
Result<LinearFit> fit_linear(const std::vector<double>& x, const std::vector<double>& y);
// Aker's classes by its 50% thresholds (Section 4): tensor-core kernels by unit; memory-prefer if
// memory utilization > 50%; compute-prefer if compute > 50% (and memory <= 50%); else neutral.
AkerClass aker_class(ComputeUnit unit, double compute_utilization, double memory_utilization);
// FEDCM's critical kernels: the top ceil(sigma * n) of `seconds` (indices, longest first).
std::vector<size_t> critical_kernels(const std::vector<double>& seconds, double sigma);

// JSON round trip of a profile (the store's payload and the export format).
std::string profile_to_json(const KernelProfile& p);
Result<KernelProfile> profile_from_json(const std::string& text);

// --- the store

// A SQLite database of profiles (WAL mode, versioned schema with migrations). A file that is not
// a Concord profile store (another application's database, or not SQLite) is reported with a clear
// error and never modified.
class ProfileStore {
 public:
  static constexpr int kSchemaVersion = 2;
  static Result<std::unique_ptr<ProfileStore>> open(const std::string& path, bool read_only = false);
  ~ProfileStore();
  ProfileStore(const ProfileStore&) = delete;
  ProfileStore& operator=(const ProfileStore&) = delete;

  Status put(const KernelProfile& profile);
  Result<std::optional<KernelProfile>> get(const ProfileKey& key) const;
  Result<std::vector<KernelProfile>> all() const;
  // Any profile of this kernel name, variant and size, on any GPU (newest first).
  Result<std::optional<KernelProfile>> find(const std::string& kernel, const std::string& variant, int64_t size,
                                            const std::string& gpu = "") const;
  // Profiling sessions (schema v2): when, on what, how long.
  Status record_session(const std::string& gpu, const std::string& driver, double seconds, int profiles);
  struct Session {
    std::string gpu, driver, finished_at;
    double seconds = 0;
    int profiles = 0;
  };
  Result<std::vector<Session>> sessions() const;

  Status export_json(const std::string& path) const;
  // Adds or replaces every profile in a JSON export; returns how many.
  Result<int> import_json(const std::string& path);
  int schema_version() const { return version_; }

 private:
  ProfileStore() = default;
  struct Db;
  std::unique_ptr<Db> db_;
  std::string path_;
  int version_ = 0;
};

// Attaches stored profiles to the kernels of a workload (same name and size): the default
// variant's SM curve and cache slowdowns (the simulator then uses measured curves instead of
// rooflines) and every variant's RAISE metrics. Returns how many kernels got something.
struct Workload;
Result<int> attach_profiles(Workload& workload, const ProfileStore& store, const std::string& gpu = "");

}  // namespace concord
