// concord (src/policy/concord/): the project's own LC/BE policy on the simulator. On the scenario
// SGDRC's tests use (one LC tenant beside two BE tenants of elastic kernels) and on one whose BE
// runs an opaque library kernel: which rule each BE launch went through (its counters), the tail
// it keeps and the BE it lets through against orion's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lc_be_scenario.h"
#include "policy/concord/concord_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using policy::ConcordOptions;
using policy::ConcordPolicy;
using testing::lc_beside_be;
using testing::LcBe;
using testing::measure;
using testing::step;
using testing::tenant;
using testing::workload;

TEST(ConcordScenario, ElasticBeShrinksBesideLcForMoreBeThanOrion) {
  auto alone = testing::run_on_sim(lc_beside_be(false), "streams");
  ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();
  auto orion = testing::run_on_sim(lc_beside_be(true), "orion");
  ASSERT_TRUE(orion.is_ok()) << orion.status().to_string();
  ConcordPolicy concord{ConcordOptions{}};
  auto run = testing::run_on_sim(lc_beside_be(true), concord);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const LcBe a = measure(*alone), o = measure(*orion), c = measure(*run);
  std::printf("LC p99 alone %.3f ms, orion %.3f ms, concord %.3f ms; BE/s orion %.1f, concord %.1f\n", a.p99 * 1e3, o.p99 * 1e3,
              c.p99 * 1e3, o.be_per_s, c.be_per_s);
  const auto stats = concord.stats();
  for (const auto& [k, v] : stats) std::printf("  %s = %.0f\n", k.c_str(), v);
  // Every BE kernel here is elastic: each went out shrunk beside LC work or on every SM, or waited
  // at Orion's profile and duration rules; none took the opaque path, and the running ones were
  // resized as LC work came and went.
  EXPECT_GT(stats.at("concord.be_elastic_beside_lc"), 0);
  EXPECT_GT(stats.at("concord.be_elastic_held"), 0);
  EXPECT_GT(stats.at("concord.be_alone"), 0);
  EXPECT_EQ(stats.at("concord.be_opaque_admitted_beside_lc"), 0);
  EXPECT_EQ(stats.at("concord.be_opaque_held"), 0);
  EXPECT_GT(stats.at("concord.be_resizes"), 0);
  EXPECT_EQ(stats.at("concord.lc_launches"), 80 * 7);  // 80 requests of 7 launches
  // Running elastic BE shrunk off the LC's TPCs, and elastic BE launched beside the LC on the
  // other TPCs where the gate's SM count would hold it: more BE than orion. The LC pays for it:
  // since the simulator charges a launch's latency to a stream with nothing on the GPU (the LC's
  // first kernel of each request), concord's LC p99 is above orion's here (H200 model: 1.22 against
  // 1.00 ms, 0.80 alone; BE 1.04x), as on the GPU's bench/lsbe (docs/results.md, concord on four
  // H200). Before that charge the simulator put it below (1.08 against 1.10 ms).
  EXPECT_GT(c.be_per_s, o.be_per_s);
  EXPECT_LT(c.p99, 2.0 * a.p99);
}

// An LC tenant beside a BE tenant of opaque library GEMMs: those pass Orion's gate.
Workload lc_beside_opaque() {
  Workload w = lc_beside_be(false);
  TenantSpec be = tenant("blas", {step("cublas_gemm", 4096)}, 400);
  w.tenants.push_back(be);
  return w;
}

TEST(ConcordScenario, OpaqueBePassesOrionsGate) {
  ConcordPolicy concord{ConcordOptions{}};
  auto run = testing::run_on_sim(lc_beside_opaque(), concord);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  auto orion = testing::run_on_sim(lc_beside_opaque(), "orion");
  ASSERT_TRUE(orion.is_ok()) << orion.status().to_string();
  const LcBe o = measure(*orion), c = measure(*run);
  std::printf("opaque BE: LC p99 orion %.3f ms, concord %.3f ms; BE/s orion %.1f, concord %.1f\n", o.p99 * 1e3, c.p99 * 1e3,
              o.be_per_s, c.be_per_s);
  const auto stats = concord.stats();
  for (const auto& [k, v] : stats) std::printf("  %s = %.0f\n", k.c_str(), v);
  EXPECT_EQ(stats.at("concord.be_elastic_beside_lc"), 0);
  EXPECT_EQ(stats.at("concord.be_resizes"), 0);
  EXPECT_GT(stats.at("concord.be_opaque_held"), 0);
  EXPECT_GT(stats.at("concord.be_alone") + stats.at("concord.be_opaque_admitted_beside_lc"), 0);
  // The same rule as orion's on the same launches: the same tail within the simulator's noise.
  EXPECT_LT(c.p99, 1.1 * o.p99);
}

TEST(ConcordParams, BadValuesAreRefusedByName) {
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"dur_fraction", "0"}, {"tolerance", "1"}, {"steps", "0"}, {"reserve", "0"}, {"window", "-1"}, {"be_tlp", "-1"}, {"elastic_gate", "maybe"}, {"ahead", "1"}}) {
    auto p = builtin_policies().make("concord", {{name, value}});
    ASSERT_FALSE(p.is_ok()) << name << "=" << value;
    EXPECT_NE(p.status().message().find(name), std::string::npos) << p.status().to_string();
  }
  EXPECT_TRUE(builtin_policies().make("concord", {{"dur_fraction", "0.05"}, {"steps", "4"}}).is_ok());
}

}  // namespace
}  // namespace concord
