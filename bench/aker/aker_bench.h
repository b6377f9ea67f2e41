// The Aker bench's commands (aker_bench.cpp: `run`; aker_pairs.cpp: `pairs`).
#pragma once

#include <string>
#include <vector>

#include "concord/status.h"
#include "concord/placement_rule.h"

namespace concord::aker_bench {

// Prints the error and returns the exit status 1.
int fail(const Status& s);

struct PairsOptions {
  std::vector<std::string> pairs;   // "kernel:size+kernel:size"
  std::vector<std::string> ratios;  // "a:b"
  std::vector<double> knee_points{0.1, 0.2, 1.8, 1.9};  // load ratios of the two-stage fit (Aker, section 6.3)
  // "chosen": per ratio, the block-size variants best_fusion_shape picks (several fused blocks
  // per SM); "default": the kernels' default variants.
  std::string variants = "chosen";
  int reps = 3;
  std::string backend = "sim";
  std::string device = "h100";
  std::string out = "aker_pairs.json";
};
int cmd_pairs(const PairsOptions& options);

// The pairs measured when none is given: tensor-core + CUDA-core and compute + memory, at sizes
// whose solo times are of one order on an H100.
const std::vector<std::string>& default_pairs();
const std::vector<std::string>& default_ratios();

}  // namespace concord::aker_bench
