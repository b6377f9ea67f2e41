// RAISE and its baselines: the decision on hand-built vectors, holding, task streams, variants,
// type orders and determinism on the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "policy/raise/raise_facet.h"
#include "policy/raise/raise_policy.h"
#include "policy/raise/type_order_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using policy::RaiseCandidate;
using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

// The RAISE type a spec states (`raise_type`), as task_info takes it.
std::optional<RaiseClass> stated(const TenantSpec& t) {
  auto it = t.labels.find("raise_type");
  if (it == t.labels.end()) return std::nullopt;
  return raise_class_from_string(it->second);
}

RaiseVector vec(double aoc, double sme, double ipc, double isu, double spu, double du, double lsu, double tu) {
  return {aoc, sme, ipc, isu, spu, du, lsu, tu};
}
RaiseVector idle() {
  RaiseVector m;
  m.fill(10);
  return m;
}

TEST(RaiseDecision, IdleGpuStartsTheLargestComTaskThatFits) {
  // Two COM tasks (three variants each) and a MEM task; the GPU is idle (S_g = 10).
  const std::vector<RaiseVector> com_a{vec(2, 3, 4, 4, 3, 1, 2, 1), vec(4, 6, 6, 6, 5, 1, 3, 2), vec(6, 9, 8, 8, 7, 2, 4, 3)};
  const std::vector<RaiseVector> com_b{vec(1, 2, 3, 3, 2, 1, 1, 1), vec(2, 3, 4, 4, 3, 1, 2, 1), vec(3, 4, 5, 5, 4, 1, 2, 1)};
  const std::vector<RaiseVector> mem{vec(5, 9, 1, 1, 0, 9, 3, 5), vec(5, 9, 1, 1, 0, 9, 3, 5), vec(5, 9, 1, 1, 0, 9, 3, 5)};
  const std::vector<RaiseCandidate> tasks{{&mem, RaiseClass::mem}, {&com_b, RaiseClass::com}, {&com_a, RaiseClass::com}};
  auto pick = policy::raise_decide(idle(), tasks, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 2u);   // com_a
  EXPECT_EQ(pick->second, 2);   // its Max variant: the largest S_com below 10
  // Fixed dimensions: only that variant is considered.
  pick = policy::raise_decide(idle(), tasks, 3, 3, 0);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(*pick, std::make_pair(size_t{2}, 0));
}

