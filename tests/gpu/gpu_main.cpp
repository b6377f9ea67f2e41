// The GPU tests' main: without a usable CUDA device every test is skipped, with the reason, and
// the process exits with kSkipExitCode, which ctest reports as a skip (SKIP_RETURN_CODE in
// tests/CMakeLists.txt) while a direct run still fails loudly on a GPU machine that lost its GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

constexpr int kSkipExitCode = 77;

// Why no GPU test can run here, or empty when a device is present.
std::string no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (count == 0) return "no CUDA device is visible (CUDA_VISIBLE_DEVICES may hide them)";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the tests (ctest's discovery) needs no device.
  if (!GTEST_FLAG_GET(list_tests)) {
    if (const std::string reason = no_device_reason(); !reason.empty()) {
      std::printf("[  SKIPPED ] every GPU test: %s\n", reason.c_str());
      return kSkipExitCode;
    }
  }
  return RUN_ALL_TESTS();
}
