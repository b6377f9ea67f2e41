// The interception library's cost per launch: an empty kernel launched N times from the host,
// through the runtime (<<<>>>) or the driver (cuLaunchKernel, found through the runtime's
// cudaGetDriverEntryPointByVersion, as libraries find it), with the host time of each launch call
// measured on its own. Run plain and under LD_PRELOAD=libconcord_intercept.so (bench/intercept/run.sh):
// the difference of the medians is the library's cost per launch.
//
// The stream is synchronised every --batch launches, outside the timed calls, so the launch queue
// never fills and a launch never waits for the GPU to drain it.
//
//   concord_intercept_bench [--launches N] [--batch B] [--api runtime|driver] [--stream created|default] [--label TEXT]
// (--stream: a stream the program creates, or the legacy default stream)
// prints one JSON object: launches, api, label, and the per-launch host time in microseconds
// (median, p10, p90, p99, mean, min, max).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void empty_kernel() {}

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_));         \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)

double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

int usage(const char* why) {
  std::fprintf(stderr, "concord_intercept_bench: %s\nusage: concord_intercept_bench [--launches N] [--batch B] "
                       "[--api runtime|driver] [--stream created|default] [--label TEXT]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 100000, batch = 256;
  std::string api = "runtime", label, stream_kind = "created";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
    const std::string v = argv[++i];
    char* end = nullptr;
    if (a == "--launches") {
      launches = std::strtol(v.c_str(), &end, 10);
      if (*end || launches < 1) return usage(("--launches must be a positive integer, not '" + v + "'").c_str());
    } else if (a == "--batch") {
      batch = std::strtol(v.c_str(), &end, 10);
      if (*end || batch < 1 || batch > 1000) return usage(("--batch must be an integer in [1, 1000], not '" + v + "'").c_str());
    } else if (a == "--api") {
      if (v != "runtime" && v != "driver") return usage(("--api must be runtime or driver, not '" + v + "'").c_str());
      api = v;
    } else if (a == "--stream") {
      if (v != "created" && v != "default") return usage(("--stream must be created or default, not '" + v + "'").c_str());
      stream_kind = v;
    } else if (a == "--label") {
      label = v;
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  cudaStream_t stream = nullptr;
  if (stream_kind == "created") CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                                void**, void**);
  LaunchFn driver_launch = nullptr;
  CUfunction function = nullptr;
  if (api == "driver") {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn) {
      std::fprintf(stderr, "cuLaunchKernel not found through cudaGetDriverEntryPointByVersion\n");
      return 2;
    }
    driver_launch = reinterpret_cast<LaunchFn>(fn);
    cudaFunction_t f;
    CHECK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(&empty_kernel)));
    function = reinterpret_cast<CUfunction>(f);
  }
  auto launch = [&] {
    if (driver_launch) {
      const CUresult r = driver_launch(function, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
      if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "cuLaunchKernel: CUresult %d\n", static_cast<int>(r));
        std::exit(2);
      }
    } else {
      empty_kernel<<<1, 32, 0, stream>>>();
    }
  };
  // Warm-up: the first launches load the module and start the library.
  for (int i = 0; i < 1000; ++i) launch();
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaGetLastError());

  std::vector<double> us(static_cast<size_t>(launches));
  for (long i = 0; i < launches; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    const auto t1 = std::chrono::steady_clock::now();
    us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if ((i + 1) % batch == 0) CHECK(cudaStreamSynchronize(stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaGetLastError());
  double sum = 0;
  for (double v : us) sum += v;
  std::sort(us.begin(), us.end());
  std::printf("{\"label\": \"%s\", \"api\": \"%s\", \"stream\": \"%s\", \"launches\": %ld, \"batch\": %ld, \"median_us\": %.4f, \"p10_us\": %.4f, "
              "\"p90_us\": %.4f, \"p99_us\": %.4f, \"mean_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f}\n",
              label.c_str(), api.c_str(), stream_kind.c_str(), launches, batch, quantile(us, 0.5), quantile(us, 0.1), quantile(us, 0.9),
              quantile(us, 0.99), sum / static_cast<double>(us.size()), us.front(), us.back());
  if (stream) CHECK(cudaStreamDestroy(stream));
  return 0;
}
