// Helpers for GPU tests: a control block in device memory, written and read synchronously.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "cuda/check.h"
#include "cuda/handles.h"
#include "concord/backend.h"
#include "concord/device/control.h"
#include "concord/placement.h"
#include "concord/sm_set.h"
#include "concord/workload.h"

namespace concord::testing {

// Every elastic suite kernel at a size whose CPU reference is quick, with the relative error its
// output may have against that reference.
inline const std::map<std::string, std::pair<int64_t, double>> kReferenceCases = {
    {"fma_loop", {1 << 16, 1e-6}}, {"stream_triad", {1 << 20, 1e-6}}, {"vector_add", {1 << 20, 1e-6}},
    {"hotspot", {512, 1e-6}},      {"matmul", {256, 1e-5}},         {"kmeans", {1 << 15, 1e-3}},
    {"tc_gemm", {256, 1e-3}},      {"srad", {512, 1e-5}},          {"cfd_flux", {1 << 16, 1e-5}},
    {"gaussian", {512, 1e-6}},     {"hotspot3d", {128, 1e-6}},     {"bfs", {1 << 16, 0}},
    {"fft_stage", {1 << 16, 1e-5}}, {"pathfinder", {1 << 16, 0}},  {"backprop", {1 << 16, 1e-5}},
    {"sgemm", {256, 1e-5}},        {"stencil", {64, 1e-6}},        {"lbm", {1 << 16, 1e-5}},
    {"mri_q", {1 << 12, 1e-4}},    {"conv_im2col", {64, 1e-3}},
};

// CONCORD_GPU_TEST_KERNELS=a,b,c limits the per-kernel tests to those kernels (the sanitizer runs
// use the kernels with shared memory and barriers; every kernel runs in the plain test run).
inline bool selected(const std::string& name) {
  const char* env = std::getenv("CONCORD_GPU_TEST_KERNELS");
  if (!env || !*env) return true;
  const std::string list = std::string(",") + env + ",";
  return list.find("," + name + ",") != std::string::npos;
}

// Prepares every tenant of a workload on a backend, as the engine does when they join.
inline Status prepare_all(Backend& backend, const Workload& w) {
  for (size_t i = 0; i < w.tenants.size(); ++i) {
    std::vector<const KernelSpec*> kernels;
    for (const KernelStep& s : w.tenants[i].steps) kernels.push_back(&s.kernel);
    CONCORD_RETURN_IF_ERROR(backend.prepare_tenant(TenantId{static_cast<int64_t>(i)}, kernels));
  }
  return Status::ok();
}

#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const ::concord::Status assert_ok_status_ = (expr);   \
    ASSERT_TRUE(assert_ok_status_.is_ok()) << assert_ok_status_.to_string(); \
  } while (0)

class DeviceControl {
 public:
  Status init(BlockRange range, const SmSet& sms, int tlp, int chunk = 1) {
    CONCORD_RETURN_IF_ERROR(buffer_.allocate(1));
    device::ElasticControl c{};
    const auto w = sms.words();
    for (int i = 0; i < 4; ++i) c.allowed[i] = w[static_cast<size_t>(i)];
    c.tlp = tlp;
    c.chunk = chunk;
    c.range_begin = range.begin;
    c.range_end = range.end;
    CONCORD_CUDA(cudaMemcpy(buffer_.get(), &c, sizeof(c), cudaMemcpyHostToDevice));
    return Status::ok();
  }
  // Writes one field while kernels run, from a stream of its own.
  Status write(size_t offset, const void* data, size_t bytes, cudaStream_t stream) {
    CONCORD_CUDA(cudaMemcpyAsync(reinterpret_cast<char*>(buffer_.get()) + offset, data, bytes, cudaMemcpyHostToDevice, stream));
    return Status::ok();
  }
  Result<device::ElasticControl> read() const {
    device::ElasticControl c{};
    CONCORD_CUDA(cudaMemcpy(&c, buffer_.get(), sizeof(c), cudaMemcpyDeviceToHost));
    return c;
  }
  device::ElasticControl* get() const { return buffer_.get(); }

 private:
  cuda::DeviceBuffer<device::ElasticControl> buffer_;
};

// SMs of device 0 (the tests' device); a failed query fails the calling test.
inline int sm_count() {
  int n = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  EXPECT_EQ(e, cudaSuccess) << "cudaDeviceGetAttribute(MultiProcessorCount): " << cudaGetErrorName(e);
  return n;
}

}  // namespace concord::testing
