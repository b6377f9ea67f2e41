// The profiler through the CUDA backend (the same code CI runs on the simulator): one elastic
// kernel's SM curve, cache policies alone and under pressure, TLP sweep, linear model and demand
// land in the store, keyed by the device's own name; a second run measures nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/backend_factory.h"
#include "profile/profiler.h"

namespace concord {
namespace {

TEST(Profiler, MeasuresAnElasticKernelThroughTheCudaBackend) {
  cuda::register_backend();
  const std::string db = (std::filesystem::path(::testing::TempDir()) / ("profiler_" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(db);
  auto store = ProfileStore::open(db);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  profile::ProfileOptions o;
  o.kernels = {"vector_add"};
  o.sizes = {{"vector_add", int64_t{1} << 22}};
  std::ostringstream progress;
  auto report = profile::profile_kernels(**store, BackendConfig{"cuda", {}, 1}, o, progress);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string() << "\n" << progress.str();
  EXPECT_EQ(report->measured, 1);
  EXPECT_EQ(report->fields, 5);
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->profiles.size(), 1u);
  EXPECT_TRUE(all->problems.empty());
  const KernelProfile& p = all->profiles.front();
  EXPECT_EQ(p.key.kernel, "vector_add");
  EXPECT_NE(p.key.gpu.find("NVIDIA"), std::string::npos) << "the device's own name: " << p.key.gpu;
  EXPECT_EQ(measured_fields(p), ProfileFields::all());
  ASSERT_FALSE(p.sm_curve.empty());
  for (size_t i = 1; i < p.sm_curve.size(); ++i) EXPECT_GT(p.sm_curve[i].sms, p.sm_curve[i - 1].sms);
  // Fewer SMs never make a memory-bound kernel much faster: the curve falls with SMs, noise aside.
  EXPECT_GT(p.sm_curve.front().seconds, p.sm_curve.back().seconds);
  for (double t : p.cache_seconds) EXPECT_GT(t, 0);
  // Under pressure every policy is timed, and the kernel at half its occupancy beside a streaming
  // kernel is slower than alone on the whole GPU.
  for (double t : p.cache_pressure_seconds) EXPECT_GT(t, 0);
  EXPECT_GT(p.cache_pressure_seconds[0], p.cache_seconds[0]);
  EXPECT_EQ(static_cast<int>(p.tlp_seconds.size()), p.blocks_per_sm);
  EXPECT_GT(p.linear_slope, 0);
  EXPECT_GT(p.demand_sms, 0);
  std::printf("vector_add 4M on %s (driver %s): alone %.1f us, beside stream_triad %.1f us, d = %d SMs\n",
              p.key.gpu.c_str(), p.key.driver.c_str(), p.cache_seconds[0] * 1e6, p.cache_pressure_seconds[0] * 1e6,
              p.demand_sms);
  // Resumable: nothing is missing, so nothing is measured.
  auto again = profile::profile_kernels(**store, BackendConfig{"cuda", {}, 1}, o, progress);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->measured, 0);
  EXPECT_EQ(again->skipped, 1);
  std::filesystem::remove(db);
}

}  // namespace
}  // namespace concord
