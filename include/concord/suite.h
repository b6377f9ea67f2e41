// The workload suite's names and specs, in one place. The simulator needs only these specs
// (resources, FLOPs, bytes); the CUDA backend attaches a device body to each name.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "concord/kernel.h"
#include "concord/status.h"

namespace concord {

struct SuiteEntry {
  std::string name;
  std::string description;
  std::string origin;       // "RAISE Table IV", "Aker", "compute + memory pair", "library"
  bool elastic = true;
  int64_t default_size = 0;
  int64_t min_size = 1;
};

// The most logical blocks one variant may have: a plain launch's grid is at most 2^31 - 1 blocks.
inline constexpr int64_t kMaxLogicalBlocks = (int64_t{1} << 31) - 1;

// Each entry's description ends with the sizes the kernel accepts ("(sizes: a multiple of 32, at
// least 64)"), from the same rule make_suite_kernel checks.
const std::vector<SuiteEntry>& suite_catalog();
// The spec of suite kernel `name` at problem size `size` (meaning per kernel: see the catalog).
// Sizes outside the entry's `sizes`, or that would give a variant more than kMaxLogicalBlocks,
// are refused with the reason.
Result<KernelSpec> make_suite_kernel(const std::string& name, int64_t size);
// Block sizes (threads) of the min, mid and max variants in place of the kernel's usual ones
// (RAISE Table IV gives each task its own three). A variant whose size differs from the usual one
// is named "<slot>@<threads>" ("min@8"), so the profiles of the two never mix. Library kernels and
// sizes a body cannot run are refused with the reason.
using BlockSizes = std::array<int, 3>;
Result<KernelSpec> make_suite_kernel(const std::string& name, int64_t size, const std::optional<BlockSizes>& blocks);
// The kernel that has the variant named `variant` ("mid"; "min@8": the min slot at 8 threads).
Result<KernelSpec> make_suite_kernel_with_variant(const std::string& name, int64_t size, const std::string& variant);

// One suite kernel variant at a size (what make_suite_kernel_with_variant makes): the unit the
// Nsight Compute worker launches, one per line of its job file ("kernel size variant").
struct SuiteJob {
  std::string kernel;
  int64_t size = 0;
  std::string variant;
  bool operator==(const SuiteJob&) const = default;
};
// Every variant of every distinct (kernel, size) among `kernels`, in first-seen order.
std::vector<SuiteJob> suite_jobs(const std::vector<KernelSpec>& kernels);
std::string suite_jobs_to_text(const std::vector<SuiteJob>& jobs);
// An error names `source` and the line.
Result<std::vector<SuiteJob>> suite_jobs_from_text(const std::string& text, const std::string& source);

}  // namespace concord
