// The CUDA backend: executes placements on a real GPU (docs/cuda_backend.md).
//  - persistent form: the elastic wrapper on a control block (exact SM set by %smid, TLP, range,
//    resize by writing the allowed bitmap and, to grow, launching again on the same control
//    block from another stream; preemption by the flag);
//  - native form: one CUDA block per logical block, on a green-context stream when the SM set is
//    not the whole GPU;
//  - fused: the fused wrapper for instantiated pairs.
// Completions are found by polling the dispatches' end events in advance().
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/chunk.h"
#include "backend/cuda/green_contexts.h"
#include "backend/cuda/handles.h"
#include "concord/backend.h"
#include "concord/device/control.h"
#include "kernels/device/device_kernel.h"

namespace concord::cuda {

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(int device, uint64_t seed);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  const DeviceSpec& device() const override { return spec_; }
  Capabilities capabilities(const KernelSpec& kernel) const override;
  Status prepare(const Workload& workload) override;
  Status prepare_sm_set(const SmSet& sms, TenantId tenant) override;
  Status start_clock() override;
  Status dispatch(const DispatchRequest& request) override;
  Status set_sm_set(DispatchId dispatch, const SmSet& sms) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override;
  Seconds now() const override;
  Result<std::vector<Completion>> advance(Seconds until) override;
  int running() const override { return static_cast<int>(running_.size()); }

  GreenContextPool& green_contexts() { return *green_; }

 private:
  struct Part {
    kernels::DeviceKernel* kernel = nullptr;
    int variant = 0;
    BlockRange range;
    int parts_per_block = 1;
    int control = -1;  // index into the control pool (persistent form)
  };
  struct Running {
    DispatchId id;
    Placement placement;
    std::vector<Part> parts;
    std::vector<Event> ends;      // one per launch of this dispatch (grows add launches)
    Event start;
    int grid = 0;
    int tlp = 0;
    int tenant = 0;
  };

  CudaBackend() = default;
  Result<kernels::DeviceKernel*> kernel_for(const KernelSpec& spec);
  Result<int> take_control(const BlockRange& range, const SmSet& sms, int tlp, int chunk, cudaStream_t stream);
  Status write_control_field(int control, size_t offset, const void* data, size_t bytes, const Event& after);
  Result<device::ElasticControl> read_control(int control, const Event& after) const;
  Result<cudaStream_t> stream_for(const Running& r);
  Result<cudaStream_t> helper_stream();
  Status launch(Running& r, cudaStream_t stream);
  Seconds event_time(const Event& e) const;

  DeviceSpec spec_;
  uint64_t seed_ = 1;
  std::unique_ptr<GreenContextPool> green_;
  std::map<std::string, std::unique_ptr<kernels::DeviceKernel>> kernels_;  // by name:size
  std::map<int, Stream> tenant_streams_;
  std::vector<Stream> helper_streams_;
  size_t next_helper_ = 0;
  Stream control_stream_;
  DeviceBuffer<device::ElasticControl> controls_;
  std::vector<int> free_controls_;
  device::ElasticControl* staging_ = nullptr;  // pinned host copy of one control block (field writes, reads)
  device::ElasticControl* images_ = nullptr;   // pinned upload image per control block
  std::vector<Running> running_;
  Event origin_;
  std::chrono::steady_clock::time_point wall_origin_;
};

}  // namespace concord::cuda

namespace concord::cuda {
// Makes register_cuda_backend_factory() point at CudaBackend; call once at start (the CLI does).
void register_backend();
}  // namespace concord::cuda
