// Kernel profiles: what was measured about a kernel on a device, the analysis built on it
// (demand d, linear duration model), and the SQLite profile store with per-policy facets.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/status.h"

namespace concord {

struct ProfileKey {
  std::string gpu;     // device name, "NVIDIA H200"
  std::string driver;  // driver version, "580.159.04"
  std::string kernel;
  std::string variant;
  int64_t size = 0;
  bool operator==(const ProfileKey&) const = default;
  std::string to_string() const;
};

// The measured fields of a profile that the profiler fills one at a time (each in its own store
// transaction), so an interrupted run keeps what it finished and a later run measures only what
// is missing.
enum class ProfileField : uint8_t {
  sm_curve = 0,        // sm_curve and what is derived from it (demand, utilisations)
  cache = 1,           // cache_seconds
  cache_pressure = 2,  // cache_pressure_seconds
  tlp = 3,             // tlp_seconds
  linear = 4,          // linear_intercept, linear_slope, linear_fit_error
};
inline constexpr ProfileField kAllProfileFields[] = {ProfileField::sm_curve, ProfileField::cache,
                                                     ProfileField::cache_pressure, ProfileField::tlp,
                                                     ProfileField::linear};
const char* to_string(ProfileField f);

// A set of ProfileFields.
class ProfileFields {
 public:
  constexpr ProfileFields() = default;
  constexpr ProfileFields(std::initializer_list<ProfileField> fields) {
    for (ProfileField f : fields) bits_ |= bit(f);
  }
  static constexpr ProfileFields all() { return from_bits(0x1F); }
  constexpr bool contains(ProfileField f) const { return (bits_ & bit(f)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr ProfileFields operator|(ProfileFields o) const { return from_bits(bits_ | o.bits_); }
  constexpr ProfileFields operator&(ProfileFields o) const { return from_bits(bits_ & o.bits_); }
  constexpr ProfileFields without(ProfileFields o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr bool operator==(const ProfileFields&) const = default;
  std::string to_string() const;  // "sm_curve, cache"; "none"

 private:
  static constexpr uint8_t bit(ProfileField f) { return static_cast<uint8_t>(1u << static_cast<unsigned>(f)); }
  static constexpr ProfileFields from_bits(unsigned b) {
    ProfileFields s;
    s.bits_ = static_cast<uint8_t>(b & 0x1F);
    return s;
  }
  uint8_t bits_ = 0;
};

// What the profiler measured about one kernel variant at one size on one device. A field that
// was not measured holds its empty value (an empty vector, zeros).
struct KernelProfile {
  ProfileKey key;
  bool elastic = true;
  int64_t logical_blocks = 0;
  double flops_per_block = 0;
  double bytes_per_block = 0;
  // Static resources (as the kernel's spec states them; blocks_per_sm from the device's limits).
  int threads_per_block = 0;
  int registers_per_thread = 0;
  int shared_bytes_per_block = 0;
  int blocks_per_sm = 0;
  // Duration against SM count (full TLP, normal caching), strictly ascending SM counts.
  std::vector<SmCurvePoint> sm_curve;
  // Duration on every SM for each cache policy (normal, l1-bypass, l2-evict-first, both); 0 = not
  // measured (a policy the backend cannot apply to this kernel stays 0).
  std::array<double, 4> cache_seconds{};
  // The same beside a streaming kernel that shares every SM (stream_triad, half of each kernel's
  // occupancy each), timed to the profiled kernel's own end; 0 = not measured. On Hopper a cache
  // policy can cost nothing alone and much under pressure (docs/profiler.md).
  std::array<double, 4> cache_pressure_seconds{};
  // Duration on every SM against TLP 1..blocks_per_sm (index tlp-1); empty for opaque kernels.
  std::vector<double> tlp_seconds;
  // Linear model of duration against logical blocks (Aker 6.3): seconds = intercept + slope * blocks.
  double linear_intercept = 0;
  double linear_slope = 0;
  double linear_fit_error = 0;  // mean relative error of the fit on its points
  // Derived from the SM curve.
  int demand_sms = 0;              // FEDCM's d as an SM count: fewest SMs within 10% of the all-SM time
  double demand = 0;               // d as a share of the SMs
  double compute_utilization = 0;  // achieved FLOP/s over peak, on every SM
  double memory_utilization = 0;   // achieved DRAM bytes/s over peak, on every SM
  double profile_seconds = 0;      // wall time the measurements took, summed over the fields

  double all_sm_seconds() const { return sm_curve.empty() ? 0 : sm_curve.back().seconds; }
};

// The fields of `p` that hold a measurement (a non-empty curve or TLP sweep, a non-zero cache
// time, a non-zero linear model).
ProfileFields measured_fields(const KernelProfile& p);
// Checks every value of a profile: finite, non-negative times, SM counts strictly ascending and
// positive, shares within [0, 1]. The error names the field ("sm_curve[2]") and the reason.
Status validate_profile(const KernelProfile& p);

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

// JSON round trip of a profile (the store's payload and the export format). Reading accepts a
// partial profile (fields not measured may be absent) and validates every value present
// (validate_profile); errors name the field.
std::string profile_to_json(const KernelProfile& p);
Result<KernelProfile> profile_from_json(const std::string& text);

// --- the store

// Rows read back with the ones that could not be read: a damaged row (bad JSON, invalid values)
// or a damaged page is named in `problems` and skipped, so one bad row never hides the others.
struct ProfileListing {
  std::vector<KernelProfile> profiles;
  std::vector<std::string> problems;
};
// Per-policy data about a kernel on a device: a JSON object under a facet name ("raise").
struct ProfileFacet {
  ProfileKey key;
  std::string name;
  std::string json;         // a JSON object
  std::string measured_at;  // UTC, "YYYY-MM-DD HH:MM:SS"
};
struct FacetListing {
  std::vector<ProfileFacet> facets;
  std::vector<std::string> problems;
};

// A SQLite database of profiles and facets (WAL mode, versioned schema with migrations). A file
// that is not a Concord profile store (another application's database, not SQLite, a newer
// schema) is reported with a clear error and never modified; a store that fails SQLite's
// integrity check cannot be opened for writing (reading skips and names what it cannot read); a
// store that cannot be written (permissions) says so. A store opened for writing that does not
// exist yet is created by its first write, so a command that fails before writing leaves no file.
// Every write is its own transaction: profile fields and facets written by concurrent processes
// never erase each other. Errors keep SQLite's own message.
class ProfileStore {
 public:
  static constexpr int kSchemaVersion = 3;
  static Result<std::unique_ptr<ProfileStore>> open(const std::string& path, bool read_only = false);
  ~ProfileStore();
  ProfileStore(const ProfileStore&) = delete;
  ProfileStore& operator=(const ProfileStore&) = delete;

  // Adds or replaces a whole profile (import).
  Status put(const KernelProfile& profile);
  // Writes `fields` of `profile` (and its static description) into the stored profile of its key,
  // keeping every other stored field; profile_seconds is added to the stored one. One
  // transaction. A stored payload that cannot be read is replaced.
  Status merge(const KernelProfile& profile, ProfileFields fields);
  // Of `wanted`, the fields the stored profile of `key` lacks (all of them when there is none or
  // its row cannot be read).
  Result<ProfileFields> missing(const ProfileKey& key, ProfileFields wanted) const;
  Result<std::optional<KernelProfile>> get(const ProfileKey& key) const;
  Result<ProfileListing> all() const;
  // Any profile of this kernel name, variant and size, on any GPU (newest first).
  Result<std::optional<KernelProfile>> find(const std::string& kernel, const std::string& variant, int64_t size,
                                            const std::string& gpu = "") const;

  // Facets: `json` must be a JSON object; a facet the store knows ("raise") is also checked.
  Status put_facet(const ProfileKey& key, const std::string& facet, const std::string& json);
  Result<std::optional<std::string>> get_facet(const ProfileKey& key, const std::string& facet) const;
  // Every facet of `key`: name -> JSON.
  Result<std::map<std::string, std::string>> facets_of(const ProfileKey& key) const;
  // The newest facet `facet` of this kernel name, variant and size, on any GPU or on `gpu`.
  Result<std::optional<std::string>> find_facet(const std::string& kernel, const std::string& variant, int64_t size,
                                                const std::string& facet, const std::string& gpu = "") const;
  Result<FacetListing> all_facets() const;

  // Profiling sessions (schema v2): when, on what, how long.
  Status record_session(const std::string& gpu, const std::string& driver, double seconds, int profiles);
  struct Session {
    std::string gpu, driver, finished_at;
    double seconds = 0;
    int profiles = 0;
  };
  Result<std::vector<Session>> sessions() const;

  // Writes every readable profile, facet and session as JSON; returns the rows it skipped
  // (damaged), each named.
  Result<std::vector<std::string>> export_json(const std::string& path) const;
  // Adds or replaces every profile and facet of a JSON export, all or nothing; every value is
  // validated first (errors name the file, the entry, its kernel and the field). Returns how many
  // profiles and facets.
  Result<int> import_json(const std::string& path);
  int schema_version() const { return version_; }
  // What PRAGMA quick_check reported on a read-only open of a damaged store (empty: intact).
  const std::vector<std::string>& integrity_problems() const { return integrity_problems_; }

 private:
  ProfileStore() = default;
  Status ensure_created();
  struct Db;
  std::unique_ptr<Db> db_;
  std::string path_;
  int version_ = 0;
  std::vector<std::string> integrity_problems_;
};

// Attaches stored profiles to the kernels of a workload (same name and size): the default
// variant's SM curve and cache slowdowns (the simulator then uses measured curves instead of
// rooflines), every variant's RAISE metrics (the "raise" facet) and Aker's classes and duration
// models (the "aker" facet) and PBS's miss rates (the "pbs" facet). Returns how many kernels got
// something.
struct Workload;
Result<int> attach_profiles(Workload& workload, const ProfileStore& store, const std::string& gpu = "");

}  // namespace concord
