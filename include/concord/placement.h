// Placement: the runtime's decision for one launch (docs/architecture.md, vocabulary).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "concord/ids.h"
#include "concord/kernel.h"
#include "concord/sm_set.h"

namespace concord {

// A half-open range of logical blocks [begin, end).
struct BlockRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const BlockRange&) const = default;
};

// How the backend launches the kernel.
enum class LaunchForm : uint8_t {
  native = 0,      // the logical grid as ordinary blocks; the hardware block scheduler places them
  persistent = 1,  // the elastic wrapper: persistent blocks fetch logical blocks from a counter
};
const char* to_string(LaunchForm f);

// Fusion: one block holds `self_parts` parts of this launch's body and `partner_parts` parts of
// the partner's body, each part looping over its own counter and range. The partner runs
// `partner_variant` (a block-size variant of its kernel; -1: the variant its launch already runs,
// or its default before its first dispatch); `partner_range` is in that variant's logical blocks.
struct Fusion {
  LaunchId partner;
  BlockRange partner_range;
  int self_parts = 1;
  int partner_parts = 1;
  int partner_variant = -1;
};

inline constexpr int kNormalStreamPriority = 0;
inline constexpr int kHighStreamPriority = 1;

struct Placement {
  SmSet sms;                       // allowed SMs; must be non-empty
  int tlp = 0;                     // resident blocks per SM; 0 = as many as fit
  // A tighter limit on some SMs (persistent form): on the SMs of tight_sms at most tight_tlp
  // blocks (0: none). The SM-set policies use it on the SMs a kernel shares with others.
  SmSet tight_sms;
  int tight_tlp = 0;
  CachePolicy cache = CachePolicy::normal;
  int variant = -1;                // block-size variant; -1 = the kernel's default
  std::optional<BlockRange> range; // logical blocks to run; nullopt = all pending blocks
  LaunchForm form = LaunchForm::native;
  std::optional<Fusion> fusion;
  // Stream priority, two levels: > 0 (kHighStreamPriority) runs on the device's greatest CUDA
  // stream priority, <= 0 on its least (the default). Blocks of a high-priority launch are placed
  // before those of a normal one when both wait.
  int priority = kNormalStreamPriority;
  // Keep this launch's data in L2's persisting part: an access-policy window over its buffers with
  // persisting hits (SGDRC's memory isolation where VRAM channels cannot be coloured; docs/policies.md).
  // Not with a cache policy that evicts L2 first.
  bool l2_persist = false;

  std::string to_string() const;
};

}  // namespace concord
