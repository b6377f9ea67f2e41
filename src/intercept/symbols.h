// The driver entry points the library intercepts: their exported names and how the driver's
// cuGetProcAddress names them (a base name, the CUDA version from which a lookup of that base gets
// this variant, and whether it is the per-thread-default-stream flavour). No CUDA header here: the
// table is shared by the library and its CPU tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace concord::intercept {

struct EntryPoint {
  const char* exported;  // the symbol libcuda exports, e.g. "cuLaunchKernel_ptsz"
  const char* base;      // what cuGetProcAddress is asked for, e.g. "cuLaunchKernel"
  int min_version;       // the first cudaVersion whose lookup of `base` yields this variant
  bool per_thread;       // the _ptsz/_ptds flavour
};

// Indices into entry_points(), in its order (each the exported name without its "cu").
enum class Entry : int {
#define CONCORD_ENTRY_POINT(name, base, version, per_thread) name,
#include "intercept/entry_points.def"
#undef CONCORD_ENTRY_POINT
  count
};

// cuGetProcAddress's flags (cuda.h's CUdriverProcAddress_flags; the library checks they agree).
inline constexpr uint64_t kProcAddressLegacyStream = 1;
inline constexpr uint64_t kProcAddressPerThreadStream = 2;

// Every intercepted entry point, in a fixed order (the library's wrappers follow it).
std::span<const EntryPoint> entry_points();

// The index in entry_points() of the exported name `name`, or -1.
int find_exported(const char* name);

// The variant a cuGetProcAddress lookup of `symbol` at `cuda_version` with `flags` resolves to,
// by the driver's rule: among the variants of that base, the stream flavour the flags ask for (the
// legacy one when the base has no per-thread variant at that version), then the newest whose
// version is at most `cuda_version`. -1 when `symbol` is not an intercepted base or no variant is
// old enough.
int resolve_proc(const char* symbol, int cuda_version, uint64_t flags);

// Whether a dlsym() of `name` may need a wrapper: a cheap filter before any table lookup.
bool maybe_intercepted(const char* name);

}  // namespace concord::intercept
