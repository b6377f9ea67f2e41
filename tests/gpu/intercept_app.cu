// A small CUDA program for the interception library's tests (tests/gpu/intercept_test.cpp): it
// must give the same, correct results run plain and under LD_PRELOAD=libconcord_intercept.so.
//
//   concord_intercept_app chains   several streams (of different priorities), each a chain of
//                                  kernels with data dependencies (every step an affine map mod
//                                  2^32, so any reordering changes the result), half launched by
//                                  the runtime (<<<>>>) and half by cuLaunchKernel found through
//                                  cudaGetDriverEntryPointByVersion (the hooked cuGetProcAddress);
//                                  a thread on its per-thread default stream; a cross-stream event
//                                  dependency; a captured CUDA graph launched three times; results
//                                  read back with cudaMemcpy and checked against the CPU. Each
//                                  kernel also logs its (stream, step) as it starts, and the order
//                                  on every stream is checked.
//   concord_intercept_app smid N   one probe launch of N blocks; prints the SMs its blocks ran on.
//   concord_intercept_app room     launches of a kernel that notes, per SM, how many of its blocks
//                                  were resident at once; prints the SMs used, the peak blocks per
//                                  SM and a checksum of the work (the same with and without caps).
//
// Prints one JSON line; exits 0 when every check passed, 1 when one failed, 2 on a CUDA error.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kStreams = 4;
constexpr int kSteps = 40;       // kernels per stream chain
constexpr int kGraphSteps = 5;   // kernels in the captured graph
constexpr int kGraphLaunches = 3;
constexpr int kThreadSteps = 20;  // kernels on the helper thread's per-thread default stream
constexpr int kN = 1 << 16;
constexpr int kLogSlots = 4096;

#define CHECK(call)                                                                                       \
  do {                                                                                                    \
    const cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) {                                                                              \
      std::printf("{\"ok\": false, \"error\": \"%s:%d: %s: %s\"}\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      std::exit(2);                                                                                       \
    }                                                                                                     \
  } while (0)
#define CHECK_CU(call)                                                                                    \
  do {                                                                                                    \
    const CUresult r_ = (call);                                                                           \
    if (r_ != CUDA_SUCCESS) {                                                                             \
      std::printf("{\"ok\": false, \"error\": \"%s:%d: %s: CUresult %d\"}\n", __FILE__, __LINE__, #call, static_cast<int>(r_)); \
      std::exit(2);                                                                                       \
    }                                                                                                     \
  } while (0)

__host__ __device__ uint32_t step_of(uint32_t x, uint32_t stream, uint32_t step) {
  return x * (2654435761u + 2u * step) + (stream * 977u + step);
}

// A module global the host sets (cudaMemcpyToSymbol) before any launch: a kernel released into a
// green context must still read the value written in the primary context, or its results are wrong.
constexpr uint32_t kSalt = 0x9e3779b9u;
__device__ uint32_t g_salt = 0;

// One step of a chain; block 0 logs (stream, step) when it starts.
__global__ void step_kernel(uint32_t* x, int n, uint32_t stream, uint32_t step, unsigned* log_count, unsigned* log) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned slot = atomicAdd(log_count, 1u);
    if (slot < kLogSlots) log[slot] = (stream << 16) | step;
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = step_of(x[i] + static_cast<uint32_t>(i) + g_salt, stream, step);
  }
}

__global__ void add_kernel(uint32_t* dst, const uint32_t* src, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] += src[i];
}

__global__ void smid_kernel(int* sm_of_block) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0) sm_of_block[blockIdx.x] = static_cast<int>(sm);
  const long long until = clock64() + 200000;
  while (clock64() < until) {
  }
}

// Each block: counts itself in on its SM, keeps the peak, works for a while (a sum into `out`,
// which no padding may change), counts itself out. 64 threads, no shared memory of its own: 32
// blocks of it fit on an SM unless something caps them.
__global__ void residency_kernel(unsigned* resident, unsigned* peak, unsigned* used, uint32_t* out) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  sm &= 1023u;
  if (threadIdx.x == 0) {
    const unsigned now = atomicAdd(&resident[sm], 1u) + 1u;
    atomicMax(&peak[sm], now);
    used[sm] = 1u;
  }
  __syncthreads();
  uint32_t acc = blockIdx.x * 2654435761u + threadIdx.x;
  const long long until = clock64() + 100000;
  while (clock64() < until) acc = acc * 1664525u + 1013904223u;
  (void)acc;
  atomicAdd(out, blockIdx.x + threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) atomicSub(&resident[sm], 1u);
}

