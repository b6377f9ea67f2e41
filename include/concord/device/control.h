// The per-launch control block of an elastic launch, shared by host and device code.
// Lives in device memory; the host writes allowed SMs, TLP (everywhere, and a tighter one on the
// SMs it shares with other kernels) and the preempt flag (asynchronous copies on a control
// stream), the device reads them with relaxed atomic loads.
#pragma once

#include <cstdint>

namespace concord::device {

inline constexpr int kMaxControlSms = 256;

struct alignas(128) ElasticControl {
  uint64_t allowed[kMaxControlSms / 64];  // SM bitmap: bit s of word s/64
  uint64_t tight[kMaxControlSms / 64];    // SMs (bitmap) where tight_tlp applies instead of tlp
  int32_t tlp;                            // resident blocks per SM allowed
  int32_t preempt;                        // nonzero: fetch nothing more
  int32_t chunk;                          // logical blocks taken per fetch (>= 1)
  int32_t tight_tlp;                      // > 0: the limit on the `tight` SMs (shared with other kernels)
  int64_t range_begin;                    // logical blocks [range_begin, range_end)
  int64_t range_end;
  unsigned long long next;                // logical blocks handed out so far (may pass the end)
  unsigned long long done;                // logical blocks finished so far (the progress counter)
  int32_t resident[kMaxControlSms];       // blocks resident per SM now
  int32_t resident_peak[kMaxControlSms];  // most blocks ever resident per SM (TLP is respected)
  uint32_t sm_done[kMaxControlSms];       // logical blocks finished per SM (histogram)
};

// A test's own record of what ran, kept apart from the control block's counters (which the
// backend caps at the range): for each logical block, how many times a body was called for it and
// on which SM (%smid, the last time). Every launch form takes one; null pointers (the default)
// switch it off; DeviceKernel::audit_block_runs switches it on for one kernel.
struct BlockAudit {
  uint32_t* runs = nullptr;  // indexed by logical block id
  uint32_t* sm = nullptr;
};

}  // namespace concord::device
