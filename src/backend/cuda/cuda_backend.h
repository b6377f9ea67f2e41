// The CUDA backend: executes placements on a real GPU (docs/cuda_backend.md).
//  - persistent form: the elastic wrapper on a control block (exact SM set by %smid, TLP, range,
//    resize by writing the allowed bitmap and, to grow, launching again on the same control
//    block from another stream; preemption by the flag);
//  - native form: one CUDA block per logical block, on a green-context stream when the SM set is
//    not the whole GPU;
//  - fused: the fused wrapper for any two elastic bodies, compiled at run time (fusion_compiler.h).
// Completions: a completion thread polls the running dispatches' end events, reads their
// progress counters and queues the completions; advance() hands them to the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/chunk.h"
#include "backend/cuda/green_contexts.h"
#include "cuda/handles.h"
#include "backend/cuda/nvtx.h"
#include "concord/backend.h"
#include "concord/device/control.h"
#include "concord/placement_rule.h"
#include "concord/backend_factory.h"
#include "kernels/device/device_kernel.h"

namespace concord::cuda {

struct CudaBackendOptions {
  // The completion thread's pause after a sweep that found nothing (us).
  int sweep_pause_us = 4;
  // Longest wait for a control-block write or read (a stream stuck behind a hung kernel must not
  // hang the engine), and for the device to drain at teardown (then device state is leaked).
  double control_wait_s = 10;
  double teardown_wait_s = 5;
  // From CONCORD_CUDA_SWEEP_PAUSE_US; a bad value is reported on stderr and the default kept.
  static CudaBackendOptions from_env();
};

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(int device, uint64_t seed,
                                                     CudaBackendOptions options = CudaBackendOptions::from_env());
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  const DeviceSpec& device() const override { return spec_; }
  Capabilities capabilities(const KernelSpec& kernel) const override;
  Status prepare_tenant(TenantId tenant, const std::vector<const KernelSpec*>& kernels) override;
  // The shared rule (check_dispatch_resources), then what this machine needs: a device body for
  // each kernel, and for a fused pair the fusion compiler (NVRTC, CUDA's headers, a cache directory).
  Status can_implement(const DispatchRequest& request) const override;
  Status set_allocator(TenantId tenant, std::shared_ptr<DeviceAllocator> allocator) override;
  Status prepare_dispatch(const DispatchRequest& request) override;
  Status abort_all(Seconds grace) override;
  Status prepare_sm_set(const SmSet& sms, TenantId tenant) override;
  Status start_clock() override;
  Status dispatch(const DispatchRequest& request) override;
  Status set_sm_set(DispatchId dispatch, const SmSet& sms) override;
  Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override;
  Seconds now() const override;
  Result<std::vector<Completion>> advance(Seconds until) override;
  int running() const override { return active_.load(); }

  // False where green contexts cannot place work by SM (an old driver, or under MPS, where the
  // topology probe finds the groups' SMs overlapping): native launches then use the whole GPU.
  bool has_green_contexts() const { return green_ != nullptr; }
  GreenContextPool& green_contexts() { return *green_; }
  // The device instance that runs `spec`'s launches (made by prepare_tenant or the first dispatch
  // naming that spec); not_found before. Tests read its output and its block audit through it.
  Result<kernels::DeviceKernel*> prepared_kernel(const KernelSpec& spec) const;

 private:
  static constexpr int kControlPool = 1024;  // control blocks, reused
  static constexpr int kHelperStreams = 8;
  struct Part {
    kernels::DeviceKernel* kernel = nullptr;
    int variant = 0;
    BlockRange range;
    int parts_per_block = 1;
    int control = -1;  // index into the control pool (persistent form)
  };
  struct Running {
    DispatchId id;
    std::string label;  // "tenant 2 kernel 'hotspot' dispatch 17": what an error names
    std::string range_name;  // "tenant 2: hotspot": its NVTX ranges' message
    TenantRanges::RangeId range = 0;  // the NVTX range from its launch to its completion
    Placement placement;
    std::vector<Part> parts;
    std::vector<Event> ends;      // one per launch of this dispatch (grows add launches)
    Event start;
    cudaStream_t stream = nullptr;  // where its first launch went
    int grid = 0;
    int tlp = 0;
    SmSet tight_sms;   // where tight_tlp applies (persistent)
    int tight_tlp = 0;
    int tenant = 0;
    DispatchId after;  // stream-ordered behind this dispatch (DispatchRequest::after)
    // Set by the completion thread: found complete (no more grows or preempts apply), then the
    // completion (its error set when the dispatch failed), which advance() delivers.
    bool completing = false;
    std::optional<Completion> result;
  };

