// Making backends by kind: the simulator always, "cuda" when the CUDA library registered itself
// (src/backend/registration.h); likewise the Nsight Compute worker, which only a CUDA build has.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/status.h"

namespace concord {

// Makes a fresh backend: the engine runs reference runs (alone, serial) on fresh instances.
struct BackendConfig {
  std::string kind = "sim";   // "sim" or "cuda"
  DeviceSpec device;          // the device to simulate (sim); ignored by cuda (it probes)
  uint64_t seed = 1;
  int device_index = 0;       // cuda: the GPU, counted among those CUDA_VISIBLE_DEVICES leaves
};
Result<std::unique_ptr<Backend>> make_backend(const BackendConfig& config);
// Registers how to make the "cuda" backend (done by the CUDA library when it is linked in).
void register_cuda_backend_factory(Result<std::unique_ptr<Backend>> (*factory)(const BackendConfig&));
// Backend kinds compiled into this build.
std::vector<std::string> available_backends();

// The program Nsight Compute profiles for `concord profile raise` (`concord profile raise-worker`):
// one plain launch of each suite job of `jobs_file` (suite_jobs_to_text) after a marker kernel. A
// CUDA build registers it with its backend; without one, running it is an error that says so.
using NcuWorker = Status (*)(const std::string& jobs_file);
void register_ncu_worker(NcuWorker worker);
Status run_ncu_worker(const std::string& jobs_file);

}  // namespace concord
