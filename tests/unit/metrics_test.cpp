#include <gtest/gtest.h>

#include <vector>

#include "concord/experiment.h"
#include "concord/metrics.h"

namespace concord {
namespace {

TEST(Metrics, FormulasOnHandComputedCase) {
  // Two tenants: alone 2 and 3 s, shared 4 and 4 s -> NP 0.5 and 0.75.
  const std::vector<double> np = {0.5, 0.75};
  EXPECT_DOUBLE_EQ(normalized_progress(2.0, 4.0), 0.5);
  EXPECT_DOUBLE_EQ(system_throughput(np), 1.25);
  EXPECT_DOUBLE_EQ(average_normalized_turnaround(np), (2.0 + 4.0 / 3.0) / 2.0);
  EXPECT_DOUBLE_EQ(fairness_index(np), 0.5 / 0.75);
  EXPECT_DOUBLE_EQ(harmonic_speedup(np), 2.0 / (2.0 + 4.0 / 3.0));
}

TEST(Metrics, FairnessIsMinOverAllPairs) {
  const std::vector<double> np = {0.9, 0.3, 0.6};
  EXPECT_DOUBLE_EQ(fairness_index(np), 0.3 / 0.9);
}

TEST(Metrics, NearestRankPercentile) {
  const std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(hundred, 99), 99);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{}, 50), 0);
}

RunRecord two_tenant_run() {
  RunRecord run;
  run.makespan = 10;
  TenantRecord lc;
  lc.name = "lc";
  lc.cls = TenantClass::latency_critical;
  lc.latency_target = 2;
  lc.begin = 0;
  lc.finish = 10;
  // latencies 1, 3, 1.5, 2 -> 3 of 4 within a 2 s target
  lc.requests = {{0, 0, 1}, {2, 3, 5}, {6, 6, 7.5}, {8, 8, 10}};
  TenantRecord be;
  be.name = "be";
  be.begin = 0;
  be.finish = 8;
  be.logical_blocks = 800;
  be.requests = {{0, 0, 4}, {4, 4, 8}};
  run.tenants = {lc, be};
  return run;
}

TEST(Metrics, ComputeFromRunRecord) {
  const RunRecord run = two_tenant_run();
  const std::vector<Seconds> alone = {5, 4};
  auto m = compute_metrics(run, alone, 12.0);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_DOUBLE_EQ(m->tenants[0].np, 0.5);
  EXPECT_DOUBLE_EQ(m->tenants[1].np, 0.5);
  EXPECT_DOUBLE_EQ(m->np_sum, 1.0);
  EXPECT_DOUBLE_EQ(m->antt, 2.0);
  EXPECT_DOUBLE_EQ(m->fi, 1.0);
  EXPECT_DOUBLE_EQ(m->hs, 0.5);
  EXPECT_DOUBLE_EQ(m->tenants[0].slo_attainment, 0.75);
  EXPECT_DOUBLE_EQ(m->tenants[0].latency_p50, 1.5);
  EXPECT_DOUBLE_EQ(m->tenants[0].latency_p99, 3);
  EXPECT_DOUBLE_EQ(m->tenants[1].blocks_per_s, 100);
  EXPECT_DOUBLE_EQ(m->lc_goodput, 0.3);
  EXPECT_DOUBLE_EQ(m->be_throughput, 0.2);
  EXPECT_DOUBLE_EQ(m->overall_throughput, 0.5);
  ASSERT_TRUE(m->speedup_over_serial.has_value());
  EXPECT_DOUBLE_EQ(*m->speedup_over_serial, 1.2);
}

