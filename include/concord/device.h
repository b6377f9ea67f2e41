// DeviceSpec: what Concord knows about one GPU: limits, peaks and topology (SM -> TPC -> GPC).
#pragma once

#include <string>
#include <vector>

#include "concord/sm_set.h"
#include "concord/status.h"

namespace concord {

// The most register-file sub-partitions an SM may be described with (4 on every GPU since Volta).
inline constexpr int kMaxRegisterSubPartitions = 8;

struct SmLimits {
  int max_threads = 2048;
  int max_registers = 65536;
  int max_shared_bytes = 233472;  // 228 KiB per SM on Hopper
  int max_blocks = 32;
  int register_alloc_unit = 256;  // registers are allocated per warp in units of this many
  // The register file is split evenly among this many sub-partitions (4 since Volta); a warp's
  // registers come from one of them, so an SM holds max_registers / sub_partitions / (a warp's
  // registers) warps in each.
  int register_sub_partitions = 4;
  // Limits of one block (not of the SM).
  int max_threads_per_block = 1024;
  int max_registers_per_thread = 255;
  int max_shared_bytes_per_block = 232448;  // 227 KiB on Hopper, after opting in
};

struct DeviceSpec {
  std::string name;             // "H100 SXM", "H200"; a real device's own name ("NVIDIA H200")
  std::string driver;           // a real device's driver version ("580.159.04"); empty for built-in specs
  int sm_count = 0;
  SmLimits sm;
  double l2_bytes = 0;
  double dram_bytes_per_s = 0;  // peak DRAM bandwidth
  double fp32_flops = 0;        // peak FP32 FLOP/s (non-tensor)
  double tensor_flops = 0;      // peak dense FP16/BF16 tensor FLOP/s
  double clock_hz = 0;          // peak SM clock
  double memory_clock_hz = 0;   // peak memory clock; 0 where not known (built-in specs)
  // As the backend reports them (every results file carries them): "sim" on the simulator, empty
  // where a backend cannot tell.
  std::string driver_version;       // the NVIDIA driver, "580.95.05"
  std::string cuda_version;         // the CUDA runtime the backend was built with, "13.0"
  std::string cuda_driver_version;  // the newest CUDA the driver supports, "13.0"
  // Topology: tpc_of_sm[s] and gpc_of_sm[s] for each SM id s. Two SMs per TPC on Hopper.
  std::vector<int> tpc_of_sm;
  std::vector<int> gpc_of_sm;

  int tpc_count() const;
  int gpc_count() const;
  SmSet all_sms() const { return SmSet::all(sm_count); }
  SmSet sms_of_tpc(int tpc) const;
  SmSet sms_of_gpc(int gpc) const;
  // The smallest TPC-granular superset of `sms` (what a green context can give).
  SmSet round_up_to_tpcs(const SmSet& sms) const;
  // True when every GPC has at least one SM in `sms`.
  bool spans_all_gpcs(const SmSet& sms) const;
  // Checks internal consistency: counts, topology vectors, positive peaks.
  Status validate() const;
};

// What a device reports about itself (cudaDeviceProp and device attributes): the CUDA backend
// fills it, spec_from_attributes() turns it into a DeviceSpec, so any GPU gets its own figures.
struct DeviceAttributes {
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int max_threads_per_sm = 0;
  int max_registers_per_sm = 0;
  int max_shared_bytes_per_sm = 0;
  int max_blocks_per_sm = 0;
  int max_threads_per_block = 0;
  int max_shared_bytes_per_block_optin = 0;
  int clock_khz = 0;          // SM clock (peak)
  int memory_clock_khz = 0;   // memory clock (peak)
  int memory_bus_bits = 0;    // memory bus width
};
// Peaks derived from the attributes: DRAM bandwidth = 2 (double data rate) x memory clock x bus
// width; FP32 = SMs x FP32 lanes per SM (by compute capability) x 2 (FMA) x clock; dense FP16
// tensor = SMs x tensor FLOP per clock per SM (by compute capability) x clock. Topology nominal
// (8 GPCs, 2 SMs per TPC) until the backend probes it. An attribute that is missing (0) or a
// compute capability without known per-SM rates is an error naming it: no figure is guessed.
Result<DeviceSpec> spec_from_attributes(const DeviceAttributes& a);

// Built-in specs. Topology is the nominal layout (8 GPCs, 2 SMs per TPC); the CUDA backend's
// probe replaces it with the measured one.
DeviceSpec h100_sxm_spec();
DeviceSpec h200_spec();
// "h100" / "h100-sxm" / "h200", case-insensitive.
Result<DeviceSpec> builtin_device(const std::string& name);
// A JSON file: {"base": "h200", ...fields to override...} or a complete spec.
Result<DeviceSpec> load_device_file(const std::string& path);

}  // namespace concord
