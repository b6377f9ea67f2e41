// A driver-API program for the interception library's CPU tests (tests/standin/standin_test.cpp):
// it runs on the stand-in libcuda.so.1, plain or under LD_PRELOAD=libconcord_intercept.so, and
// must give the same, correct results either way.
//
//   concord_standin_app MODE [key=value ...]
//
//   chains      streams of different priorities, each a chain of dependent kernels (affine maps,
//               so any reordering changes the result), launched by the linked cuLaunchKernel, by
//               the pointer cuGetProcAddress_v2 returns and by cuLaunchKernelEx; a cross-stream
//               event; a thread on its per-thread default stream; a captured graph launched
//               three times; a cooperative launch. Results checked against the CPU.
//   lc          an LC service: requests of `kernels` kernels on one stream, each marked with
//               concord_request_begin/end (when the library is there), synchronised at its end;
//               with host_us, each kernel but the last synchronised and followed by that much host
//               work (a request whose host steps come between its kernels)
//   be          a BE loop of `launches` kernels (or for `seconds`), synchronising every `sync_every`
//   room        launches of a kernel that notes its blocks' residency per SM; the sum it computes
//   capture     a stream captured (mode=global|relaxed|thread_local) while a side thread
//               launches on another stream; the graph launched `graph_launches` times; with
//               before=N, N launches on the stream just before its capture begins
//   ptsz        threads launching on their per-thread default streams, both ways
//   procaddress cuGetProcAddress (both ABIs) and dlsym lookups; a launch through each pointer
//   accumulate  `launches` launches of x += 1 on one stream (each must run exactly once)
//   crowd       `threads` threads each making `launches` launches of x += 1 on one stream they all
//               share and as many on a stream of its own, with no synchronisation until the end
//   eager       `hz` small launches a second for `seconds`, synchronising every tenth
//   devices     launches on device 0, then on device 1
//   churn       streams and events made, used and destroyed again and again (at priorities 0 and
//               -5 in turn); with drain=1 each stream synchronised before it is destroyed, so that
//               its handle comes back for the very next stream
//   capture_legacy  a blocking stream captured while the program launches on the legacy stream,
//               which would join the capture: the launch is refused and the capture invalidated
//   vmm         a kernel over memory from cuMemCreate/cuMemMap, and over pool allocations
//   memory      `count` allocations of `chunk` bytes (default 8 of 1 MiB) through `path` (alloc,
//               pitch, managed, async, async_ptsz, pool, pool_ptsz, vmm), from `threads` threads
//               at once (each making `count`), each going on until one is refused; cuMemGetInfo
//               (v2 and v1) before, while they are held and after they are freed. With vmm, each
//               handle is mapped `maps` times (default 1) and retained and released once more;
//               with ready=FILE, FILE is made while they are held and they are kept for hold_ms
//               (a test kills the program there)
//
// Prints one JSON line; exits 0 when every check passed, 1 when one failed, 2 on a CUDA error.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "concord/intercept.h"

// Present only under the preloaded library.
extern "C" int concord_request_begin(void) __attribute__((weak));
extern "C" int concord_request_end(void) __attribute__((weak));

namespace {

[[noreturn]] void die(const char* what, CUresult r, int line) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::printf("{\"ok\": false, \"error\": \"line %d: %s: %s\"}\n", line, what, name ? name : "?");
  std::fflush(stdout);
  std::_Exit(2);
}
#define CU(call)                                  \
  do {                                            \
    const CUresult r_ = (call);                   \
    if (r_ != CUDA_SUCCESS) die(#call, r_, __LINE__); \
  } while (0)

struct Args {
  std::map<std::string, std::string> kv;
  long get(const std::string& k, long fallback) const {
    auto it = kv.find(k);
    return it == kv.end() ? fallback : std::strtol(it->second.c_str(), nullptr, 10);
  }
  std::string str(const std::string& k, const std::string& fallback) const {
    auto it = kv.find(k);
    return it == kv.end() ? fallback : it->second;
  }
};

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**,
                              void**);
using SyncFn = CUresult (*)(CUstream);

constexpr const char* kImage = "standin:standin_affine,standin_add,standin_spin,standin_log,standin_residency,standin_heavy";

struct Gpu {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUlibrary library = nullptr;
  CUfunction affine = nullptr, add = nullptr, spin = nullptr, log = nullptr, residency = nullptr;
  CUkernel k_affine = nullptr, k_spin = nullptr, k_residency = nullptr;
};

