// bench/lsbe's pieces on the simulator: BE runs only while the LC has requests, the window
// figures (kernels counted pro rata, SM share with resizes), the LC figures, and the mix checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/sim/sim_backend.h"
#include "be_while_lc.h"
#include "lsbe_metrics.h"
#include "lsbe_mix.h"
#include "test_support.h"

namespace concord::lsbe {
namespace {

using concord::testing::step;
using concord::testing::tenant;
using concord::testing::workload;

RunRecord run_source(TenantSource& source, const std::string& policy, EngineObserver* observer = nullptr) {
  sim::SimBackend backend(h100_sxm_spec());
  auto p = builtin_policies().make(policy, {});
  EXPECT_TRUE(p.is_ok());
  EngineOptions o;
  o.observer = observer;
  auto r = run_engine(source, backend, **p, o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(*r) : RunRecord{};
}

Workload lc_and_be(int be_requests) {
  TenantSpec lc = tenant("lc", {step("tc_gemm", 1024), step("vector_add", 1 << 20)}, 20);
  lc.cls = TenantClass::latency_critical;
  lc.latency_target = 1e-3;
  lc.arrival = ArrivalProcess{ArrivalProcess::Kind::poisson, 2000, {}};
  return workload({lc, tenant("be", {step("stream_triad", 1 << 24)}, be_requests)});
}

TEST(LsbeSource, BeRunsOnlyWhileTheLcHasRequests) {
  const Workload w = lc_and_be(100000);
  BeWhileLc source(w, {});
  const RunRecord r = run_source(source, "streams");
  ASSERT_EQ(r.tenants.size(), 2u);
  const TenantRecord& lc = r.tenants[0];
  const TenantRecord& be = r.tenants[1];
  EXPECT_TRUE(source.be_stopped());
  EXPECT_EQ(lc.requests.size(), 20u);
  EXPECT_GT(be.requests.size(), 1u);
  EXPECT_LT(be.requests.size(), 100000u);
  // No BE request arrives after the LC's last request ended; the one in flight then finishes.
  for (const RequestRecord& q : be.requests) EXPECT_LE(q.arrival, lc.finish);
  EXPECT_GE(be.finish, lc.finish);
  EXPECT_EQ(r.makespan, be.finish);
}

TEST(LsbeSource, WithoutAnLcTenantBeRunsItsRequests) {
  const Workload w = workload({tenant("be", {step("vector_add", 1 << 20)}, 7)});
  BeWhileLc source(w, {});
  const RunRecord r = run_source(source, "serial");
  EXPECT_EQ(r.tenants[0].requests.size(), 7u);
  EXPECT_FALSE(source.be_stopped());
}

TEST(LsbeSource, AStopPredicateEndsBeAtARequestEnd) {
  const Workload w = workload({tenant("be", {step("vector_add", 1 << 20), step("vector_add", 1 << 20)}, 50)});
  int asked = 0;
  BeWhileLc source(w, {}, [&](TenantId) { return ++asked == 3; });
  const RunRecord r = run_source(source, "serial");
  EXPECT_EQ(asked, 3);  // once per request end, until it said stop
  EXPECT_EQ(r.tenants[0].requests.size(), 3u);
  EXPECT_EQ(r.launches.size(), 6u);
  EXPECT_TRUE(source.be_stopped());
}

TEST(LsbeMetrics, KernelsCountByTheirShareOfTheWindow) {
  const std::vector<std::pair<Seconds, Seconds>> k{{0, 1}, {1, 2}, {2, 4}, {1.5, -1}, {2, 2}, {5, 5}};
  // (0,1): half inside; (1,2): whole; (2,4): half; unfinished: nothing; (2,2): inside; (5,5): outside.
  EXPECT_DOUBLE_EQ(kernels_in_window(k, Window{0.5, 3}), 0.5 + 1 + 0.5 + 1);
  EXPECT_DOUBLE_EQ(kernels_in_window(k, Window{10, 11}), 0);
}

TEST(LsbeMetrics, SmShareFollowsResizesAndCountsOverlapOnce) {
  RunRecord run;
  run.makespan = 10;
  auto dispatch = [&](int64_t id, int64_t tenant, Seconds start, Seconds end, SmSet sms) {
    DispatchRecord d;
    d.id = DispatchId{id};
    d.tenants.push_back(TenantId{tenant});
    d.start = start;
    d.end = end;
    d.placement.sms = sms;
    run.dispatches.push_back(d);
  };
  dispatch(0, 1, 0, 10, SmSet::range(0, 10));
  dispatch(1, 1, 2, 4, SmSet::range(0, 10));   // the same SMs: counted once
  dispatch(2, 0, 0, 10, SmSet::range(50, 50));  // another tenant's
  ResizeLog log;
  log.on_resize(DispatchId{0}, SmSet::range(0, 20), 5);
  const std::vector<TenantId> be{TenantId{1}};
  // 10 SMs for 5 s, then 20 SMs for 5 s, of 100 SMs over 10 s.
  EXPECT_DOUBLE_EQ(mean_sm_share(run, log, be, Window{0, 10}, 100), (10 * 5 + 20 * 5) / 1000.0);
  // Over [4, 6]: 10 SMs for 1 s, 20 for 1 s.
  EXPECT_DOUBLE_EQ(mean_sm_share(run, log, be, Window{4, 6}, 100), 30 / 200.0);
}

TEST(LsbeMetrics, StaticPartitionGivesBeHalfTheSms) {
  const Workload w = lc_and_be(100000);
  BeWhileLc source(w, {});
  ResizeLog log;
  const RunRecord r = run_source(source, "static-partition", &log);
  const Window win = request_window(r.tenants[0].requests);
  const std::vector<TenantId> be{TenantId{1}};
  EXPECT_NEAR(mean_sm_share(r, log, be, win, h100_sxm_spec().sm_count), 0.5, 1e-9);
}

TEST(LsbeMetrics, LcFiguresCountRequestsWithinTheTarget) {
  const std::vector<RequestRecord> q{{0, 0, 1}, {1, 1, 1.5}, {2, 2.5, 5}, {3, 3, -1}};
  const LcFigures f = lc_figures(q, 1.0, Window{0, 5});
  EXPECT_EQ(f.requests, 3);  // the unfinished one is left out
  EXPECT_EQ(f.within_target, 2);
  EXPECT_DOUBLE_EQ(f.slo_attainment, 2.0 / 3);
  EXPECT_DOUBLE_EQ(f.p99, 3.0);
  EXPECT_DOUBLE_EQ(f.goodput_rps, 2 / 5.0);
}

TEST(LsbeMetrics, MedianByPicksTheMiddleRepetitionWhole) {
  const std::vector<nlohmann::json> reps{{{"rate", 681.0}, {"run", 0}}, {{"rate", 255.5}, {"run", 1}}, {{"rate", 676.0}, {"run", 2}}};
  auto m = median_by(reps, "rate");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ((*m)["run"], 2);  // 676: the slow outlier (255.5) does not set the reference
  const std::vector<nlohmann::json> even{{{"rate", 4.0}, {"run", 0}}, {{"rate", 1.0}, {"run", 1}}};
  EXPECT_EQ((*median_by(even, "rate"))["run"], 1);  // the lower middle
  const std::vector<nlohmann::json> bad{{{"rate", 1.0}}, {{"rate", "fast"}}};
  auto e = median_by(bad, "rate");
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("repetition 1"), std::string::npos);
  EXPECT_FALSE(median_by(std::vector<nlohmann::json>{}, "rate").is_ok());
}

TEST(LsbeMix, ALoadedMixPutsItsLcFirstAndBadMixesAreNamed) {
  const auto dir = std::filesystem::temp_directory_path() / "concord_lsbe_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  };
  const std::string be = "  - {name: be, requests: 3, kernels: [{kernel: vector_add, size: 1024}]}\n";
  const std::string lc =
      "  - {name: lc, class: LC, target_ms: 1, requests: 4, arrival: {poisson: 100}, kernels: [{kernel: vector_add, size: 1024}]}\n";
  auto ok = load_mix(write("ok.yaml", "tenants:\n" + be + lc));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->lc().name, "lc");
  EXPECT_EQ(ok->be(0).name, "be");
  const Workload s = shared(*ok, 9, 50, 0.002, {11});
  EXPECT_EQ(s.tenants[0].requests, 9);
  EXPECT_EQ(s.tenants[0].arrival.rate_per_s, 50);
  EXPECT_EQ(s.tenants[0].latency_target, 0.002);
  EXPECT_EQ(s.tenants[1].requests, 11);
  EXPECT_EQ(lc_closed(*ok, 5).tenants[0].arrival.kind, ArrivalProcess::Kind::closed_loop);

