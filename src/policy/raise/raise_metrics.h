// RAISE's resource vector (RAISE paper, Section V-B, Table II): eight utilisation metrics on a 0-10 scale,
// the task classes COM/MEM/LAT and the type scores of Eq. 1-3. The profiler fills vectors from
// Nsight Compute; the `raise` policy subtracts and adds them on a global vector M_g. With
// raise_facet.h this is a layer of its own (concord_policy_facets, on core only): the profiler
// builds on it to measure and store the vectors, the policy to read them.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace concord {

// Order of the vector (Table II's first eight rows).
enum class RaiseMetric : int { aoc = 0, sme, ipc, isu, spu, du, lsu, tu };
inline constexpr int kRaiseMetrics = 8;
using RaiseVector = std::array<double, kRaiseMetrics>;

struct RaiseMetricInfo {
  const char* abbr;      // "AOC"
  const char* nvprof;    // the paper's nvprof name
  const char* ncu;       // the Nsight Compute metric read on Hopper
  double full_scale;     // the ncu value that maps to 10
};
// The metric table (documented in docs/profiler.md).
const std::array<RaiseMetricInfo, kRaiseMetrics>& raise_metric_info();
inline double& at(RaiseVector& v, RaiseMetric m) { return v[static_cast<size_t>(m)]; }
inline double at(const RaiseVector& v, RaiseMetric m) { return v[static_cast<size_t>(m)]; }

// A 0-10 value from an ncu reading: value / full_scale * 10, clamped.
double raise_scale(RaiseMetric m, double ncu_value);

enum class RaiseClass : int { com = 0, mem = 1, lat = 2 };
const char* to_string(RaiseClass c);
std::optional<RaiseClass> raise_class_from_string(const std::string& s);

// A task's class from its IPC and DU (RAISE paper, Section V-A, VI-A: "classified by IPC and DU"): LAT when
// both are below `threshold` (3, the paper's alpha = beta), else COM when IPC >= DU, else MEM.
RaiseClass raise_class(const RaiseVector& m, double threshold = 3.0);

// Type scores (Eq. 1-3): half the class's key metric plus half the mean of the other seven
// (COM: IPC, MEM: DU); LAT: the mean of all eight. Used for tasks (m_t) and the GPU (M_g).
double raise_score(const RaiseVector& m, RaiseClass c);

}  // namespace concord
