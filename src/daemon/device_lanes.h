// The GPUs one daemon manages, and which of them a tenant launches on. A daemon runs one engine
// and one policy instance per GPU (a lane): tenants of one GPU never gate, cap or slow those of
// another. A tenant names its GPU at registration by PCI bus id (the one identity that survives
// CUDA_VISIBLE_DEVICES, which renumbers the ordinals a process sees); the daemon reads the node's
// GPUs from the driver's files (it never opens a GPU itself).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "concord/device.h"
#include "concord/status.h"

namespace concord::daemon {

// A GPU as the driver lists it under <driver root>/gpus/<bus id>/information.
struct NodeGpu {
  std::string bus_id;  // normalized (normalize_bus_id)
  std::string model;   // "NVIDIA H200"
  std::string uuid;    // "GPU-..." (empty where the file has none)
};

// The driver's GPUs in bus order, which is nvidia-smi's index order (empty where the driver lists
// none: no GPU, or no driver). Entries not named by a bus id go to `skipped` (when given).
std::vector<NodeGpu> node_gpus(const std::string& driver_root = "/proc/driver/nvidia",
                               std::vector<std::string>* skipped = nullptr);

// A PCI bus id in one form, "dddd:bb:dd.f" in lower-case hex with a 4-digit domain, from the forms
// the driver API ("0000:18:00.0"), nvidia-smi ("00000000:18:00.0") and /proc use; nullopt when
// `text` is not one.
std::optional<std::string> normalize_bus_id(const std::string& text);

struct DeviceLane {
  std::string label;   // the GPU's index among the node's (nvidia-smi's), "0" where the driver lists none
  std::string bus_id;  // empty: the node lists no GPU, and this one lane takes every tenant
  std::string model;   // the driver's model name (empty where unknown)
  DeviceSpec spec;     // what the lane's policy plans for
};

// The DeviceSpec for a GPU model the driver names: h100 (SXM) or h200; h200 for any other model,
// with `why` saying so (as `concord run`'s default device).
DeviceSpec spec_for_model(const std::string& model, std::string* why = nullptr);

// concordd's --devices and --device-spec: `devices` is "all" (every GPU the driver lists; one
// lane taking every tenant where it lists none) or a comma list of indices (nvidia-smi's) and PCI
// bus ids; `spec_name` is "auto" (each GPU's model, spec_for_model), a built-in spec or a device
// JSON file for every lane. `notes` (when given) gets one line per lane for the log. Errors name
// the flag and the entry.
Result<std::vector<DeviceLane>> choose_lanes(const std::string& devices, const std::string& spec_name,
                                             const std::string& driver_root = "/proc/driver/nvidia",
                                             std::vector<std::string>* notes = nullptr);

// The lane of a tenant that names `bus_id` (empty: it could not tell): the lane of that GPU; the
// one lane of a daemon with one; else failed_precondition naming the GPU and the daemon's.
Result<size_t> lane_for(const std::vector<DeviceLane>& lanes, const std::string& bus_id);

// "name" (h100, h200), a device JSON file, or "auto": the model of the node's first GPU as the
// driver reports it under `driver_root` (spec_for_model); h200 where the driver lists none.
// `chosen` (when given) says which and why, for the log.
Result<DeviceSpec> daemon_device(const std::string& name_or_file, std::string* chosen = nullptr,
                                 const std::string& driver_root = "/proc/driver/nvidia");

}  // namespace concord::daemon