  auto none = load_mix(write("none.yaml", "tenants:\n" + be));
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("exactly one LC tenant; it has 0"), std::string::npos) << none.status().to_string();
  auto no_be = load_mix(write("nobe.yaml", "tenants:\n" + lc));
  ASSERT_FALSE(no_be.is_ok());
  EXPECT_NE(no_be.status().message().find("at least one BE tenant"), std::string::npos);
  auto open_be = load_mix(write("open.yaml", "tenants:\n" + lc +
                                                 "  - {name: be, requests: 3, arrival: {poisson: 5}, kernels: [{kernel: vector_add, size: 1024}]}\n"));
  ASSERT_FALSE(open_be.is_ok());
  EXPECT_NE(open_be.status().message().find("BE tenant 'be' must run closed loop"), std::string::npos);
  auto missing = load_mix((dir / "missing.yaml").string());
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("missing.yaml"), std::string::npos);
}

TEST(LsbeMix, BeCeilingCoversHalfTheTimeLimitAtAloneSpeed) {
  EXPECT_EQ(be_request_ceiling(100, 10), 501);
  EXPECT_EQ(be_request_ceiling(0, 10), 1);
  EXPECT_EQ(be_request_ceiling(1e9, 1e9), static_cast<int>(spec_limits::kRequests));
}

}  // namespace
}  // namespace concord::lsbe