int run_room() {
  constexpr int kBlocks = 132 * 32;
  constexpr int kLaunches = 20;
  unsigned *resident = nullptr, *peak = nullptr, *used = nullptr;
  uint32_t* out = nullptr;
  CHECK(cudaMalloc(&resident, 1024 * sizeof(unsigned)));
  CHECK(cudaMalloc(&peak, 1024 * sizeof(unsigned)));
  CHECK(cudaMalloc(&used, 1024 * sizeof(unsigned)));
  CHECK(cudaMalloc(&out, sizeof(uint32_t)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Under the library the stream's creation registered the process: the daemon's lease (which
  // yields to the test's LC tenant) reaches it before the first launch.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(cudaMemsetAsync(resident, 0, 1024 * sizeof(unsigned), stream));
  CHECK(cudaMemsetAsync(peak, 0, 1024 * sizeof(unsigned), stream));
  CHECK(cudaMemsetAsync(used, 0, 1024 * sizeof(unsigned), stream));
  CHECK(cudaMemsetAsync(out, 0, sizeof(uint32_t), stream));
  for (int i = 0; i < kLaunches; ++i) residency_kernel<<<kBlocks, 64, 0, stream>>>(resident, peak, used, out);
  CHECK(cudaGetLastError());
  std::vector<unsigned> host_peak(1024), host_used(1024);
  uint32_t sum = 0;
  CHECK(cudaMemcpyAsync(host_peak.data(), peak, 1024 * sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaMemcpyAsync(host_used.data(), used, 1024 * sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaMemcpyAsync(&sum, out, sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  unsigned sms = 0, most = 0;
  for (int s = 0; s < 1024; ++s) {
    sms += host_used[static_cast<size_t>(s)] ? 1u : 0u;
    most = std::max(most, host_peak[static_cast<size_t>(s)]);
  }
  // The sum every block adds: kLaunches x sum over blocks and threads of (block + thread), mod 2^32.
  uint64_t want = 0;
  for (int b = 0; b < kBlocks; ++b) want += static_cast<uint64_t>(b) * 64 + 63 * 64 / 2;
  want = (want * kLaunches) & 0xffffffffu;
  const bool ok = sum == static_cast<uint32_t>(want);
  std::printf("{\"ok\": %s, \"sms_used\": %u, \"peak_blocks_per_sm\": %u, \"checksum\": %u}\n", ok ? "true" : "false", sms,
              most, sum);
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(resident));
  CHECK(cudaFree(peak));
  CHECK(cudaFree(used));
  CHECK(cudaFree(out));
  return ok ? 0 : 1;
}

uint32_t reference_step(uint32_t x, int i, uint32_t stream, uint32_t step) {
  return step_of(x + static_cast<uint32_t>(i) + kSalt, stream, step);
}

int run_smid(int blocks) {
  int* sms = nullptr;
  CHECK(cudaMalloc(&sms, sizeof(int) * blocks));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  smid_kernel<<<blocks, 64, 0, stream>>>(sms);
  CHECK(cudaGetLastError());
  std::vector<int> host(static_cast<size_t>(blocks));
  CHECK(cudaMemcpyAsync(host.data(), sms, sizeof(int) * blocks, cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::vector<bool> seen(1024, false);
  for (int s : host) {
    if (s >= 0 && s < 1024) seen[static_cast<size_t>(s)] = true;
  }
  std::string list;
  for (int s = 0; s < 1024; ++s) {
    if (seen[static_cast<size_t>(s)]) list += (list.empty() ? "" : ",") + std::to_string(s);
  }
  std::printf("{\"ok\": true, \"sms\": [%s]}\n", list.c_str());
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(sms));
  return 0;
}

int run_chains() {
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // The driver's cuLaunchKernel as the runtime finds it (through cuGetProcAddress).
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn) {
    std::printf("{\"ok\": false, \"error\": \"cuLaunchKernel not found through cudaGetDriverEntryPointByVersion\"}\n");
    return 2;
  }
  auto driver_launch = reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                     unsigned, CUstream, void**, void**)>(fn);
  cudaFunction_t step_function;
  CHECK(cudaGetFuncBySymbol(&step_function, reinterpret_cast<const void*>(&step_kernel)));

  unsigned* log_count = nullptr;
  unsigned* log = nullptr;
  CHECK(cudaMemcpyToSymbol(g_salt, &kSalt, sizeof(kSalt)));
  CHECK(cudaMalloc(&log_count, sizeof(unsigned)));
  CHECK(cudaMalloc(&log, sizeof(unsigned) * kLogSlots));
  CHECK(cudaMemset(log_count, 0, sizeof(unsigned)));

  std::vector<uint32_t> init(kN);
  std::vector<cudaStream_t> streams(kStreams);
  std::vector<uint32_t*> x(kStreams + 2);
  for (int s = 0; s < kStreams; ++s) {
    CHECK(cudaStreamCreateWithPriority(&streams[static_cast<size_t>(s)], cudaStreamNonBlocking, s % 2 ? greatest : least));
  }
  for (size_t b = 0; b < x.size(); ++b) {
    CHECK(cudaMalloc(&x[b], sizeof(uint32_t) * kN));
    for (int i = 0; i < kN; ++i) init[static_cast<size_t>(i)] = static_cast<uint32_t>(b * 131 + static_cast<size_t>(i));
    CHECK(cudaMemcpy(x[b], init.data(), sizeof(uint32_t) * kN, cudaMemcpyHostToDevice));
  }
  int launches = 0;
  // The chains, interleaved across streams as an application would issue them.
  for (int k = 0; k < kSteps; ++k) {
    for (int s = 0; s < kStreams; ++s) {
      uint32_t* buf = x[static_cast<size_t>(s)];
      const uint32_t sid = static_cast<uint32_t>(s), step = static_cast<uint32_t>(k);
      const int n = kN;
      cudaStream_t st = streams[static_cast<size_t>(s)];
      if (k % 2 == 0) {
        step_kernel<<<64, 128, 0, st>>>(buf, n, sid, step, log_count, log);
        CHECK(cudaGetLastError());
      } else {
        void* params[] = {&buf, const_cast<int*>(&n), const_cast<uint32_t*>(&sid), const_cast<uint32_t*>(&step), &log_count, &log};
        CHECK_CU(driver_launch(reinterpret_cast<CUfunction>(step_function), 64, 1, 1, 128, 1, 1, 0, st, params, nullptr));
      }
      ++launches;
    }
  }
  // Stream 1 adds stream 0's result once stream 0's chain is done (an event across streams).
  cudaEvent_t chain0_done;
  CHECK(cudaEventCreateWithFlags(&chain0_done, cudaEventDisableTiming));
  CHECK(cudaEventRecord(chain0_done, streams[0]));
  CHECK(cudaStreamWaitEvent(streams[1], chain0_done, 0));
  add_kernel<<<64, 128, 0, streams[1]>>>(x[1], x[0], kN);
  CHECK(cudaGetLastError());
  ++launches;

  // A thread's own chain on its per-thread default stream.
  const uint32_t thread_sid = kStreams;
  std::thread worker([&] {
    for (int k = 0; k < kThreadSteps; ++k) {
      step_kernel<<<64, 128, 0, cudaStreamPerThread>>>(x[kStreams], kN, thread_sid, static_cast<uint32_t>(k), log_count, log);
      CHECK(cudaGetLastError());
    }
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  });
  worker.join();
  launches += kThreadSteps;

  // A graph of kGraphSteps steps (launches into a capturing stream pass through untouched),
  // launched kGraphLaunches times on stream 2 after its chain.
  const uint32_t graph_sid = kStreams + 1;
  cudaStream_t capture_stream;
  CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
  CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < kGraphSteps; ++k) {
    step_kernel<<<64, 128, 0, capture_stream>>>(x[kStreams + 1], kN, graph_sid, static_cast<uint32_t>(k), log_count, log);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaStreamEndCapture(capture_stream, &graph));
  CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));
  for (int g = 0; g < kGraphLaunches; ++g) {
    CHECK(cudaGraphLaunch(graph_exec, streams[2]));
    ++launches;
  }

  // Read back (cudaMemcpy on the legacy stream waits for every blocking stream; the streams
  // here are non-blocking, so synchronise the device first).
  CHECK(cudaDeviceSynchronize());
  std::vector<std::vector<uint32_t>> got(x.size(), std::vector<uint32_t>(kN));
  for (size_t b = 0; b < x.size(); ++b) {
    CHECK(cudaMemcpy(got[b].data(), x[b], sizeof(uint32_t) * kN, cudaMemcpyDeviceToHost));
  }
  unsigned logged = 0;
  std::vector<unsigned> order(kLogSlots);
  CHECK(cudaMemcpy(&logged, log_count, sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(order.data(), log, sizeof(unsigned) * kLogSlots, cudaMemcpyDeviceToHost));

  // The CPU's answer.
  std::vector<std::vector<uint32_t>> want(x.size(), std::vector<uint32_t>(kN));
  for (size_t b = 0; b < x.size(); ++b) {
    for (int i = 0; i < kN; ++i) want[b][static_cast<size_t>(i)] = static_cast<uint32_t>(b * 131 + static_cast<size_t>(i));
  }
  for (int s = 0; s < kStreams; ++s) {
    for (int k = 0; k < kSteps; ++k) {
      for (int i = 0; i < kN; ++i) {
        uint32_t& v = want[static_cast<size_t>(s)][static_cast<size_t>(i)];
        v = reference_step(v, i, static_cast<uint32_t>(s), static_cast<uint32_t>(k));
      }
    }
  }
  for (int i = 0; i < kN; ++i) want[1][static_cast<size_t>(i)] += want[0][static_cast<size_t>(i)];
  for (int k = 0; k < kThreadSteps; ++k) {
    for (int i = 0; i < kN; ++i) {
      uint32_t& v = want[kStreams][static_cast<size_t>(i)];
      v = reference_step(v, i, thread_sid, static_cast<uint32_t>(k));
    }
  }
  for (int g = 0; g < kGraphLaunches; ++g) {
    for (int k = 0; k < kGraphSteps; ++k) {
      for (int i = 0; i < kN; ++i) {
        uint32_t& v = want[kStreams + 1][static_cast<size_t>(i)];
        v = reference_step(v, i, graph_sid, static_cast<uint32_t>(k));
      }
    }
  }
  int wrong_buffers = 0;
  uint64_t checksum = 1469598103934665603ull;
  for (size_t b = 0; b < x.size(); ++b) {
    if (got[b] != want[b]) ++wrong_buffers;
    for (uint32_t v : got[b]) checksum = (checksum ^ v) * 1099511628211ull;
  }
  // Stream order: the steps each chain logged must come in increasing order.
  const unsigned expected_logs = kStreams * kSteps + kThreadSteps + kGraphSteps * kGraphLaunches;
  std::vector<int> last(kStreams + 2, -1);
  int order_violations = 0;
  std::vector<int> graph_count(kGraphSteps, 0);
  for (unsigned j = 0; j < logged && j < kLogSlots; ++j) {
    const unsigned sid = order[j] >> 16, step = order[j] & 0xffff;
    if (sid >= last.size()) {
      ++order_violations;
      continue;
    }
    if (sid == graph_sid) {
      // Each graph launch runs its steps in order: step k's n-th run follows step k-1's n-th.
      if (step >= kGraphSteps) {
        ++order_violations;
        continue;
      }
      if (step > 0 && graph_count[step] >= graph_count[step - 1]) ++order_violations;
      // and step 0's n-th run follows the last step's (n-1)-th.
      if (step == 0 && graph_count[0] > graph_count[kGraphSteps - 1]) ++order_violations;
      ++graph_count[step];
      continue;
    }
    if (static_cast<int>(step) <= last[sid]) ++order_violations;
    last[sid] = static_cast<int>(step);
  }
  const bool ok = wrong_buffers == 0 && order_violations == 0 && logged == expected_logs;
  std::printf("{\"ok\": %s, \"wrong_buffers\": %d, \"order_violations\": %d, \"logged\": %u, \"expected_logged\": %u, "
              "\"launches_made\": %d, \"checksum\": \"%016llx\"}\n",
              ok ? "true" : "false", wrong_buffers, order_violations, logged, expected_logs, launches,
              static_cast<unsigned long long>(checksum));

  CHECK(cudaGraphExecDestroy(graph_exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(capture_stream));
  CHECK(cudaEventDestroy(chain0_done));
  for (cudaStream_t s : streams) CHECK(cudaStreamDestroy(s));
  for (uint32_t* b : x) CHECK(cudaFree(b));
  CHECK(cudaFree(log));
  CHECK(cudaFree(log_count));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "chains";
  if (mode == "chains") return run_chains();
  if (mode == "smid") return run_smid(argc > 2 ? std::atoi(argv[2]) : 264);
  if (mode == "room") return run_room();
  std::fprintf(stderr, "usage: %s [chains | smid BLOCKS | room]\n", argv[0]);
  return 2;
}