TEST(RaiseDecision, NearlyEqualScoresGoToTheLargerBlock) {
  // A LAT task whose Min, Mid and Max score 2.05, 2.025 and 2.0 (Eq. 3): the strict maximum takes
  // Min; with tie 0.1 they are equal and Max, the larger block, starts.
  const std::vector<RaiseVector> lat{vec(2, 10, 2, 2, 0, 0, 0, 0.4), vec(2, 10, 2, 2, 0, 0, 0, 0.2), vec(2, 10, 2, 2, 0, 0, 0, 0)};
  const std::vector<RaiseCandidate> tasks{{&lat, RaiseClass::lat}};
  const RaiseVector g = vec(10, 10, 2, 10, 10, 2, 10, 10);  // IPC and DU used up: LAT; S_g = 8
  auto strict = policy::raise_decide(g, tasks, 3, 3, -1, 0);
  ASSERT_TRUE(strict.has_value());
  EXPECT_EQ(strict->second, 0);
  auto tied = policy::raise_decide(g, tasks, 3, 3, -1, 0.1);
  ASSERT_TRUE(tied.has_value());
  EXPECT_EQ(tied->second, 2);
  // Max 0.25 below Min (1.8) is not equal: Mid, within 0.025, starts.
  const std::vector<RaiseVector> apart{lat[0], lat[1], vec(2, 8.4, 2, 2, 0, 0, 0, 0)};
  const std::vector<RaiseCandidate> tasks2{{&apart, RaiseClass::lat}};
  auto pick = policy::raise_decide(g, tasks2, 3, 3, -1, 0.1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->second, 1);
  // A larger variant that does not fit (S_t >= S_g) stays out, however close: Min 2.0, Mid 2.025,
  // Max 2.05 against S_g 2.03 start Mid.
  const std::vector<RaiseVector> rising{lat[2], lat[1], lat[0]};
  const std::vector<RaiseCandidate> tasks3{{&rising, RaiseClass::lat}};
  const RaiseVector tight = vec(0.24, 10, 2, 2, 0, 2, 0, 0);
  ASSERT_NEAR(raise_score(tight, RaiseClass::lat), 2.03, 1e-9);
  auto fit = policy::raise_decide(tight, tasks3, 3, 3, -1, 0.1);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->second, 1);
  EXPECT_FALSE(builtin_policies().make("raise", {{"tie", "-1"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("raise", {{"tie", "0"}}).is_ok());
}

TEST(RaiseDecision, TypeFollowsTheThresholdsAndHoldsWhenNothingFits) {
  const std::vector<RaiseVector> com{vec(4, 6, 6, 6, 5, 1, 3, 2)};
  const std::vector<RaiseVector> mem{vec(3, 5, 1, 1, 0, 6, 3, 4)};
  const std::vector<RaiseVector> lat{vec(1, 2, 1, 1, 0, 1, 1, 1)};
  const std::vector<RaiseCandidate> tasks{{&com, RaiseClass::com}, {&mem, RaiseClass::mem}, {&lat, RaiseClass::lat}};
  // IPC left 2 <= alpha: COM is out; DU left 8 > beta: MEM (index 1).
  RaiseVector g = vec(6, 5, 2, 4, 5, 8, 7, 8);
  auto pick = policy::raise_decide(g, tasks, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 1u);
  // DU left 2 too: LAT.
  g = vec(6, 5, 2, 4, 5, 2, 7, 8);
  pick = policy::raise_decide(g, tasks, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 2u);
  // Nearly exhausted: the LAT task's score (1.0) is not below S_g^lat -> hold.
  g = vec(1, 1, 1, 1, 0, 1, 1, 1);
  EXPECT_FALSE(policy::raise_decide(g, tasks, 3, 3, -1).has_value());
  // A type with no waiting task passes to the next admissible type: only LAT waits, GPU idle.
  const std::vector<RaiseCandidate> only_lat{{&lat, RaiseClass::lat}};
  pick = policy::raise_decide(idle(), only_lat, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 0u);
  // alpha = 9 with IPC 9.5 left still admits COM; alpha = 10 never does.
  g = idle();
  at(g, RaiseMetric::ipc) = 9.5;
  EXPECT_EQ(policy::raise_decide(g, tasks, 9, 3, -1)->first, 0u);
  EXPECT_EQ(policy::raise_decide(g, tasks, 10, 3, -1)->first, 1u);
}

TEST(RaiseDecision, HoldsWhenTheChosenTypeDoesNotFitEvenIfAnotherWould) {
  const std::vector<RaiseVector> com{vec(4, 6, 6, 6, 5, 1, 3, 2)};
  const std::vector<RaiseVector> mem{vec(3, 5, 1, 1, 0, 6, 3, 4)};
  const std::vector<RaiseVector> lat{vec(1, 2, 1, 1, 0, 1, 1, 1)};
  const std::vector<RaiseCandidate> tasks{{&com, RaiseClass::com}, {&mem, RaiseClass::mem}, {&lat, RaiseClass::lat}};
  // IPC left 4 > alpha: COM is the type, but the COM task's S_t (0.5*6 + 0.5*27/7 = 4.93) is not
  // below S_g^com (0.5*4 + 0.5*19/7 = 3.36). The LAT task would fit (1.0 < S_g^lat = 23/8), but
  // step 5 holds: new tasks wait for a completion.
  const RaiseVector g = vec(4, 3, 4, 3, 1, 4, 2, 2);
  EXPECT_FALSE(policy::raise_decide(g, tasks, 3, 3, -1).has_value());
  // Without the COM task, MEM is the type (DU left 4 > beta) and it does not fit either: hold.
  const std::vector<RaiseCandidate> no_com{{&mem, RaiseClass::mem}, {&lat, RaiseClass::lat}};
  EXPECT_FALSE(policy::raise_decide(g, no_com, 3, 3, -1).has_value());
  // Only LAT waiting: LAT is tried and fits.
  const std::vector<RaiseCandidate> only_lat{{&lat, RaiseClass::lat}};
  auto pick = policy::raise_decide(g, only_lat, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 0u);
  // Trying the next type instead of holding measured no better and is not offered.
  EXPECT_FALSE(builtin_policies().make("raise", {{"cascade", "1"}}).is_ok());
}

TEST(RaiseDecision, RemainingResourcesMayGoBelowZeroAndThenNothingFits) {
  // Two tasks whose AOC and SME add up to more than the GPU has: M_g is 10 minus both, negative.
  const RaiseVector a = vec(8, 9, 8, 8, 6, 2, 5, 3);
  const RaiseVector b = vec(7, 9, 1, 1, 2, 8, 3, 4);
  const auto left = policy::raise_remaining({&a, &b});
  EXPECT_NEAR(left[0], -5, 1e-9);
  EXPECT_NEAR(left[1], -8, 1e-9);
  EXPECT_NEAR(left[5], 0, 1e-9);
  // IPC and DU used up: LAT, and S_g^lat = -4/8 is below any task's score: hold.
  const std::vector<RaiseVector> lat{vec(1, 2, 1, 1, 0, 1, 1, 1)};
  const std::vector<RaiseCandidate> tasks{{&lat, RaiseClass::lat}};
  EXPECT_FALSE(policy::raise_decide(left, tasks, 3, 3, -1).has_value());
  EXPECT_FALSE(builtin_policies().make("raise", {{"clamp", "1"}}).is_ok());
}

// A workload of COM, MEM and LAT tasks with measured-looking vectors attached to every variant.
Workload typed_tasks(int per_type) {
  std::vector<TenantSpec> ts;
  for (int i = 0; i < per_type; ++i) {
    auto c = tenant("com" + std::to_string(i), {step("fma_loop", 1 << 22)});
    auto m = tenant("mem" + std::to_string(i), {step("stream_triad", 1 << 24)});
    auto l = tenant("lat" + std::to_string(i), {step("bfs", 1 << 16, 3)});
    for (auto& v : c.steps[0].kernel.variants) v.facets["raise"] = policy::raise_facet_to_json(vec(6, 9, 7, 7, 8, 1, 2, 1));
    for (auto& v : m.steps[0].kernel.variants) v.facets["raise"] = policy::raise_facet_to_json(vec(7, 9, 1.5, 1.5, 0.5, 8, 4, 5));
    for (auto& v : l.steps[0].kernel.variants) v.facets["raise"] = policy::raise_facet_to_json(vec(1, 2, 0.5, 0.5, 0.1, 1, 1, 1));
    ts.push_back(c);
    ts.push_back(m);
    ts.push_back(l);
  }
  return workload(ts);
}

// Per tenant: [first start, last end] of its launches and the variants its dispatches used.
struct TaskSpan {
  Seconds start = 1e30, end = 0;
  std::set<int> variants;
};
std::map<int64_t, TaskSpan> spans(const RunRecord& r) {
  std::map<int64_t, TaskSpan> out;
  for (const DispatchRecord& d : r.dispatches) {
    TaskSpan& s = out[d.tenants[0].value];
    s.start = std::min(s.start, d.start);
    s.end = std::max(s.end, d.end);
    s.variants.insert(d.placement.variant);
  }
  return out;
}

int max_overlap(const std::map<int64_t, TaskSpan>& s) {
  int best = 0;
  for (const auto& [t, a] : s) {
    int n = 0;
    for (const auto& [u, b] : s) n += b.start <= a.start && a.start < b.end;
    best = std::max(best, n);
  }
  return best;
}

TEST(RaisePolicy, TasksKeepOneVariantAndAtMostNStreamsRunAtOnce) {
  for (int streams : {1, 2, 4}) {
    auto r = run_on_sim(typed_tasks(4), "raise", 1, {{"streams", std::to_string(streams)}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const auto s = spans(*r);
    EXPECT_EQ(s.size(), 12u);
    for (const auto& [t, span] : s) EXPECT_EQ(span.variants.size(), 1u) << "tenant " << t;
    EXPECT_LE(max_overlap(s), streams);
  }
}

TEST(RaisePolicy, GivesResourcesBackAndMixesTypes) {
  // Run the policy object directly to look at M_g afterwards.
  policy::RaiseParams p;
  policy::RaisePolicy raise(p, {});
  auto r = run_on_sim(typed_tasks(3), raise);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  for (double v : raise.global()) EXPECT_NEAR(v, 10.0, 1e-9);  // every task gave its vector back
  // The first two tasks started are a COM task and then (IPC used up by it) a MEM task.
  std::vector<std::pair<Seconds, std::string>> starts;
  for (const auto& [t, s] : spans(*r)) starts.push_back({s.start, r->tenants[static_cast<size_t>(t)].name});
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts[0].second.substr(0, 3), "com");
  EXPECT_EQ(starts[1].second.substr(0, 3), "mem");
}

TEST(RaisePolicy, DeterministicFromTheSeedAndParamsChecked) {
  auto a = run_on_sim(typed_tasks(3), "raise", 7);
  auto b = run_on_sim(typed_tasks(3), "raise", 7);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_DOUBLE_EQ(a->makespan, b->makespan);
  ASSERT_EQ(a->dispatches.size(), b->dispatches.size());
  for (size_t i = 0; i < a->dispatches.size(); ++i) EXPECT_EQ(a->dispatches[i].launches, b->dispatches[i].launches);
  EXPECT_FALSE(builtin_policies().make("raise", {{"dims", "huge"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("raise", {{"streams", "0"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("sq", {{"alpha", "3"}}).is_ok());
  auto fixed = run_on_sim(typed_tasks(2), "raise", 1, {{"dims", "max"}});
  ASSERT_TRUE(fixed.is_ok());
  for (const auto& [t, s] : spans(*fixed)) EXPECT_EQ(*s.variants.begin(), 2);
}

TEST(RaiseBaselines, SqFinishesEachTypeBeforeTheNextAndRrAlternates) {
  auto sq = run_on_sim(typed_tasks(3), "sq", 3);
  ASSERT_TRUE(sq.is_ok()) << sq.status().to_string();
  std::map<char, std::pair<Seconds, Seconds>> by_type;  // first letter -> [first start, last end]
  for (const auto& [t, s] : spans(*sq)) {
    auto& [first, last] = by_type.try_emplace(sq->tenants[static_cast<size_t>(t)].name[0], 1e30, 0).first->second;
    first = std::min(first, s.start);
    last = std::max(last, s.end);
  }
  EXPECT_LE(by_type['c'].second, by_type['m'].first + 1e-12);  // COM, then MEM, then LAT
  EXPECT_LE(by_type['m'].second, by_type['l'].first + 1e-12);

  auto rr = run_on_sim(typed_tasks(3), "rr", 3, {{"streams", "1"}});
  ASSERT_TRUE(rr.is_ok());
  std::vector<std::pair<Seconds, char>> order;
  for (const auto& [t, s] : spans(*rr)) order.push_back({s.start, rr->tenants[static_cast<size_t>(t)].name[0]});
  std::sort(order.begin(), order.end());
  std::string types;
  for (const auto& o : order) types += o.second;
  EXPECT_EQ(types, "cmlcmlcml");
}

TEST(RaiseBaselines, RandomOrderAndDimensionsFollowTheSeed) {
  auto order = [](uint64_t seed) {
    auto r = run_on_sim(typed_tasks(3), "rd", seed, {{"streams", "1"}});
    EXPECT_TRUE(r.is_ok());
    std::vector<std::pair<Seconds, std::string>> o;
    for (const auto& [t, s] : spans(*r)) o.push_back({s.start, r->tenants[static_cast<size_t>(t)].name + ":" + std::to_string(*s.variants.begin())});
    std::sort(o.begin(), o.end());
    std::string out;
    for (const auto& x : o) out += x.second + " ";
    return out;
  };
  EXPECT_EQ(order(5), order(5));
  EXPECT_NE(order(5), order(6));
  // Random dimensions use more than one variant over nine tasks; dims=mid fixes every task's.
  for (const char* p : {"sq", "rr", "rd"}) {
    auto random = run_on_sim(typed_tasks(3), p, 5);
    ASSERT_TRUE(random.is_ok()) << p;
    std::set<int> seen;
    for (const auto& [t, s] : spans(*random)) seen.insert(*s.variants.begin());
    EXPECT_GT(seen.size(), 1u) << p;
    auto fixed = run_on_sim(typed_tasks(3), p, 5, {{"dims", "mid"}});
    ASSERT_TRUE(fixed.is_ok()) << p;
    for (const auto& [t, s] : spans(*fixed)) EXPECT_EQ(*s.variants.begin(), 1) << p;
  }
  EXPECT_FALSE(builtin_policies().make("sq", {{"dims", "dynamic"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("rd", {{"dims", "random"}}).is_ok());
}


TEST(RaisePolicy, EachRequestOfATenantIsATaskOfItsOwn) {
  // Closed-loop tenants with three requests each: every request is a task (it may run another
  // variant than the previous one), and the run finishes with M_g back at 10.
  Workload w = typed_tasks(2);
  for (auto& t : w.tenants) t.requests = 3;
  policy::RaiseParams p;
  p.streams = 2;
  policy::RaisePolicy raise(p, {});
  auto r = run_on_sim(w, raise);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  for (double v : raise.global()) EXPECT_NEAR(v, 10.0, 1e-9);
  for (const auto& t : r->tenants) {
    ASSERT_EQ(t.requests.size(), 3u);
    for (const auto& q : t.requests) EXPECT_GT(q.end, q.start);
  }
  // Tasks of different tenants overlap at most N_str at a time (requests of one tenant are in order).
  std::vector<std::pair<Seconds, int>> edges;
  for (const auto& t : r->tenants) {
    for (const auto& q : t.requests) {
      edges.push_back({q.start, +1});
      edges.push_back({q.end, -1});
    }
  }
  std::sort(edges.begin(), edges.end());
  int open = 0, most = 0;
  for (const auto& [at, d] : edges) most = std::max(most, open += d);
  EXPECT_LE(most, 2);
}


TEST(RaisePolicy, AutoThresholdsAreTheTasksMeanPlusAHalf) {
  // Each task's metric is read on the variant its type came from (class_variant), not the others.
  policy::TaskInfo a, b;
  a.vectors = {vec(0, 0, 9, 0, 0, 9, 0, 0), vec(0, 0, 2, 0, 0, 1, 0, 0)};
  a.class_variant = 1;
  b.vectors = {vec(0, 0, 3, 0, 0, 6, 0, 0)};
  b.class_variant = 0;
  auto alpha = policy::raise_auto_threshold({a, b}, RaiseMetric::ipc);
  auto beta = policy::raise_auto_threshold({a, b}, RaiseMetric::du);
  ASSERT_TRUE(alpha.is_ok() && beta.is_ok());
  EXPECT_DOUBLE_EQ(*alpha, 3.0);  // (2 + 3) / 2 + 0.5: the paper's 2.5 -> 3
  EXPECT_DOUBLE_EQ(*beta, 4.0);   // (1 + 6) / 2 + 0.5
  EXPECT_FALSE(policy::raise_auto_threshold({}, RaiseMetric::ipc).is_ok());

  // On a run: typed_tasks' IPC 7 / 1.5 / 0.5 and DU 1 / 8 / 1 give alpha 3.5 and beta 3.83.
  policy::RaiseParams p;
  p.alpha_auto = true;
  p.beta_auto = true;
  policy::RaisePolicy raise(p, {});
  auto r = run_on_sim(typed_tasks(2), raise);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(raise.alpha(), 3.5);
  EXPECT_NEAR(raise.beta(), 10.0 / 3 + 0.5, 1e-12);
  // A number stays a number; `auto` parses; anything else names the parameter.
  EXPECT_TRUE(builtin_policies().make("raise", {{"alpha", "auto"}, {"beta", "auto"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("raise", {{"alpha", "4.5"}}).is_ok());
  auto bad = builtin_policies().make("raise", {{"beta", "automatic"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("beta"), std::string::npos) << bad.status().message();
}

TEST(RaiseTasks, TaskVectorIsTheTimeWeightedMeanOfItsKernelsAndClassReadsMax) {
  // Two steps with measured vectors: the task's vector per variant weights each by its estimated
  // time x count (RAISE paper, Section VI-A); the class is read on the largest-block variant.
  auto t = tenant("t", {step("fma_loop", 1 << 22, 3), step("stream_triad", 1 << 24)});
  for (auto& v : t.steps[0].kernel.variants) v.facets["raise"] = policy::raise_facet_to_json(vec(10, 10, 10, 10, 10, 0, 0, 0));
  for (auto& v : t.steps[1].kernel.variants) v.facets["raise"] = policy::raise_facet_to_json(vec(0, 0, 0, 0, 0, 10, 10, 10));
  const Estimator est(h200_spec());
  const auto info = policy::task_info(spec_hints(t).request, stated(t), est);
  ASSERT_EQ(info.vectors.size(), static_cast<size_t>(t.steps[0].kernel.variant_count()));
  EXPECT_TRUE(info.measured);
  for (size_t v = 0; v < info.vectors.size(); ++v) {
    const double a = est.seconds(t.steps[0].kernel, static_cast<int>(v), 132) * 3;
    const double b = est.seconds(t.steps[1].kernel, static_cast<int>(v), 132);
    EXPECT_NEAR(at(info.vectors[v], RaiseMetric::ipc), 10 * a / (a + b), 1e-9);
    EXPECT_NEAR(at(info.vectors[v], RaiseMetric::du), 10 * b / (a + b), 1e-9);
  }
  // Without measured metrics the roofline estimate stands in, and the task says so.
  const TenantSpec streaming = tenant("u", {step("stream_triad", 1 << 24)});
  const auto estimated = policy::task_info(spec_hints(streaming).request, std::nullopt, est);
  EXPECT_FALSE(estimated.measured);
  EXPECT_EQ(estimated.cls, RaiseClass::mem);  // a streaming kernel: DRAM-bound on the roofline
}

TEST(RaiseTasks, AStatedTypeReplacesTheOneReadFromTheVector) {
  // The paper classifies its tasks by hand (Table IV); a tenant's `raise_type` says the type, and
  // the policies (here SQ's grouping) follow it.
  Workload w = typed_tasks(2);
  const Estimator est(h200_spec());
  TenantSpec& com = w.tenants[0];  // vector reads COM (IPC 7, DU 1)
  EXPECT_EQ(policy::task_info(spec_hints(com).request, stated(com), est).cls, RaiseClass::com);
  com.labels["raise_type"] = "LAT";
  EXPECT_EQ(policy::task_info(spec_hints(com).request, stated(com), est).cls, RaiseClass::lat);
  // SQ runs every COM task before any LAT task: the restated com0 now runs with the LAT tasks,
  // after com1 (still COM) and both MEM tasks have finished.
  auto sq = run_on_sim(w, "sq", 3);
  ASSERT_TRUE(sq.is_ok()) << sq.status().to_string();
  std::map<std::string, TaskSpan> by_name;
  for (const auto& [t, s] : spans(*sq)) by_name[sq->tenants[static_cast<size_t>(t)].name] = s;
  EXPECT_GE(by_name["com0"].start, by_name["com1"].end - 1e-12);
  EXPECT_GE(by_name["com0"].start, by_name["mem0"].end - 1e-12);
  EXPECT_GE(by_name["com0"].start, by_name["mem1"].end - 1e-12);
  // Without the statement com0 runs with the COM tasks, before any MEM task starts.
  auto plain = run_on_sim(typed_tasks(2), "sq", 3);
  ASSERT_TRUE(plain.is_ok());
  std::map<std::string, TaskSpan> plain_by_name;
  for (const auto& [t, s] : spans(*plain)) plain_by_name[plain->tenants[static_cast<size_t>(t)].name] = s;
  EXPECT_LE(plain_by_name["com0"].end, plain_by_name["mem0"].start + 1e-12);
}


// An idle GPU where no variant of the waiting task fits (every score at or above the idle GPU's
// 10): RAISE starts it anyway, in its lightest variant, rather than wait forever.
TEST(RaisePolicy, AnIdleGpuThatFitsNoVariantStartsTheLightest) {
  Workload w = workload({tenant("heavy", {step("vector_add", 1 << 22)})});
  KernelSpec& k = w.tenants[0].steps[0].kernel;
  ASSERT_EQ(k.variant_count(), 3);
  // LAT scores (the means) at the top of the 0-10 scale a measured facet allows: none is below
  // an idle GPU's S_g = 10, and variant 1 is the lightest.
  const double level[3] = {10, 10 - 5e-10, 10};
  for (int v = 0; v < 3; ++v) {
    RaiseVector m;
    m.fill(level[v]);
    k.variants[static_cast<size_t>(v)].facets["raise"] = policy::raise_facet_to_json(m);
  }
  w.tenants[0].labels["raise_type"] = "LAT";
  auto r = run_on_sim(w, "raise");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->dispatches.size(), 1u);
  EXPECT_EQ(r->dispatches[0].placement.variant, 1);
}

// A task's kernels all run the variant its first one started in, also those the host launches one
// by one (ahead=0: each dispatched when the one before it ended).
TEST(TaskStreams, ATasksLaterKernelsRunItsVariant) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20, 3), step("stream_triad", 1 << 20, 2)}, 2),
                               tenant("b", {step("hotspot", 1024, 4)}, 2)});
  for (const char* policy : {"raise", "sq", "rd"}) {
    auto r = run_on_sim(w, policy, 1, {{"ahead", "0"}, {"dims", "max"}});
    ASSERT_TRUE(r.is_ok()) << policy << ": " << r.status().to_string();
    ASSERT_EQ(r->dispatches.size(), 18u);
    for (const DispatchRecord& d : r->dispatches) {
      EXPECT_EQ(d.placement.variant, 2) << policy << ": dispatch " << d.id.value;
    }
  }
}

// RAISE's "Max" is the variant with the largest block, wherever it sits in the kernel's list.
TEST(TaskStreams, MaxIsTheLargestBlock) {
  KernelSpec k = *make_suite_kernel("vector_add", 1 << 20);
  ASSERT_EQ(k.variant_count(), 3);
  EXPECT_EQ(policy::max_variant(k), 2);
  std::swap(k.variants[0], k.variants[2]);
  EXPECT_EQ(policy::max_variant(k), 0);
  std::swap(k.variants[0], k.variants[1]);
  EXPECT_EQ(policy::max_variant(k), 1);
}

// rd picks the next task at random among those waiting: over seeds, tasks do not always start in
// the order they arrived.
TEST(RaiseBaselines, RdStartsTasksInARandomOrder) {
  int reordered = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto r = run_on_sim(typed_tasks(2), "rd", seed, {{"streams", "1"}, {"dims", "mid"}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    std::vector<std::pair<Seconds, int64_t>> starts;
    for (const auto& [t, s] : spans(*r)) starts.push_back({s.start, t});
    std::sort(starts.begin(), starts.end());
    for (size_t i = 1; i < starts.size(); ++i) {
      if (starts[i].second < starts[i - 1].second) {
        ++reordered;
        break;
      }
    }
  }
  EXPECT_GT(reordered, 0) << "six seeds, every time in arrival order";
}
}  // namespace
}  // namespace concord
