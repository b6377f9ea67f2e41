// PBS and its baselines on the simulator: the search runs to a settled combination through TLP
// changes of running dispatches, every block runs, the split gives each tenant its own SMs, the
// baselines place what they say, and bad parameters fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

// Two memory-heavy tenants, long enough for a search of a few dozen 2 ms windows.
Workload memory_pair() {
  return workload({tenant("triad", {step("stream_triad", 1 << 24, 800)}), tenant("kmeans", {step("kmeans", 1 << 22, 800)})});
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

int64_t blocks_of(const RunRecord& r) {
  int64_t n = 0;
  for (const auto& t : r.tenants) n += t.logical_blocks;
  return n;
}

TEST(Pbs, SearchSettlesAndEveryBlockRuns) {
  for (const char* metric : {"ws", "fi", "hs"}) {
    SCOPED_TRACE(metric);
    const std::string trace = ::testing::TempDir() + "/pbs_trace_" + metric + ".jsonl";
    std::remove(trace.c_str());
    auto run = run_on_sim(memory_pair(), "pbs", 1, {{"metric", metric}, {"trace", trace}});
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    auto alone = run_on_sim(memory_pair(), "maxtlp", 1);
    ASSERT_TRUE(alone.is_ok());
    EXPECT_EQ(blocks_of(*run), blocks_of(*alone));
    const auto lines = read_lines(trace);
    int samples = 0, settled = 0;
    std::vector<int> choice;
    for (const auto& l : lines) {
      if (l["event"] == "sample") {
        ++samples;
        EXPECT_EQ(l["tlp"].size(), 2u);
        EXPECT_EQ(l["eb"].size(), 2u);
      }
      if (l["event"] == "settled" && settled++ == 0) choice = l["tlp"].get<std::vector<int>>();
    }
    EXPECT_GT(samples, 3);
    ASSERT_GE(settled, 1) << "the search never settled";
    EXPECT_EQ(choice.size(), 2u);
    // Sweeps over 1, 2, 4, ... for two tenants: fewer samples than every combination.
    EXPECT_LT(samples, 30);
  }
}

TEST(Pbs, SplitGivesEachTenantHalfTheSmsAndSharedGivesAll) {
  for (const char* sms : {"split", "shared"}) {
    auto run = run_on_sim(memory_pair(), "pbs", 1, {{"sms", sms}});
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    for (const auto& d : run->dispatches) {
      EXPECT_EQ(d.placement.form, LaunchForm::persistent);
      if (std::string(sms) == "shared") {
        EXPECT_EQ(d.placement.sms.count(), 132);
      } else if (d.dispatched < run->tenants[0].finish && d.dispatched < run->tenants[1].finish) {
        EXPECT_EQ(d.placement.sms, d.tenants.front().value == 0 ? SmSet::range(0, 66) : SmSet::range(66, 66));
      }
    }
  }
}

TEST(PbsBaselines, PlaceWhatTheySay) {
  auto best = run_on_sim(memory_pair(), "besttlp", 1, {{"tlp.0", "2"}, {"tlp.1", "3"}});
  ASSERT_TRUE(best.is_ok()) << best.status().to_string();
  for (const auto& d : best->dispatches) EXPECT_EQ(d.placement.tlp, d.tenants.front().value == 0 ? 2 : 3);
  auto max = run_on_sim(memory_pair(), "maxtlp", 1);
  ASSERT_TRUE(max.is_ok());
  for (const auto& d : max->dispatches) EXPECT_EQ(d.placement.tlp, 0);
  // Without a pbs facet a kernel's L1 miss rate is 1: Mod+Bypass bypasses L1 for both.
  auto bypass = run_on_sim(memory_pair(), "modbypass", 1);
  ASSERT_TRUE(bypass.is_ok()) << bypass.status().to_string();
  for (const auto& d : bypass->dispatches) EXPECT_EQ(d.placement.cache, CachePolicy::l1_bypass);
  // The hill climber moves TLP: some launch starts below the highest TLP.
  auto climb = run_on_sim(memory_pair(), "dyncta", 1);
  ASSERT_TRUE(climb.is_ok()) << climb.status().to_string();
  bool moved = false;
  for (const auto& d : climb->dispatches) moved = moved || d.placement.tlp > 0;
  EXPECT_TRUE(moved);
  EXPECT_EQ(blocks_of(*climb), blocks_of(*max));
}

TEST(PbsBaselines, RejectBadParameters) {
  for (const auto& [name, params] : std::vector<std::pair<std::string, PolicyParams>>{
           {"pbs", {{"metric", "ipc"}}},      {"pbs", {{"sms", "half"}}},       {"pbs", {{"window", "0"}}},
           {"pbs", {{"tolerance", "1"}}},     {"pbs", {{"odd", "1"}}},          {"besttlp", {{"tlp.0", "0"}}},
           {"besttlp", {{"tlp.x", "2"}}},     {"besttlp", {{"speed", "2"}}},    {"maxtlp", {{"tlp.0", "2"}}},
           {"dyncta", {{"warmup", "-1"}}},    {"modbypass", {{"bypass_miss", "0"}}}}) {
    EXPECT_FALSE(builtin_policies().make(name, params).is_ok()) << name;
  }
  auto far = run_on_sim(memory_pair(), "besttlp", 1, {{"tlp.5", "2"}});
  EXPECT_FALSE(far.is_ok());
}

}  // namespace
}  // namespace concord
