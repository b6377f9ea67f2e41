// Timing helpers shared by the profiler and the GPU benchmarks: control blocks for elastic parts
// and the median of event-timed repetitions.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "cuda/handles.h"
#include "concord/device/control.h"
#include "concord/placement.h"
#include "concord/sm_set.h"
#include "concord/status.h"

namespace concord::cuda {

// Control blocks for the elastic parts of one timed launch, re-uploaded (reset) before each run.
class ElasticControls {
 public:
  // Adds a part: range, SM set, TLP; the chunk size follows chunk_for().
  // `block_seconds`: the kernel's slot_block_seconds (0: unknown, the count rule alone), as the
  // backend passes it.
  void add(BlockRange range, const SmSet& sms, int tlp, double block_seconds = 0);
  // The same with a given chunk (benchmarks that sweep the chunk size).
  void add_with_chunk(BlockRange range, const SmSet& sms, int tlp, int chunk);
  Status upload();
  device::ElasticControl* at(size_t i) const { return buffer_.get() + i; }

 private:
  DeviceBuffer<device::ElasticControl> buffer_;
  std::vector<device::ElasticControl> host_;
};

// Median seconds of `work` over `reps` runs after `warmups`. Each run: `before` (untimed, then the
// device is synchronised), an event on streams[0] that every other stream waits for, `work`, and
// the last end event over all streams.
Result<double> time_median(const std::vector<cudaStream_t>& streams, const std::function<Status()>& before,
                           const std::function<Status()>& work, int reps = 7, int warmups = 2);

}  // namespace concord::cuda
