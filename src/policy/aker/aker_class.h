// Aker's kernel classes (Aker paper, Section 5.1): a tensor-core kernel (TC) or a CUDA-core kernel (CD); a CD
// kernel is memory-prefer when its DRAM utilisation exceeds 50%, compute-prefer when its compute
// utilisation exceeds 50% and its DRAM utilisation does not, neutral otherwise. Only pairs fuse,
// in the paper's order: TC with CD first, then compute-prefer with memory-prefer, then a
// compute- or memory-prefer kernel with a neutral one. Part of the policy-facets layer: the
// profiler stores the class, the policies read it.
#pragma once

#include <optional>
#include <string>

namespace concord::policy {

enum class AkerClass : int { tensor = 0, compute = 1, memory = 2, neutral = 3 };
const char* to_string(AkerClass c);
std::optional<AkerClass> aker_class_from_string(const std::string& s);

// What a kernel's class is read from: the unit its arithmetic runs on and its achieved
// utilisations on every SM (shares of peak, as the profile store keeps them: KernelProfile's
// compute_utilization and memory_utilization).
struct AkerUtilisation {
  bool tensor = false;
  double compute = 0;  // achieved FLOP/s over the unit's peak
  double memory = 0;   // achieved DRAM bytes/s over peak
};

inline constexpr double kAkerPreferThreshold = 0.5;

AkerClass aker_class(const AkerUtilisation& u, double threshold = kAkerPreferThreshold);

// The pair's rank in the paper's order: 0 TC + CD, 1 compute + memory, 2 compute or memory +
// neutral; nullopt for a pair that is not fused (two TC kernels, two kernels of one CD class, two
// neutral kernels).
std::optional<int> aker_pair_rank(AkerClass a, AkerClass b);

}  // namespace concord::policy
