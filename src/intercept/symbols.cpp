#include "intercept/symbols.h"

#include <array>
#include <cstring>

namespace concord::intercept {
namespace {

// The table of entry_points.def, in its order (Entry's).
constexpr std::array<EntryPoint, static_cast<size_t>(Entry::count)> kEntryPoints = {{
#define CONCORD_ENTRY_POINT(name, base, version, per_thread) {"cu" #name, #base, version, per_thread},
#include "intercept/entry_points.def"
#undef CONCORD_ENTRY_POINT
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