Gpu open_gpu(int ordinal) {
  Gpu g;
  CU(cuInit(0));
  CU(cuDeviceGet(&g.device, ordinal));
  CU(cuDevicePrimaryCtxRetain(&g.ctx, g.device));
  CU(cuCtxSetCurrent(g.ctx));
  CU(cuModuleLoadData(&g.module, kImage));
  CU(cuModuleGetFunction(&g.affine, g.module, "standin_affine"));
  CU(cuModuleGetFunction(&g.add, g.module, "standin_add"));
  CU(cuModuleGetFunction(&g.spin, g.module, "standin_spin"));
  CU(cuModuleGetFunction(&g.log, g.module, "standin_log"));
  CU(cuModuleGetFunction(&g.residency, g.module, "standin_residency"));
  CU(cuLibraryLoadData(&g.library, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CU(cuLibraryGetKernel(&g.k_affine, g.library, "standin_affine"));
  CU(cuLibraryGetKernel(&g.k_spin, g.library, "standin_spin"));
  CU(cuLibraryGetKernel(&g.k_residency, g.library, "standin_residency"));
  return g;
}

// Kernel launches, with the catalogue's parameter lists.
CUresult affine(LaunchFn fn, CUfunction f, CUstream s, CUdeviceptr x, uint32_t n, uint32_t mul, uint32_t add, uint32_t tag,
                uint64_t ns, unsigned grid = 4, unsigned block = 128) {
  void* p[] = {&x, &n, &mul, &add, &tag, &ns};
  return fn(f, grid, 1, 1, block, 1, 1, 0, s, p, nullptr);
}
CUresult spin(LaunchFn fn, CUfunction f, CUstream s, uint32_t tag, uint64_t ns, unsigned grid, unsigned block = 128,
              unsigned shared = 0) {
  void* p[] = {&tag, &ns};
  return fn(f, grid, 1, 1, block, 1, 1, shared, s, p, nullptr);
}

uint32_t affine_ref(uint32_t x, uint32_t mul, uint32_t add) { return x * mul + add; }
uint32_t mul_of(uint32_t stream, uint32_t step) { return 2654435761u + 2u * step + 2u * stream; }
uint32_t add_of(uint32_t stream, uint32_t step) { return stream * 977u + step; }

uint64_t fnv(const std::vector<uint32_t>& v, uint64_t h = 1469598103934665603ull) {
  for (uint32_t x : v) {
    for (int b = 0; b < 4; ++b) h = (h ^ ((x >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

CUdeviceptr upload(const std::vector<uint32_t>& host) {
  CUdeviceptr d = 0;
  CU(cuMemAlloc(&d, host.size() * sizeof(uint32_t)));
  CU(cuMemcpyHtoD(d, host.data(), host.size() * sizeof(uint32_t)));
  return d;
}
std::vector<uint32_t> download(CUdeviceptr d, size_t n) {
  std::vector<uint32_t> host(n);
  CU(cuMemcpyDtoH(host.data(), d, n * sizeof(uint32_t)));
  return host;
}

void request_mark(bool begin) {
  if (begin && concord_request_begin) concord_request_begin();
  if (!begin && concord_request_end) concord_request_end();
}

// ---- chains ----------------------------------------------------------------------------------

int run_chains(const Args& a) {
  const int streams = static_cast<int>(a.get("streams", 4));
  const int steps = static_cast<int>(a.get("steps", 24));
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 20000));
  const uint32_t n = 2048;
  Gpu g = open_gpu(0);
  void* found = nullptr;
  CUdriverProcAddressQueryResult status{};
  CU(cuGetProcAddress("cuLaunchKernel", &found, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  const auto looked_up = reinterpret_cast<LaunchFn>(found);
  int launches = 0;

  std::vector<CUstream> s(static_cast<size_t>(streams));
  const int priorities[] = {0, -5, -2, 0};
  for (int i = 0; i < streams; ++i) {
    if (i == 0) {
      CU(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
    } else {
      CU(cuStreamCreateWithPriority(&s[static_cast<size_t>(i)], CU_STREAM_NON_BLOCKING, priorities[i % 4]));
    }
  }
  std::vector<std::vector<uint32_t>> ref(static_cast<size_t>(streams));
  std::vector<CUdeviceptr> x(static_cast<size_t>(streams));
  for (int i = 0; i < streams; ++i) {
    ref[static_cast<size_t>(i)].resize(n);
    for (uint32_t k = 0; k < n; ++k) ref[static_cast<size_t>(i)][k] = k * 7u + static_cast<uint32_t>(i);
    x[static_cast<size_t>(i)] = upload(ref[static_cast<size_t>(i)]);
  }
  CUevent joined = nullptr, back = nullptr;
  CU(cuEventCreate(&joined, CU_EVENT_DISABLE_TIMING));
  CU(cuEventCreate(&back, CU_EVENT_DISABLE_TIMING));
  const int join_step = steps / 2;
  for (int step = 0; step < steps; ++step) {
    if (step == join_step && streams > 1) {
      // Stream 1 adds stream 0's buffer as it stood after join_step steps; stream 0 goes on only
      // after that (two events, one each way).
      CU(cuEventRecord(joined, s[0]));
      CU(cuStreamWaitEvent(s[1], joined, 0));
      CUdeviceptr dst = x[1], src = x[0];
      uint32_t count = n, t = 0xffff;
      uint64_t t_ns = ns;
      void* p[] = {&dst, &src, &count, &t, &t_ns};
      CU(cuLaunchKernel(g.add, 4, 1, 1, 128, 1, 1, 0, s[1], p, nullptr));
      ++launches;
      CU(cuEventRecord(back, s[1]));
      CU(cuStreamWaitEvent(s[0], back, 0));
      for (uint32_t k = 0; k < n; ++k) ref[1][k] += ref[0][k];
    }
    for (int i = 0; i < streams; ++i) {
      const auto si = static_cast<size_t>(i);
      const uint32_t mul = mul_of(static_cast<uint32_t>(i), static_cast<uint32_t>(step));
      const uint32_t add = add_of(static_cast<uint32_t>(i), static_cast<uint32_t>(step));
      const uint32_t tag = (static_cast<uint32_t>(i) << 16) | static_cast<uint32_t>(step);
      if (step % 6 == 5) {
        // cuLaunchKernelEx with the stream's own priority as an attribute.
        int prio = 0;
        CU(cuStreamGetPriority(s[si], &prio));
        CUlaunchAttribute attr{};
        attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attr.value.priority = prio;
        CUlaunchConfig c{};
        c.gridDimX = 4;
        c.gridDimY = c.gridDimZ = 1;
        c.blockDimX = 128;
        c.blockDimY = c.blockDimZ = 1;
        c.hStream = s[si];
        c.attrs = &attr;
        c.numAttrs = 1;
        CUdeviceptr px = x[si];
        uint32_t pn = n, pm = mul, pa = add, pt = tag;
        uint64_t pns = ns;
        void* p[] = {&px, &pn, &pm, &pa, &pt, &pns};
        CU(cuLaunchKernelEx(&c, g.affine, p, nullptr));
      } else {
        CU(affine(step % 2 ? looked_up : cuLaunchKernel, g.affine, s[si], x[si], n, mul, add, tag, ns));
      }
      ++launches;
      for (uint32_t k = 0; k < n; ++k) ref[si][k] = affine_ref(ref[si][k], mul, add);
    }
  }

  // A thread on its per-thread default stream (the _ptsz flavour found by cuGetProcAddress).
  std::vector<uint32_t> tref(n);
  for (uint32_t k = 0; k < n; ++k) tref[k] = k ^ 0x5555u;
  const CUdeviceptr tx = upload(tref);
  std::atomic<int> thread_launches{0};
  std::thread worker([&] {
    CU(cuCtxSetCurrent(g.ctx));
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    CU(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    void* sync = nullptr;
    CU(cuGetProcAddress("cuStreamSynchronize", &sync, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    for (int step = 0; step < 16; ++step) {
      CU(affine(reinterpret_cast<LaunchFn>(fn), g.affine, nullptr, tx, n, mul_of(9, static_cast<uint32_t>(step)),
                add_of(9, static_cast<uint32_t>(step)), (9u << 16) | static_cast<uint32_t>(step), ns));
      ++thread_launches;
    }
    CU(reinterpret_cast<SyncFn>(sync)(nullptr));
  });
  worker.join();
  launches += thread_launches.load();
  for (int step = 0; step < 16; ++step) {
    for (uint32_t k = 0; k < n; ++k) tref[k] = affine_ref(tref[k], mul_of(9, static_cast<uint32_t>(step)), add_of(9, static_cast<uint32_t>(step)));
  }

  // A captured graph of five steps, launched three times on another stream.
  std::vector<uint32_t> gref(n);
  for (uint32_t k = 0; k < n; ++k) gref[k] = k * 3u + 1u;
  const CUdeviceptr gx = upload(gref);
  CUstream cap = nullptr;
  CU(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
  CU(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int step = 0; step < 5; ++step) {
    CU(affine(cuLaunchKernel, g.affine, cap, gx, n, mul_of(7, static_cast<uint32_t>(step)), add_of(7, static_cast<uint32_t>(step)),
              (7u << 16) | static_cast<uint32_t>(step), ns));
    ++launches;
  }
  CUgraph graph = nullptr;
  CU(cuStreamEndCapture(cap, &graph));
  CUgraphExec exec = nullptr;
  CU(cuGraphInstantiate(&exec, graph, 0));
  const int graph_launches = 3;
  for (int l = 0; l < graph_launches; ++l) {
    CU(cuGraphLaunch(exec, s[streams - 1]));
    ++launches;
    for (int step = 0; step < 5; ++step) {
      for (uint32_t k = 0; k < n; ++k) gref[k] = affine_ref(gref[k], mul_of(7, static_cast<uint32_t>(step)), add_of(7, static_cast<uint32_t>(step)));
    }
  }
  // A cooperative launch on stream 0.
  {
    CUdeviceptr px = x[0];
    uint32_t pn = n, pm = 3, pa = 1, pt = 0xc00;
    uint64_t pns = ns;
    void* p[] = {&px, &pn, &pm, &pa, &pt, &pns};
    CU(cuLaunchCooperativeKernel(g.affine, 8, 1, 1, 128, 1, 1, 0, s[0], p));
    ++launches;
    for (uint32_t k = 0; k < n; ++k) ref[0][k] = affine_ref(ref[0][k], 3, 1);
  }
  CU(cuCtxSynchronize());

  bool ok = true;
  uint64_t checksum = 1469598103934665603ull;
  for (int i = 0; i < streams; ++i) {
    const std::vector<uint32_t> got = download(x[static_cast<size_t>(i)], n);
    ok = ok && got == ref[static_cast<size_t>(i)];
    checksum = fnv(got, checksum);
  }
  const std::vector<uint32_t> tgot = download(tx, n), ggot = download(gx, n);
  ok = ok && tgot == tref && ggot == gref;
  checksum = fnv(ggot, fnv(tgot, checksum));
  std::printf("{\"ok\": %s, \"checksum\": %llu, \"launches_made\": %d, \"captured_launches\": 5, \"graph_launches\": %d}\n",
              ok ? "true" : "false", static_cast<unsigned long long>(checksum), launches, graph_launches);
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(graph));
  CU(cuEventDestroy(joined));
  CU(cuEventDestroy(back));
  for (CUstream st : s) CU(cuStreamDestroy(st));
  CU(cuStreamDestroy(cap));
  return ok ? 0 : 1;
}

// ---- lc, be, eager ---------------------------------------------------------------------------

void touch(const std::string& path) {
  if (path.empty()) return;
  std::ofstream(path) << getpid() << "\n";
}

int run_lc(const Args& a) {
  const long requests = a.get("requests", 20);  // 0: until killed
  const int kernels = static_cast<int>(a.get("kernels", 8));
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 200000));
  const unsigned grid = static_cast<unsigned>(a.get("grid", 132));
  const long gap_us = a.get("gap_us", 2000);
  const long host_us = a.get("host_us", 0);
  const bool mark = a.get("mark", 1) != 0;
  const std::string ready = a.str("ready", "");
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::this_thread::sleep_for(std::chrono::milliseconds(a.get("settle_ms", 0)));
  std::vector<double> ms;
  for (long r = 0; requests == 0 || r < requests; ++r) {
    const uint64_t t0 = now_ns();
    if (mark) request_mark(true);
    for (int k = 0; k < kernels; ++k) {
      CU(spin(cuLaunchKernel, g.spin, s, static_cast<uint32_t>((r << 16) | k), ns, grid));
      if (host_us > 0 && k + 1 < kernels) {
        CU(cuStreamSynchronize(s));
        std::this_thread::sleep_for(std::chrono::microseconds(host_us));
      }
    }
    if (r == 0) touch(ready);
    CU(cuStreamSynchronize(s));
    if (mark) request_mark(false);
    ms.push_back(static_cast<double>(now_ns() - t0) / 1e6);
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"ok\": true, \"requests\": %zu, \"p50_ms\": %.3f, \"max_ms\": %.3f}\n", ms.size(),
              ms.empty() ? 0.0 : ms[ms.size() / 2], ms.empty() ? 0.0 : ms.back());
  CU(cuStreamDestroy(s));
  return 0;
}

int run_be(const Args& a) {
  const long launches = a.get("launches", 100);
  const double seconds = static_cast<double>(a.get("ms", 0)) / 1000.0;
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 100000));
  const unsigned grid = static_cast<unsigned>(a.get("grid", 132));
  const long sync_every = a.get("sync_every", 8);
  const bool kernel_handle = a.str("handle", "function") == "kernel";
  const std::string ready = a.str("ready", "");
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::this_thread::sleep_for(std::chrono::milliseconds(a.get("settle_ms", 0)));
  const CUfunction f = kernel_handle ? reinterpret_cast<CUfunction>(g.k_spin) : g.spin;
  const uint64_t start = now_ns();
  long made = 0;
  for (; seconds > 0 ? static_cast<double>(now_ns() - start) / 1e9 < seconds : made < launches; ++made) {
    CU(spin(cuLaunchKernel, f, s, static_cast<uint32_t>(made), ns, grid));
    if (made == 0) touch(ready);
    if (sync_every > 0 && (made + 1) % sync_every == 0) CU(cuStreamSynchronize(s));
  }
  CU(cuStreamSynchronize(s));
  std::printf("{\"ok\": true, \"launches\": %ld, \"seconds\": %.3f}\n", made, static_cast<double>(now_ns() - start) / 1e9);
  CU(cuStreamDestroy(s));
  return 0;
}

int run_eager(const Args& a) {
  const double seconds = static_cast<double>(a.get("ms", 10000)) / 1000.0;
  const long hz = a.get("hz", 1000);
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const uint64_t start = now_ns();
  const uint64_t period = 1'000'000'000ull / static_cast<uint64_t>(hz);
  long made = 0;
  while (static_cast<double>(now_ns() - start) / 1e9 < seconds) {
    if ((made % 10) == 0) request_mark(true);
    CU(spin(cuLaunchKernel, g.spin, s, static_cast<uint32_t>(made), 20000, 4));
    ++made;
    if (made % 10 == 0) {
      CU(cuStreamSynchronize(s));
      request_mark(false);
    }
    const uint64_t next = start + static_cast<uint64_t>(made) * period;
    const uint64_t now = now_ns();
    if (next > now) std::this_thread::sleep_for(std::chrono::nanoseconds(next - now));
  }
  CU(cuStreamSynchronize(s));
  if (made % 10 != 0) request_mark(false);
  std::printf("{\"ok\": true, \"launches\": %ld, \"seconds\": %.3f}\n", made, static_cast<double>(now_ns() - start) / 1e9);
  CU(cuStreamDestroy(s));
  return 0;
}

// ---- room ------------------------------------------------------------------------------------

int run_room(const Args& a) {
  const int launches = static_cast<int>(a.get("launches", 10));
  const unsigned blocks = static_cast<unsigned>(a.get("blocks", 132 * 32));
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 200000));
  const bool kernel_handle = a.str("handle", "kernel") == "kernel";
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Under the library the stream's creation registered the process: the lease arrives meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(a.get("settle_ms", 300)));
  CUdeviceptr peak = 0, used = 0, sum = 0;
  CU(cuMemAlloc(&peak, 256 * sizeof(uint32_t)));
  CU(cuMemAlloc(&used, 256 * sizeof(uint32_t)));
  CU(cuMemAlloc(&sum, sizeof(uint32_t)));
  CU(cuMemsetD32Async(peak, 0, 256, s));
  CU(cuMemsetD32Async(used, 0, 256, s));
  CU(cuMemsetD32Async(sum, 0, 1, s));
  const CUfunction f = kernel_handle ? reinterpret_cast<CUfunction>(g.k_residency) : g.residency;
  for (int i = 0; i < launches; ++i) {
    CUdeviceptr pp = peak, pu = used, ps = sum;
    uint32_t tag = static_cast<uint32_t>(i);
    uint64_t pns = ns;
    void* p[] = {&pp, &pu, &ps, &tag, &pns};
    CU(cuLaunchKernel(f, blocks, 1, 1, 64, 1, 1, 0, s, p, nullptr));
  }
  std::vector<uint32_t> hp(256), hu(256);
  uint32_t hs = 0;
  CU(cuMemcpyDtoHAsync(hp.data(), peak, 256 * sizeof(uint32_t), s));
  CU(cuMemcpyDtoHAsync(hu.data(), used, 256 * sizeof(uint32_t), s));
  CU(cuMemcpyDtoHAsync(&hs, sum, sizeof(uint32_t), s));
  CU(cuStreamSynchronize(s));
  unsigned sms = 0, most = 0;
  for (int i = 0; i < 256; ++i) {
    sms += hu[static_cast<size_t>(i)] ? 1u : 0u;
    most = std::max(most, hp[static_cast<size_t>(i)]);
  }
  uint64_t want = 0;
  for (uint64_t b = 0; b < blocks; ++b) want += b;
  want = (want * static_cast<uint64_t>(launches)) & 0xffffffffu;
  const bool ok = hs == static_cast<uint32_t>(want);
  std::printf("{\"ok\": %s, \"sms_used\": %u, \"peak_blocks_per_sm\": %u, \"checksum\": %u}\n", ok ? "true" : "false", sms, most, hs);
  CU(cuStreamDestroy(s));
  return ok ? 0 : 1;
}

// ---- capture ---------------------------------------------------------------------------------

int run_capture(const Args& a) {
  const std::string mode_name = a.str("mode", "global");
  const CUstreamCaptureMode mode = mode_name == "relaxed"        ? CU_STREAM_CAPTURE_MODE_RELAXED
                                   : mode_name == "thread_local" ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                                 : CU_STREAM_CAPTURE_MODE_GLOBAL;
  const int steps = static_cast<int>(a.get("steps", 5));
  const int graph_launches = static_cast<int>(a.get("graph_launches", 3));
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 50000));
  const bool on_legacy = a.str("graph_stream", "created") == "legacy";
  const int before = static_cast<int>(a.get("before", 0));
  const uint32_t n = 1024;
  Gpu g = open_gpu(0);
  CUstream cap = nullptr, side = nullptr, run = nullptr;
  CU(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
  CU(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  if (!on_legacy) CU(cuStreamCreate(&run, CU_STREAM_NON_BLOCKING));
  std::vector<uint32_t> gref(n), sref(n);
  for (uint32_t k = 0; k < n; ++k) {
    gref[k] = k + 11u;
    sref[k] = k * 5u;
  }
  const CUdeviceptr gx = upload(gref), sx = upload(sref);
  // The side stream has work in flight while the capture runs: the library's completion thread
  // is busy with it meanwhile.
  std::atomic<bool> capturing{false}, done{false};
  int side_launches = 0;
  std::thread side_thread([&] {
    CU(cuCtxSetCurrent(g.ctx));
    while (!capturing.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    for (int i = 0; !done.load() || i < 8; ++i) {
      CU(affine(cuLaunchKernel, g.affine, side, sx, n, 5, static_cast<uint32_t>(i), 0x5000u + static_cast<uint32_t>(i), ns));
      ++side_launches;
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  // Launches on the stream just before its capture (no marker behind them yet when it begins).
  for (int i = 0; i < before; ++i) {
    CU(affine(cuLaunchKernel, g.affine, cap, gx, n, 7, static_cast<uint32_t>(i), 0x2000u + static_cast<uint32_t>(i), ns));
    for (uint32_t k = 0; k < n; ++k) gref[k] = affine_ref(gref[k], 7, static_cast<uint32_t>(i));
  }
  CU(cuStreamBeginCapture(cap, mode));
  capturing = true;
  for (int step = 0; step < steps; ++step) {
    CU(affine(cuLaunchKernel, g.affine, cap, gx, n, mul_of(3, static_cast<uint32_t>(step)), add_of(3, static_cast<uint32_t>(step)),
              0x3000u + static_cast<uint32_t>(step), ns));
    // The capturing thread keeps working on the host for a while, as a framework does.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CUgraph graph = nullptr;
  const CUresult ended = cuStreamEndCapture(cap, &graph);
  done = true;
  side_thread.join();
  if (ended != CUDA_SUCCESS) die("cuStreamEndCapture", ended, __LINE__);
  CU(cuStreamSynchronize(cap));  // what ran on it before its capture, ahead of the graph's launches
  size_t nodes = 0;
  CU(cuGraphGetNodes(graph, nullptr, &nodes));
  CUgraphExec exec = nullptr;
  CU(cuGraphInstantiate(&exec, graph, 0));
  for (int l = 0; l < graph_launches; ++l) CU(cuGraphLaunch(exec, run));
  CU(cuStreamSynchronize(run));
  CU(cuStreamSynchronize(side));
  for (int l = 0; l < graph_launches; ++l) {
    for (int step = 0; step < steps; ++step) {
      for (uint32_t k = 0; k < n; ++k) gref[k] = affine_ref(gref[k], mul_of(3, static_cast<uint32_t>(step)), add_of(3, static_cast<uint32_t>(step)));
    }
  }
  for (int i = 0; i < side_launches; ++i) {
    for (uint32_t k = 0; k < n; ++k) sref[k] = affine_ref(sref[k], 5, static_cast<uint32_t>(i));
  }
  const bool ok = download(gx, n) == gref && download(sx, n) == sref && nodes == static_cast<size_t>(steps);
  std::printf("{\"ok\": %s, \"graph_nodes\": %zu, \"graph_launches\": %d, \"captured\": %d, \"side_launches\": %d, \"before\": %d}\n",
              ok ? "true" : "false", nodes, graph_launches, steps, side_launches, before);
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(graph));
  return ok ? 0 : 1;
}

// ---- per-thread default streams --------------------------------------------------------------

int run_ptsz(const Args& a) {
  const int threads = static_cast<int>(a.get("threads", 2));
  const int steps = static_cast<int>(a.get("steps", 20));
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 30000));
  const uint32_t n = 1024;
  Gpu g = open_gpu(0);
  std::vector<CUdeviceptr> x(static_cast<size_t>(threads));
  std::vector<std::vector<uint32_t>> ref(static_cast<size_t>(threads), std::vector<uint32_t>(n));
  for (int t = 0; t < threads; ++t) {
    for (uint32_t k = 0; k < n; ++k) ref[static_cast<size_t>(t)][k] = k + 100u * static_cast<uint32_t>(t);
    x[static_cast<size_t>(t)] = upload(ref[static_cast<size_t>(t)]);
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      CU(cuCtxSetCurrent(g.ctx));
      void* fn = nullptr;
      CUdriverProcAddressQueryResult st{};
      CU(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
      const auto ptsz = reinterpret_cast<LaunchFn>(fn);
      for (int step = 0; step < steps; ++step) {
        const uint32_t mul = mul_of(static_cast<uint32_t>(t), static_cast<uint32_t>(step));
        const uint32_t add = add_of(static_cast<uint32_t>(t), static_cast<uint32_t>(step));
        const uint32_t tag = (static_cast<uint32_t>(t) << 16) | static_cast<uint32_t>(step);
        // Even steps: the legacy-flavour entry point given CU_STREAM_PER_THREAD; odd: the _ptsz
        // flavour given the null stream. Both are this thread's default stream.
        if (step % 2 == 0) {
          CU(affine(cuLaunchKernel, g.affine, CU_STREAM_PER_THREAD, x[static_cast<size_t>(t)], n, mul, add, tag, ns));
        } else {
          CU(affine(ptsz, g.affine, nullptr, x[static_cast<size_t>(t)], n, mul, add, tag, ns));
        }
      }
      CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    });
  }
  for (std::thread& w : workers) w.join();
  bool ok = true;
  for (int t = 0; t < threads; ++t) {
    for (int step = 0; step < steps; ++step) {
      for (uint32_t k = 0; k < n; ++k) {
        ref[static_cast<size_t>(t)][k] = affine_ref(ref[static_cast<size_t>(t)][k], mul_of(static_cast<uint32_t>(t), static_cast<uint32_t>(step)),
                                                    add_of(static_cast<uint32_t>(t), static_cast<uint32_t>(step)));
      }
    }
    ok = ok && download(x[static_cast<size_t>(t)], n) == ref[static_cast<size_t>(t)];
  }
  std::printf("{\"ok\": %s, \"launches_made\": %d}\n", ok ? "true" : "false", threads * steps);
  return ok ? 0 : 1;
}

// ---- lookups ---------------------------------------------------------------------------------

std::string object_of(void* p) {
  Dl_info info{};
  if (!p || dladdr(p, &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  return path.substr(path.find_last_of('/') + 1);
}

int run_procaddress(const Args&) {
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  using ProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto v1 = reinterpret_cast<ProcV1>(dlsym(libcuda, "cuGetProcAddress"));
  void* legacy = nullptr;
  void* per_thread = nullptr;
  void* old = nullptr;
  void* too_old = nullptr;
  void* via_v1 = nullptr;
  CUdriverProcAddressQueryResult st_legacy{}, st_pt{}, st_old{}, st_too_old{};
  CU(cuGetProcAddress("cuLaunchKernel", &legacy, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st_legacy));
  CU(cuGetProcAddress("cuLaunchKernel", &per_thread, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st_pt));
  CU(cuGetProcAddress("cuLaunchKernel", &old, 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st_old));
  const CUresult r_too_old = cuGetProcAddress("cuLaunchKernelEx", &too_old, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &st_too_old);
  if (!v1) die("dlsym(libcuda, cuGetProcAddress)", CUDA_ERROR_NOT_FOUND, __LINE__);
  CU(v1("cuLaunchKernel", &via_v1, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
  void* self = nullptr;
  CU(cuGetProcAddress("cuGetProcAddress", &self, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st_legacy));
  void* by_dlsym = dlsym(libcuda, "cuLaunchKernel");
  void* not_hooked = nullptr;
  CU(cuGetProcAddress("cuMemcpyAsync", &not_hooked, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st_legacy));
  // A launch through each kernel-launch pointer.
  int launches = 0;
  for (void* fn : {legacy, per_thread, via_v1, by_dlsym}) {
    CU(spin(reinterpret_cast<LaunchFn>(fn), g.spin, s, 0x700u + static_cast<uint32_t>(launches), 10000, 2));
    ++launches;
  }
  CU(cuStreamSynchronize(s));
  std::printf("{\"ok\": true, \"legacy\": \"%s\", \"per_thread\": \"%s\", \"old\": \"%s\", \"v1\": \"%s\", \"self\": \"%s\", "
              "\"dlsym\": \"%s\", \"not_hooked\": \"%s\", \"distinct_flavours\": %s, \"old_is_legacy\": %s, "
              "\"too_old_result\": %d, \"too_old_status\": %d, \"launches_made\": %d}\n",
              object_of(legacy).c_str(), object_of(per_thread).c_str(), object_of(old).c_str(), object_of(via_v1).c_str(),
              object_of(self).c_str(), object_of(by_dlsym).c_str(), object_of(not_hooked).c_str(),
              legacy != per_thread ? "true" : "false", old == legacy ? "true" : "false", static_cast<int>(r_too_old),
              static_cast<int>(st_too_old), launches);
  CU(cuStreamDestroy(s));
  return 0;
}

// ---- accumulate, devices, churn, vmm ---------------------------------------------------------

int run_accumulate(const Args& a) {
  const long launches = a.get("launches", 50);
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = upload(std::vector<uint32_t>(256, 0));
  for (long i = 0; i < launches; ++i) CU(affine(cuLaunchKernel, g.affine, s, x, 256, 1, 1, static_cast<uint32_t>(i), 20000, 2));
  CU(cuStreamSynchronize(s));
  const std::vector<uint32_t> got = download(x, 256);
  const bool ok = std::all_of(got.begin(), got.end(), [&](uint32_t v) { return v == static_cast<uint32_t>(launches); });
  std::printf("{\"ok\": %s, \"value\": %u, \"launches_made\": %ld}\n", ok ? "true" : "false", got[0], launches);
  CU(cuStreamDestroy(s));
  return ok ? 0 : 1;
}

int run_crowd(const Args& a) {
  const int threads = static_cast<int>(a.get("threads", 4));
  const long launches = a.get("launches", 500);
  Gpu g = open_gpu(0);
  CUstream shared = nullptr;
  CU(cuStreamCreate(&shared, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr xs = upload(std::vector<uint32_t>(64, 0));
  std::vector<CUstream> own(static_cast<size_t>(threads));
  std::vector<CUdeviceptr> xo(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    CU(cuStreamCreate(&own[static_cast<size_t>(t)], CU_STREAM_NON_BLOCKING));
    xo[static_cast<size_t>(t)] = upload(std::vector<uint32_t>(64, 0));
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      CU(cuCtxSetCurrent(g.ctx));
      for (long i = 0; i < launches; ++i) {
        const auto tag = (static_cast<uint32_t>(t) << 16) | static_cast<uint32_t>(i & 0xffff);
        CU(affine(cuLaunchKernel, g.affine, shared, xs, 64, 1, 1, tag, 0, 1, 32));
        CU(affine(cuLaunchKernel, g.affine, own[static_cast<size_t>(t)], xo[static_cast<size_t>(t)], 64, 1, 1, tag, 0, 1, 32));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  CU(cuCtxSynchronize());
  bool ok = download(xs, 64) == std::vector<uint32_t>(64, static_cast<uint32_t>(threads * launches));
  for (int t = 0; t < threads; ++t) ok = ok && download(xo[static_cast<size_t>(t)], 64) == std::vector<uint32_t>(64, static_cast<uint32_t>(launches));
  std::printf("{\"ok\": %s, \"launches_made\": %ld}\n", ok ? "true" : "false", 2 * threads * launches);
  for (CUstream s : own) CU(cuStreamDestroy(s));
  CU(cuStreamDestroy(shared));
  return ok ? 0 : 1;
}

int run_devices(const Args& a) {
  const int per_device = static_cast<int>(a.get("launches", 10));
  Gpu g0 = open_gpu(0);
  CUstream s0 = nullptr;
  CU(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < per_device; ++i) CU(spin(cuLaunchKernel, g0.spin, s0, static_cast<uint32_t>(i), 20000, 4));
  CU(cuStreamSynchronize(s0));
  Gpu g1 = open_gpu(1);  // makes device 1's primary context current
  CUstream s1 = nullptr;
  CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < per_device; ++i) CU(spin(cuLaunchKernel, g1.spin, s1, 0x100u + static_cast<uint32_t>(i), 20000, 4));
  CU(cuStreamSynchronize(s1));
  std::printf("{\"ok\": true, \"launches_made\": %d}\n", 2 * per_device);
  return 0;
}

int run_churn(const Args& a) {
  const int rounds = static_cast<int>(a.get("rounds", 40));
  const bool drain = a.get("drain", 0) != 0;
  Gpu g = open_gpu(0);
  const uint32_t n = 256;
  std::vector<uint32_t> ref(n, 1);
  const CUdeviceptr x = upload(ref);
  for (int r = 0; r < rounds; ++r) {
    CUstream s = nullptr;
    CUevent e = nullptr;
    CU(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, r % 2 ? -5 : 0));
    CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU(affine(cuLaunchKernel, g.affine, s, x, n, 3, static_cast<uint32_t>(r), static_cast<uint32_t>(r), 20000, 2));
    CU(cuEventRecord(e, s));
    CU(affine(cuLaunchKernel, g.affine, s, x, n, 5, 1, static_cast<uint32_t>(r), 20000, 2));
    CU(cuEventSynchronize(e));
    if (drain) CU(cuStreamSynchronize(s));
    // Destroyed with a launch perhaps still in flight: its handle comes back for a later stream
    // (for the next one when drained).
    CU(cuStreamDestroy(s));
    CU(cuEventDestroy(e));
    for (uint32_t k = 0; k < n; ++k) ref[k] = affine_ref(affine_ref(ref[k], 3, static_cast<uint32_t>(r)), 5, 1);
  }
  CU(cuCtxSynchronize());
  const bool ok = download(x, n) == ref;
  std::printf("{\"ok\": %s, \"launches_made\": %d}\n", ok ? "true" : "false", 2 * rounds);
  return ok ? 0 : 1;
}

int run_capture_legacy(const Args& a) {
  const uint64_t ns = static_cast<uint64_t>(a.get("ns", 50000));
  const uint32_t n = 1024;
  Gpu g = open_gpu(0);
  CUstream cap = nullptr;
  CU(cuStreamCreate(&cap, CU_STREAM_DEFAULT));  // blocking: the legacy stream joins its work
  const CUdeviceptr x = upload(std::vector<uint32_t>(n, 1));
  CU(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU(affine(cuLaunchKernel, g.affine, cap, x, n, 3, 1, 0x100, ns));
  const CUresult legacy = affine(cuLaunchKernel, g.affine, nullptr, x, n, 5, 1, 0x101, ns);
  CUgraph graph = nullptr;
  const CUresult ended = cuStreamEndCapture(cap, &graph);
  if (graph) CU(cuGraphDestroy(graph));
  CU(cuCtxSynchronize());
  // Nothing ran: the captured launch is in no graph, the legacy one was refused.
  const std::vector<uint32_t> got = download(x, n);
  const bool untouched = std::all_of(got.begin(), got.end(), [](uint32_t v) { return v == 1; });
  const bool ok = legacy != CUDA_SUCCESS && ended != CUDA_SUCCESS && untouched;
  std::printf("{\"ok\": %s, \"legacy_result\": %d, \"end_result\": %d, \"untouched\": %s}\n", ok ? "true" : "false",
              static_cast<int>(legacy), static_cast<int>(ended), untouched ? "true" : "false");
  CU(cuStreamDestroy(cap));
  return ok ? 0 : 1;
}

int run_vmm(const Args&) {
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t free_before = 0, total = 0;
  CU(cuMemGetInfo(&free_before, &total));
  CUmemGenericAllocationHandle h = 0;
  CU(cuMemCreate(&h, gran, &prop, 0));
  CUdeviceptr va = 0;
  CU(cuMemAddressReserve(&va, gran, 0, 0, 0));
  CU(cuMemMap(va, gran, 0, h, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(va, gran, &access, 1));
  size_t free_mapped = 0;
  CU(cuMemGetInfo(&free_mapped, &total));
  const uint32_t n = 4096;
  CU(cuMemsetD32Async(va, 7, n, s));
  CU(affine(cuLaunchKernel, g.affine, s, va, n, 2, 1, 1, 10000, 4));
  // A pool allocation on the same stream.
  CUmemoryPool pool = nullptr;
  CU(cuDeviceGetDefaultMemPool(&pool, g.device));
  CUdeviceptr px = 0;
  CU(cuMemAllocFromPoolAsync(&px, n * sizeof(uint32_t), pool, s));
  CU(cuMemcpyAsync(px, va, n * sizeof(uint32_t), s));
  CU(affine(cuLaunchKernel, g.affine, s, px, n, 3, 0, 2, 10000, 4));
  std::vector<uint32_t> got(n);
  CU(cuMemcpyDtoHAsync(got.data(), px, n * sizeof(uint32_t), s));
  CU(cuMemFreeAsync(px, s));
  CU(cuStreamSynchronize(s));
  CU(cuMemUnmap(va, gran));
  CU(cuMemRelease(h));
  CU(cuMemAddressFree(va, gran));
  size_t free_after = 0;
  CU(cuMemGetInfo(&free_after, &total));
  const bool ok = std::all_of(got.begin(), got.end(), [](uint32_t v) { return v == (7u * 2u + 1u) * 3u; }) &&
                  free_mapped + gran == free_before && free_after == free_before;
  std::printf("{\"ok\": %s, \"granularity\": %zu, \"free_before\": %zu, \"free_mapped\": %zu, \"free_after\": %zu}\n",
              ok ? "true" : "false", gran, free_before, free_mapped, free_after);
  CU(cuStreamDestroy(s));
  return ok ? 0 : 1;
}

// ---- memory ---------------------------------------------------------------------------------

struct MemInfo {
  size_t free = 0, total = 0;
  unsigned free_v1 = 0, total_v1 = 0;
};
MemInfo mem_info() {
  MemInfo m;
  CU(cuMemGetInfo_v2(&m.free, &m.total));
  using V1 = CUresult (*)(unsigned*, unsigned*);
  // The 32-bit version, found as a program built before CUDA 3.2 would (through the lookup).
  void* fn = nullptr;
  CU(cuGetProcAddress_v2("cuMemGetInfo", &fn, 2000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr));
  CU(reinterpret_cast<V1>(fn)(&m.free_v1, &m.total_v1));
  return m;
}
std::string mem_json(const MemInfo& m) {
  return "{\"free\": " + std::to_string(m.free) + ", \"total\": " + std::to_string(m.total) + ", \"free_v1\": " +
         std::to_string(m.free_v1) + ", \"total_v1\": " + std::to_string(m.total_v1) + "}";
}

// The per-thread-default-stream flavour of `base`, as cuGetProcAddress gives it.
template <typename Fn>
Fn per_thread_flavour(const char* base) {
  void* fn = nullptr;
  CU(cuGetProcAddress_v2(base, &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  return reinterpret_cast<Fn>(fn);
}
using AllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using AllocFromPoolFn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
using FreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);

// One allocation through `path`, freed by free_chunk; CUresult of the allocation.
struct Chunk {
  CUdeviceptr ptr = 0;
  CUmemGenericAllocationHandle handle = 0;
  std::vector<CUdeviceptr> vas;  // vmm: its mappings
  size_t bytes = 0;
  size_t pitch = 0;
};
CUresult alloc_chunk(const std::string& path, size_t bytes, CUstream s, CUmemoryPool pool, int maps, Chunk& c) {
  c.bytes = bytes;
  if (path == "alloc") return cuMemAlloc_v2(&c.ptr, bytes);
  if (path == "managed") return cuMemAllocManaged(&c.ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  // Rows of 100 bytes less than `bytes`: the driver's pitch makes up the difference.
  if (path == "pitch") return cuMemAllocPitch_v2(&c.ptr, &c.pitch, bytes - 100, 1, 4);
  if (path == "async") return cuMemAllocAsync(&c.ptr, bytes, s);
  if (path == "async_ptsz") return per_thread_flavour<AllocAsyncFn>("cuMemAllocAsync")(&c.ptr, bytes, s);
  if (path == "pool") return cuMemAllocFromPoolAsync(&c.ptr, bytes, pool, s);
  if (path == "pool_ptsz") return per_thread_flavour<AllocFromPoolFn>("cuMemAllocFromPoolAsync")(&c.ptr, bytes, pool, s);
  // vmm: physical memory, mapped `maps` times; one more reference retained and released.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  if (const CUresult r = cuMemCreate(&c.handle, bytes, &prop, 0); r != CUDA_SUCCESS) return r;
  for (int m = 0; m < maps; ++m) {
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    CU(cuMemMap(va, bytes, 0, c.handle, 0));
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, bytes, &access, 1));
    c.vas.push_back(va);
  }
  if (!c.vas.empty()) {
    CUmemGenericAllocationHandle again = 0;
    CU(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(c.vas[0])));
    if (again != c.handle) die("cuMemRetainAllocationHandle gave another handle", CUDA_ERROR_UNKNOWN, __LINE__);
    CU(cuMemRelease(again));
  }
  return CUDA_SUCCESS;
}
void free_chunk(const std::string& path, CUstream s, Chunk& c) {
  if (path == "vmm") {
    // As PyTorch's expandable segments and NCCL do: unmap, then release (or the other way round).
    const bool release_first = c.vas.size() > 1;
    if (release_first) CU(cuMemRelease(c.handle));
    for (CUdeviceptr va : c.vas) {
      CU(cuMemUnmap(va, c.bytes));
      CU(cuMemAddressFree(va, c.bytes));
    }
    if (!release_first) CU(cuMemRelease(c.handle));
    return;
  }
  if (path == "async" || path == "pool") {
    CU(cuMemFreeAsync(c.ptr, s));
  } else if (path == "async_ptsz" || path == "pool_ptsz") {
    CU(per_thread_flavour<FreeAsyncFn>("cuMemFreeAsync")(c.ptr, s));
  } else {
    CU(cuMemFree_v2(c.ptr));
  }
}

int run_memory(const Args& a) {
  const std::string path = a.str("path", "alloc");
  const size_t chunk = static_cast<size_t>(a.get("chunk", 1 << 20));
  const long count = a.get("count", 8);
  const int threads = static_cast<int>(a.get("threads", 1));
  const int maps = static_cast<int>(a.get("maps", 1));
  const std::set<std::string> paths = {"alloc", "pitch", "managed", "async", "async_ptsz", "pool", "pool_ptsz", "vmm"};
  if (!paths.count(path)) {
    std::fprintf(stderr, "concord_standin_app: memory: unknown path '%s'\n", path.c_str());
    return 2;
  }
  Gpu g = open_gpu(0);
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUmemoryPool pool = nullptr;
  CU(cuDeviceGetDefaultMemPool(&pool, g.device));
  const MemInfo before = mem_info();
  std::vector<std::vector<Chunk>> held(static_cast<size_t>(threads));
  std::vector<CUresult> refusal(static_cast<size_t>(threads), CUDA_SUCCESS);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      CU(cuCtxSetCurrent(g.ctx));
      for (long i = 0; i < count; ++i) {
        Chunk c;
        const CUresult r = alloc_chunk(path, chunk, s, pool, maps, c);
        if (r != CUDA_SUCCESS) {
          refusal[static_cast<size_t>(t)] = r;
          break;
        }
        held[static_cast<size_t>(t)].push_back(c);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  CU(cuStreamSynchronize(s));
  const MemInfo during = mem_info();
  if (const std::string ready = a.str("ready", ""); !ready.empty()) {
    touch(ready);
    std::this_thread::sleep_for(std::chrono::milliseconds(a.get("hold_ms", 0)));
  }
  size_t granted = 0;
  std::string per_thread, refusals;
  for (int t = 0; t < threads; ++t) {
    granted += held[static_cast<size_t>(t)].size();
    per_thread += (t ? ", " : "") + std::to_string(held[static_cast<size_t>(t)].size());
    refusals += (t ? ", " : "") + std::to_string(static_cast<int>(refusal[static_cast<size_t>(t)]));
    for (Chunk& c : held[static_cast<size_t>(t)]) free_chunk(path, s, c);
  }
  CU(cuStreamSynchronize(s));
  const MemInfo after = mem_info();
  const size_t pitch = held[0].empty() ? 0 : held[0][0].pitch;
  // Anything but success or out of memory is the program's (or the stand-in's) failure.
  const bool ok = std::all_of(refusal.begin(), refusal.end(), [](CUresult r) { return r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY; });
  std::printf("{\"ok\": %s, \"path\": \"%s\", \"granted\": %zu, \"per_thread\": [%s], \"refusals\": [%s], \"pitch\": %zu, "
              "\"before\": %s, \"during\": %s, \"after\": %s}\n",
              ok ? "true" : "false", path.c_str(), granted, per_thread.c_str(), refusals.c_str(), pitch, mem_json(before).c_str(),
              mem_json(during).c_str(), mem_json(after).c_str());
  CU(cuStreamDestroy(s));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: concord_standin_app MODE [key=value ...]\n");
    return 2;
  }
  Args a;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "concord_standin_app: '%s': expected key=value\n", arg.c_str());
      return 2;
    }
    a.kv[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  const std::string mode = argv[1];
  if (mode == "chains") return run_chains(a);
  if (mode == "lc") return run_lc(a);
  if (mode == "be") return run_be(a);
  if (mode == "eager") return run_eager(a);
  if (mode == "room") return run_room(a);
  if (mode == "capture") return run_capture(a);
  if (mode == "ptsz") return run_ptsz(a);
  if (mode == "procaddress") return run_procaddress(a);
  if (mode == "accumulate") return run_accumulate(a);
  if (mode == "crowd") return run_crowd(a);
  if (mode == "devices") return run_devices(a);
  if (mode == "churn") return run_churn(a);
  if (mode == "capture_legacy") return run_capture_legacy(a);
  if (mode == "vmm") return run_vmm(a);
  if (mode == "memory") return run_memory(a);
  std::fprintf(stderr, "concord_standin_app: unknown mode '%s'\n", mode.c_str());
  return 2;
}
