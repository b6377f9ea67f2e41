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

// A window in which a tenant finished no block (here: its requests arrive with gaps, so it sits
// idle through whole windows) measures nothing about it: the window stays open (an "extended"
// event) until the tenant has progress, instead of being sampled as an EB of 0, which failed the
// search ("no alone EB") or read FI 0 at that combination.
TEST(Pbs, AWindowWithoutAFinishedBlockIsExtendedNotSampledAsZero) {
  const std::string trace = ::testing::TempDir() + "/pbs_trace_gaps.jsonl";
  std::remove(trace.c_str());
  Workload w = memory_pair();
  TenantSpec& gaps = w.tenants[1];
  gaps.steps = {step("kmeans", 1 << 22, 1)};
  gaps.requests = 40;
  gaps.arrival.kind = ArrivalProcess::Kind::timestamps;
  for (int i = 0; i < gaps.requests; ++i) gaps.arrival.timestamps.push_back(0.0002 + 0.004 * i);
  auto run = run_on_sim(w, "pbs", 1, {{"metric", "fi"}, {"window", "0.0005"}, {"warmup", "0.0001"}, {"trace", trace}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  int samples = 0, extended = 0;
  for (const auto& l : read_lines(trace)) {
    if (l["event"] == "extended") ++extended;
    if (l["event"] != "sample") continue;
    ++samples;
    for (double eb : l["eb"]) EXPECT_GT(eb, 0) << l.dump();
  }
  EXPECT_GT(samples, 3);
  EXPECT_GT(extended, 0) << "no window was empty: the test does not reach the extension";
  EXPECT_EQ(run->stats.policy.at("empty_samples"), extended);
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
  // Without a pbs facet no L1 miss rate is known: Mod+Bypass bypasses nothing and says so.
  auto cached = run_on_sim(memory_pair(), "modbypass", 1);
  ASSERT_TRUE(cached.is_ok()) << cached.status().to_string();
  for (const auto& d : cached->dispatches) EXPECT_EQ(d.placement.cache, CachePolicy::normal);
  EXPECT_EQ(cached->stats.policy.at("kernels_without_pbs_facet"), 2);
  // A measured facet: the tenant whose kernel misses L1 at 95% bypasses it, the one at 50% not.
  Workload measured = memory_pair();
  for (auto [i, miss] : {std::pair{0, 0.95}, std::pair{1, 0.5}}) {
    for (KernelVariant& v : measured.tenants[static_cast<size_t>(i)].steps[0].kernel.variants) {
      v.facets["pbs"] = nlohmann::json({{"requested_bytes_per_block", 4096}, {"l1_miss_rate", miss}, {"l2_miss_rate", 1}}).dump();
    }
  }
  auto bypass = run_on_sim(measured, "modbypass", 1);
  ASSERT_TRUE(bypass.is_ok()) << bypass.status().to_string();
  for (const auto& d : bypass->dispatches) {
    EXPECT_EQ(d.placement.cache, d.tenants.front().value == 0 ? CachePolicy::l1_bypass : CachePolicy::normal);
  }
  EXPECT_EQ(bypass->stats.policy.at("kernels_without_pbs_facet"), 0);
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
