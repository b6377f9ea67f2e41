// The workload suite's names and specs, in one place. The simulator needs only these specs
// (resources, FLOPs, bytes); the CUDA backend attaches a device body to each name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/status.h"

namespace concord {

struct SuiteEntry {
  std::string name;
  std::string description;
  std::string origin;       // "RAISE Table IV", "Aker", "DESIGN.md pair", "library"
  bool elastic = true;
  int64_t default_size = 0;
  int64_t min_size = 1;
};

const std::vector<SuiteEntry>& suite_catalog();
// The spec of suite kernel `name` at problem size `size` (meaning per kernel: see the catalog).
Result<KernelSpec> make_suite_kernel(const std::string& name, int64_t size);

}  // namespace concord
