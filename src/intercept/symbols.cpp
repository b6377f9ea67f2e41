#include "intercept/symbols.h"

#include <array>
#include <cstring>

namespace concord::intercept {
namespace {

// Versions are those of cudaTypedefs.h's PFN_<name>_v<version> typedefs (CUDA 13.0).
constexpr std::array<EntryPoint, static_cast<size_t>(Entry::count)> kEntryPoints = {{
    {"cuLaunchKernel", "cuLaunchKernel", 4000, false},
    {"cuLaunchKernel_ptsz", "cuLaunchKernel", 7000, true},
    {"cuLaunchKernelEx", "cuLaunchKernelEx", 11060, false},
    {"cuLaunchKernelEx_ptsz", "cuLaunchKernelEx", 11060, true},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 9000, false},
    {"cuLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel", 9000, true},
    {"cuGraphLaunch", "cuGraphLaunch", 10000, false},
    {"cuGraphLaunch_ptsz", "cuGraphLaunch", 10000, true},
    {"cuStreamCreate", "cuStreamCreate", 2000, false},
    {"cuStreamCreateWithPriority", "cuStreamCreateWithPriority", 5050, false},
    {"cuStreamDestroy", "cuStreamDestroy", 2000, false},
    {"cuStreamDestroy_v2", "cuStreamDestroy", 4000, false},
    {"cuStreamSynchronize", "cuStreamSynchronize", 2000, false},
    {"cuStreamSynchronize_ptsz", "cuStreamSynchronize", 7000, true},
    {"cuCtxSynchronize", "cuCtxSynchronize", 2000, false},
    {"cuCtxSynchronize_v2", "cuCtxSynchronize", 13000, false},
    {"cuStreamBeginCapture", "cuStreamBeginCapture", 10000, false},
    {"cuStreamBeginCapture_ptsz", "cuStreamBeginCapture", 10000, true},
    {"cuStreamBeginCapture_v2", "cuStreamBeginCapture", 10010, false},
    {"cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCapture", 10010, true},
    {"cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", 12030, false},
    {"cuStreamBeginCaptureToGraph_ptsz", "cuStreamBeginCaptureToGraph", 12030, true},
    {"cuStreamEndCapture", "cuStreamEndCapture", 10000, false},
    {"cuStreamEndCapture_ptsz", "cuStreamEndCapture", 10000, true},
    {"cuMemAlloc_v2", "cuMemAlloc", 3020, false},
    {"cuMemFree_v2", "cuMemFree", 3020, false},
    {"cuMemAllocAsync", "cuMemAllocAsync", 11020, false},
    {"cuMemAllocAsync_ptsz", "cuMemAllocAsync", 11020, true},
    {"cuMemFreeAsync", "cuMemFreeAsync", 11020, false},
    {"cuMemFreeAsync_ptsz", "cuMemFreeAsync", 11020, true},
    {"cuGetProcAddress", "cuGetProcAddress", 11030, false},
    {"cuGetProcAddress_v2", "cuGetProcAddress", 12000, false},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, false},
    {"cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync", 11020, true},
}};

}  // namespace

std::span<const EntryPoint> entry_points() { return kEntryPoints; }

int find_exported(const char* name) {
  if (!name) return -1;
  for (size_t i = 0; i < kEntryPoints.size(); ++i) {
    if (std::strcmp(kEntryPoints[i].exported, name) == 0) return static_cast<int>(i);
  }
  return -1;
}

int resolve_proc(const char* symbol, int cuda_version, uint64_t flags) {
  if (!symbol) return -1;
  const bool want_per_thread = (flags & kProcAddressPerThreadStream) != 0;
  int best[2] = {-1, -1};  // [per_thread]: the newest variant old enough, per flavour
  for (size_t i = 0; i < kEntryPoints.size(); ++i) {
    const EntryPoint& e = kEntryPoints[i];
    if (std::strcmp(e.base, symbol) != 0 || e.min_version > cuda_version) continue;
    int& slot = best[e.per_thread ? 1 : 0];
    if (slot < 0 || kEntryPoints[static_cast<size_t>(slot)].min_version < e.min_version) slot = static_cast<int>(i);
  }
  if (want_per_thread && best[1] >= 0) return best[1];
  return best[0];
}

bool maybe_intercepted(const char* name) {
  return name && name[0] == 'c' && name[1] == 'u' && (name[2] == 'L' || name[2] == 'G' || name[2] == 'S' ||
                                                      name[2] == 'C' || name[2] == 'M') &&
         find_exported(name) >= 0;
}

}  // namespace concord::intercept