  CudaBackend() = default;
  // Replaces the nominal GPCs of spec_ with the measured ones (probe_gpcs), or says why not.
  Status use_measured_gpcs();
  // The device kernel of `spec`, prepared with `tenant`'s allocator the first time.
  Result<kernels::DeviceKernel*> kernel_for(const KernelSpec& spec, int tenant);
  // Waits for `stream` until `seconds` pass; device_error naming `what` if it is still busy.
  Status wait_stream(cudaStream_t stream, double seconds, const std::string& what) const;
  // Finds a running dispatch under the lock (the entry stays put: only advance() erases, on the
  // engine's thread, which is also the caller's).
  Result<Running*> find_running(DispatchId id, const char* op);
  Result<int> take_control(const BlockRange& range, const SmSet& sms, int tlp, const SmSet& tight_sms, int tight_tlp, int chunk,
                           cudaStream_t stream);
  Status write_control_field(int control, size_t offset, const void* data, size_t bytes, const Event& after);
  Result<device::ElasticControl> read_control(int control, const Event& after) const;
  Result<cudaStream_t> stream_for(const Running& r);
  // Loads every kernel function `kernel` may launch, so that no launch mid-run loads a module.
  Status load_functions(const kernels::DeviceKernel& kernel);
  // The CUDA stream priority of a Placement::priority: the device's greatest for > 0, its least
  // otherwise.
  int cuda_priority(int placement_priority) const;
  // A tenant's own stream at a Placement::priority level (prepare_tenant() creates both levels').
  Result<cudaStream_t> tenant_stream(int tenant, int placement_priority);
  Result<cudaStream_t> helper_stream();
  Status launch(Running& r, cudaStream_t stream);
  Seconds event_time(const Event& e) const;
  // Events are reused (engine thread only): creating and destroying two per dispatch costs the
  // driver more than recording them.
  Result<Event> take_event();
  void recycle(Running& r);
  // The completion thread's loop, and how it builds one completion (its own stream and pinned
  // buffer for the counter reads, so it never shares the engine thread's).
  void completion_loop();
  Result<Completion> build_completion(const Running& r);

  DeviceSpec spec_;
  CudaBackendOptions options_;
  std::map<int, std::shared_ptr<DeviceAllocator>> allocators_;  // by tenant
 public:
  // The device memory a kernel's buffers take, from its lowest byte to one past its highest, as
  // they were allocated (kernel_for): an l2_persist placement's access-policy window.
  struct Span {
    uintptr_t begin = 0;
    uintptr_t end = 0;
  };

 private:
  std::map<const kernels::DeviceKernel*, Span> spans_;
  size_t persisting_l2_bytes_ = 0;  // L2's persisting carve-out once set (0: not yet)
  size_t max_window_bytes_ = 0;     // cudaDevAttrMaxAccessPolicyWindowSize, read with the carve-out
  // Sets `stream`'s access-policy window to persisting hits over `kernel`'s span, or none (null).
  Status set_persist_window(cudaStream_t stream, const kernels::DeviceKernel* kernel);
  HostBuffer<int32_t> preempt_one_;  // pinned 1: the preempt flag's source for abort_all's writes
  std::vector<Stream> abort_streams_;  // abort_all's writes behind a dispatch's start
  uint64_t seed_ = 1;
  std::shared_ptr<GreenContextPool> green_;  // the process's pool (GreenContextPool::shared)
  std::map<std::string, std::unique_ptr<kernels::DeviceKernel>> kernels_;  // by name:size
  std::map<int, Stream> tenant_streams_;
  int least_priority_ = 0;     // cudaDeviceGetStreamPriorityRange: the device's least stream priority
  int greatest_priority_ = 0;  // and its greatest (a lower number)
  std::vector<Stream> helper_streams_;
  size_t next_helper_ = 0;
  Stream control_stream_;
  DeviceBuffer<device::ElasticControl> controls_;
  std::vector<int> free_controls_;
  HostBuffer<device::ElasticControl> staging_;  // pinned host copy of one control block (field writes, reads)
  HostBuffer<device::ElasticControl> images_;   // pinned upload image per control block
  // Dispatches from launch until advance() delivered their completion; a list, so an entry stays
  // put while the completion thread works on it without the lock. Guarded by mu_.
  std::list<Running> running_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;       // wakes the completion thread: a dispatch, or stop
  std::atomic<int> active_{0};            // entries in running_
  std::atomic<int> completed_{0};         // entries with a result not yet delivered
  std::atomic<uint64_t> changes_{0};      // bumped when running_ gains an entry or an entry a launch
  std::atomic<bool> stop_{false};
  std::thread completer_;
  Status completer_error_;  // why the completion thread stopped early (guarded by mu_)
  std::atomic<bool> completer_failed_{false};  // completer_error_ is set
  int device_ = 0;
  bool opened_ = false;  // a device was chosen (cudaSetDevice): teardown has something to drain
  Stream completer_stream_;
  HostBuffer<uint64_t> completer_done_;  // pinned: one progress counter read back
  Event origin_;
  std::chrono::steady_clock::time_point wall_origin_;
  std::vector<Event> event_pool_;
  TenantRanges ranges_;
};

}  // namespace concord::cuda

namespace concord::cuda {
// Makes register_cuda_backend_factory() point at CudaBackend; call once at start (the CLI does).
void register_backend();
// What `device` reports about itself (cudaDeviceProp and attributes), as spec_from_attributes
// takes it; topology nominal. The profiler and the backend both identify the GPU this way.
Result<DeviceSpec> probe_device_spec(int device);
}  // namespace concord::cuda
