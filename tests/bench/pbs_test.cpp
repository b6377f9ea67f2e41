// bench/pbs's figures: shares of SMs as PBS's runner splits them, the oracle's combinations, work
// scaled for alone and oracle runs, rates over a window, the co-run window, the settle event of a
// trace, and Table III's SD-based metrics.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "pbs_measure.h"

namespace concord {
namespace {

using pbs_bench::co_run_window;
using pbs_bench::rate_in;

TEST(PbsBench, SharesMatchTheRunnersSplit) {
  EXPECT_EQ(pbs_bench::share_of(0, 2, 132, true), "0-65");
  EXPECT_EQ(pbs_bench::share_of(1, 2, 132, true), "66-131");
  EXPECT_EQ(pbs_bench::share_of(0, 3, 132, true), "0-43");
  EXPECT_EQ(pbs_bench::share_of(2, 3, 130, true), "86-129");  // the last takes the remainder
  EXPECT_EQ(pbs_bench::share_of(1, 3, 132, false), "0-131");
}

TEST(PbsBench, CombinationsCoverEveryLevelOncePerTenant) {
  const auto c = pbs_bench::combinations({1, 4, 0}, 3);
  ASSERT_EQ(c.size(), 27u);
  EXPECT_EQ(c.front(), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(c[1], (std::vector<int>{1, 1, 4}));
  EXPECT_EQ(c.back(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(pbs_bench::combination_name(c[1]), "1_1_4");
}

TEST(PbsBench, ScaledWorkKeepsAtLeastOneOfEach) {
  Workload w;
  w.tenants.resize(2);
  w.tenants[0].requests = 40;
  w.tenants[0].steps.push_back({KernelSpec{}, 3});
  w.tenants[1].requests = 1;
  auto s = pbs_bench::scaled(w, 0.5);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->tenants[0].requests, 20);
  EXPECT_EQ(s->tenants[0].steps[0].count, 2);
  EXPECT_EQ(s->tenants[1].requests, 1);
  EXPECT_FALSE(pbs_bench::scaled(w, 0).is_ok());
  EXPECT_FALSE(pbs_bench::scaled(w, 1.5).is_ok());
}

RunRecord two_tenants() {
  // Tenant 0: four kernels of 1 s from t=0; tenant 1: two kernels of 1.5 s from t=1.
  RunRecord r;
  r.tenants.resize(2);
  for (int k = 0; k < 4; ++k) r.launches.push_back({LaunchId{k}, TenantId{0}, "a", 0, k, 10, double(k), double(k), double(k + 1)});
  r.launches.push_back({LaunchId{4}, TenantId{1}, "b", 0, 0, 10, 1, 1, 2.5});
  r.launches.push_back({LaunchId{5}, TenantId{1}, "b", 1, 0, 10, 2.5, 2.5, 4.0});
  r.tenants[0].finish = 4;
  r.tenants[1].finish = 4.0;
  r.tenants[1].begin = 1;
  return r;
}

TEST(PbsBench, RatesCountKernelsProRataOverTheWindow) {
  const RunRecord r = two_tenants();
  const lsbe::Window w = co_run_window(r);
  EXPECT_DOUBLE_EQ(w.begin, 1);  // both running from the later first start
  EXPECT_DOUBLE_EQ(w.end, 4);    // to the first finish
  EXPECT_DOUBLE_EQ(rate_in(r, TenantId{0}, w), 1.0);        // three of its kernels in 3 s
  EXPECT_DOUBLE_EQ(rate_in(r, TenantId{1}, w), 2.0 / 3.0);  // two in 3 s
  EXPECT_DOUBLE_EQ(rate_in(r, TenantId{1}, {1.75, 2.5}), 0.5 / 0.75);  // half a kernel in 0.75 s
  EXPECT_DOUBLE_EQ(rate_in(r, TenantId{0}, {2, 2}), 0);
}

TEST(PbsBench, SlowdownIsTheSharedRateOverTheAloneRateOnTheSameSms) {
  // The H100 run's fma_loop: 0.342 s alone on its half of the SMs (its best TLP), 0.171 s alone on
  // the whole GPU; in a co-run it kept its half-GPU rate. Its SD is 1: the co-runner cost it
  // nothing. (The first summarize.py multiplied the whole-GPU NP by alone-whole over alone-half and
  // read 0.25 here, which made every SD-based FI of the first run wrong.)
  const double alone_half = 1 / 0.342, shared = 1 / 0.342;
  const double memory_alone = 1 / 0.197, memory_shared = 0.8 / 0.197;
  auto m = pbs_bench::sd_metrics({shared, memory_shared}, {alone_half, memory_alone});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_DOUBLE_EQ(m->sd[0], 1.0);
  EXPECT_DOUBLE_EQ(m->sd[1], 0.8);
  EXPECT_DOUBLE_EQ(m->ws, 1.8);
  EXPECT_DOUBLE_EQ(m->fi, 0.8);
  EXPECT_DOUBLE_EQ(m->hs, 2 / (1 + 1 / 0.8));
  EXPECT_FALSE(pbs_bench::sd_metrics({1, 1}, {1, 0}).is_ok());
  EXPECT_FALSE(pbs_bench::sd_metrics({1}, {1, 1}).is_ok());
}

TEST(PbsBench, FirstSettleOfATrace) {
  const std::string path = ::testing::TempDir() + "/pbs_bench_trace.jsonl";
  {
    std::ofstream out(path);
    out << R"({"event":"restart","t":0.001,"tlp_changes":0,"why":"joined"})" << "\n"
        << R"({"eb":[1,2],"event":"sample","t":0.003,"tlp":[8,1],"tlp_changes":2})" << "\n"
        << R"({"event":"settled","samples":7,"t":0.0193,"tlp":[8,8],"tlp_changes":9})" << "\n"
        << R"({"event":"settled","samples":7,"t":0.073,"tlp":[8,8],"tlp_changes":18})" << "\n";
  }
  auto s = pbs_bench::first_settle(path);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->t, 0.0193);
  EXPECT_EQ(s->samples, 7);
  EXPECT_EQ(s->tlp_changes, 9);
  std::remove(path.c_str());
  EXPECT_FALSE(pbs_bench::first_settle(path).has_value());
}

}  // namespace
}  // namespace concord