TEST(Metrics, WindowStpCountsTheWorkDoneUntilTheFirstTenantFinishes) {
  // Serial-like interleaving: A (2 requests of 1 s alone each) and B (4 requests of 1 s alone each)
  // take turns on the GPU; A finishes at 4 s, by when B has done 2 requests. Over the window each
  // did 2 s of alone work in 4 s: 0.5 + 0.5 = 1. Over the whole run B's tail (alone from 4 to 6 s)
  // raises its NP: 2/4 + 4/6.
  RunRecord run;
  TenantRecord a, b;
  a.name = "a";
  b.name = "b";
  a.requests = {{0, 0, 1}, {1, 3, 4}};  // arrival, start, end
  b.requests = {{0, 1, 2}, {2, 2.5, 3.5}, {3.5, 4, 5}, {5, 5, 6}};
  a.begin = 0;
  a.finish = 4;
  b.begin = 0;
  b.finish = 6;
  run.tenants = {a, b};
  run.makespan = 6;
  const std::vector<Seconds> alone = {2, 4};
  auto m = compute_metrics(run, alone, std::nullopt);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_DOUBLE_EQ(m->window, 4);
  EXPECT_DOUBLE_EQ(m->tenants[0].np_window, 2 * 1.0 / 4);
  EXPECT_DOUBLE_EQ(m->tenants[1].np_window, 2 * 1.0 / 4);  // requests 1 and 2 done by 4 s, the third not begun
  EXPECT_DOUBLE_EQ(m->stp_window, 1.0);
  EXPECT_DOUBLE_EQ(m->np_sum, 2.0 / 4 + 4.0 / 6);
  // A request in flight at the window's end counts by the share of its running time elapsed.
  run.tenants[1].requests[2] = {3.5, 3.5, 4.5};
  m = compute_metrics(run, alone, std::nullopt);
  ASSERT_TRUE(m.is_ok());
  EXPECT_DOUBLE_EQ(m->tenants[1].np_window, 2.5 * 1.0 / 4);
}

TEST(Metrics, HeadlineByTheKindOfWorkload) {
  const RunRecord run = two_tenant_run();
  const std::vector<Seconds> alone = {5, 4};
  // Closed loop with a serial reference: throughput over serial (12 s / 10 s).
  auto closed = compute_metrics(run, alone, 12.0, Headline::Kind::closed_loop);
  ASSERT_TRUE(closed.is_ok());
  EXPECT_EQ(closed->headline.name, "throughput_over_serial");
  EXPECT_DOUBLE_EQ(closed->headline.value, 1.2);
  EXPECT_NE(headline_text(closed->headline).find("throughput 1.200x serial"), std::string::npos);
  // Closed loop without one: the window STP stands in, and says why.
  auto no_serial = compute_metrics(run, alone, std::nullopt, Headline::Kind::closed_loop);
  ASSERT_TRUE(no_serial.is_ok());
  EXPECT_EQ(no_serial->headline.name, "stp_window");
  EXPECT_DOUBLE_EQ(no_serial->headline.value, no_serial->stp_window);
  EXPECT_NE(headline_text(no_serial->headline).find("--no-serial"), std::string::npos);
  // Open loop: the LC's SLO attainment (3 of 4 within target), its goodput, the BE's NP.
  auto open = compute_metrics(run, alone, 12.0, Headline::Kind::open_loop);
  ASSERT_TRUE(open.is_ok());
  EXPECT_EQ(open->headline.name, "lc_slo_attainment");
  EXPECT_DOUBLE_EQ(open->headline.value, 0.75);
  EXPECT_DOUBLE_EQ(open->headline.lc_goodput_per_s, 0.3);
  EXPECT_DOUBLE_EQ(open->headline.be_np_sum, 0.5);
  EXPECT_NE(headline_text(open->headline).find("LC SLO attainment 75.0%"), std::string::npos);
  // Open loop without an LC tenant: the BE progress.
  RunRecord be_only = run;
  be_only.tenants.erase(be_only.tenants.begin());
  auto be = compute_metrics(be_only, std::vector<Seconds>{4}, std::nullopt, Headline::Kind::open_loop);
  ASSERT_TRUE(be.is_ok());
  EXPECT_EQ(be->headline.name, "be_np_sum");
  EXPECT_DOUBLE_EQ(be->headline.value, 0.5);
}

TEST(Metrics, HeadlineKindFollowsArrivals) {
  Workload w;
  w.tenants.resize(2);
  EXPECT_EQ(headline_kind(w), Headline::Kind::closed_loop);
  w.tenants[1].arrival.kind = ArrivalProcess::Kind::poisson;
  EXPECT_EQ(headline_kind(w), Headline::Kind::open_loop);
  w.tenants[1].arrival.kind = ArrivalProcess::Kind::timestamps;
  EXPECT_EQ(headline_kind(w), Headline::Kind::open_loop);
}

TEST(Metrics, RejectsMismatchedAloneTimes) {
  const RunRecord run = two_tenant_run();
  const std::vector<Seconds> alone = {5};
  auto m = compute_metrics(run, alone, std::nullopt);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace concord
