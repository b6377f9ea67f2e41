// The residency cap's arithmetic (intercept/room.h), free of CUDA so it is tested everywhere: how
// many blocks of a kernel fit on an SM, and how much dynamic shared memory a launch must ask for
// so that at most a given number do.
#pragma once

#include <cstdint>

namespace concord::intercept {

// The device's limits the padding needs.
struct RoomDevice {
  int sm_count = 0;
  int shared_per_sm = 0;         // bytes an SM can give its blocks (the largest carveout)
  int shared_per_block_max = 0;  // opt-in maximum for one block
  int reserved_per_block = 0;    // the driver's own share of each block
  int threads_per_sm = 0;
  int blocks_per_sm = 0;
  int registers_per_sm = 0;
};

// What padding needs of one function.
struct RoomFunction {
  int registers = 0;      // per thread
  int static_shared = 0;  // bytes per block
};

// Blocks of a kernel resident per SM from its registers, threads and shared memory, by the rules
// of the occupancy calculator (warp-granular registers, 256 per warp). 0 when one block cannot fit.
int resident_blocks(const RoomDevice& device, const RoomFunction& function, int threads, int dynamic_shared);

// The dynamic shared memory a launch of `function` with `threads` per block and `own_shared`
// bytes of its own should ask for so that at most `cap` blocks are resident per SM: `own_shared`
// when it is already held there (or `cap` is 0), never less, never past the device's per-block
// maximum.
uint32_t padded_shared(const RoomDevice& device, const RoomFunction& function, int threads, uint32_t own_shared, int cap);

}  // namespace concord::intercept
