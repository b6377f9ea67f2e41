// Fused kernels of any two elastic bodies, compiled at run time with NVRTC (docs/cuda_backend.md,
// "Fusion at run time"). The device headers (the device API and every body) are embedded in the
// binary at build time; a fused kernel for (body A, body B, cache policy, register cap) is compiled
// on first use, kept on disk under $CONCORD_CACHE_DIR, else $XDG_CACHE_HOME/concord, else
// ~/.cache/concord, keyed by a hash of its source, the options, the GPU architecture and NVRTC's
// version, and loaded as a context-independent library (cudaLibraryLoadData), so it launches on
// any stream, green-context streams included. NVRTC is loaded with dlopen: a machine without it
// runs everything but fusion, and says why fusion is unavailable.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "concord/kernel.h"
#include "concord/status.h"
#include "concord/placement_rule.h"

namespace concord::kernels {

struct FusedKernelKey {
  std::string body_a;  // a body's type name in the device source, e.g. "concord::kernels::FmaLoopBody"
  std::string body_b;
  CachePolicy cache = CachePolicy::normal;
  int register_cap = 255;  // --maxrregcount: one fused block must fit an SM (fused_register_cap)
  int parts = 2;           // parts per block, a + b: the named barriers the kernel names (1..parts)
  auto operator<=>(const FusedKernelKey&) const = default;
};

struct FusionStats {
  int compiled = 0;      // compiled by NVRTC in this process
  int from_disk = 0;     // loaded from the on-disk cache
  double compile_seconds = 0;  // wall time spent in NVRTC
};

class FusionCompiler {
 public:
  // The process's compiler for the current device (set with cudaSetDevice before first use).
  static FusionCompiler& shared();

  // Ok when fused kernels can be made here: NVRTC loaded, CUDA's headers found, the cache
  // directory writable. Otherwise the reason (checked once).
  Status available();
  // The fused kernel for `key`, loaded (a cudaKernel_t, usable where the runtime takes a kernel
  // function as const void*). Compiles it, or loads it from the disk cache, on first use.
  Result<const void*> kernel(const FusedKernelKey& key);
  FusionStats stats();
  // The directory of the on-disk cache (an error names why none can be used).
  static Result<std::string> cache_directory();

 private:
  FusionCompiler() = default;
  Status init();
  Result<std::string> compile(const FusedKernelKey& key, const std::string& name_expression);

  std::mutex mu_;
  bool initialised_ = false;
  Status init_status_;
  std::string arch_;         // "sm_90"
  std::string cuda_include_; // where mma.h and cuda_fp16.h are
  std::string cache_dir_;
  int nvrtc_major_ = 0, nvrtc_minor_ = 0;
  std::map<FusedKernelKey, const void*> loaded_;
  FusionStats stats_;
};

}  // namespace concord::kernels
