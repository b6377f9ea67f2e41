// Chrome/Perfetto traces of a finished run (chrome://tracing, ui.perfetto.dev).
#pragma once

#include <string>

#include "concord/device.h"
#include "concord/engine.h"

namespace concord {

// The run as Chrome trace-event JSON:
// - one process per tenant, with its kernels (each slice named "tenant:kernel", fused dispatches
//   "a:k1 + b:k2"), its requests (arrival to last kernel's end), and a counter of the SMs its
//   running dispatches hold;
// - one process per GPC of `device` (its topology as the DeviceSpec states it), with every
//   dispatch that ran on one of its SMs.
// Slices that run at the same time on one track go to separate lanes (threads "kernels",
// "kernels #2", ...), so no two slices of a thread overlap: Chrome and Perfetto draw complete
// slices of one thread as a stack and misdraw ones that overlap without nesting.
// otherData.status says whether the run is complete, or where (`stage`) and why (`status`) it
// ended early (as the results JSON's `status`); a dispatch that never ended has no slice, nor a
// request that did not finish.
std::string chrome_trace_json(const RunRecord& run, const DeviceSpec& device, const Status& status = Status::ok(),
                              const std::string& stage = "");

}  // namespace concord
