// SchedContext::dispatch_after and the task-stream policies' hand-off: the task that takes a
// stream when the running task on it ends is decided (with the ending task's resources counted
// free) and dispatched behind that task's last kernel, on the simulator.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::ScriptedPolicy;
using testing::step;
using testing::tenant;
using testing::whole;
using testing::workload;

Workload tasks() {
  // Three task types of three kernels, two tasks each; as in bench/raise, every task is a tenant of
  // one request (a tenant's next request arrives only when its last ends: no hand-off can pick it).
  return workload({tenant("com0", {step("sgemm", 512, 3)}), tenant("mem0", {step("stream_triad", 1 << 22, 3)}),
                   tenant("lat0", {step("bfs", 1 << 18, 3)}), tenant("com1", {step("sgemm", 512, 3)}),
                   tenant("mem1", {step("stream_triad", 1 << 22, 3)}), tenant("lat1", {step("bfs", 1 << 18, 3)})});
}

const DispatchRecord& record(const RunRecord& r, DispatchId id) { return r.dispatches[static_cast<size_t>(id.value)]; }

// First dispatches of tasks, in dispatch order: (tenant, request, variant).
std::vector<std::tuple<int64_t, int64_t, int>> task_starts(const RunRecord& r) {
  std::vector<std::tuple<int64_t, int64_t, int>> out;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const DispatchRecord& d : r.dispatches) {
    const LaunchRecord& l = r.launches[static_cast<size_t>(d.launches[0].value)];
    if (seen.insert({d.tenants[0].value, l.request}).second) out.emplace_back(d.tenants[0].value, l.request, d.placement.variant);
  }
  return out;
}

// Dispatches behind another tenant's dispatch (hand-offs).
std::vector<const DispatchRecord*> handoffs(const RunRecord& r) {
  std::vector<const DispatchRecord*> out;
  for (const DispatchRecord& d : r.dispatches) {
    if (d.after.valid() && record(r, d.after).tenants[0] != d.tenants[0]) out.push_back(&d);
  }
  return out;
}

TEST(HandOff, OneStreamHandsEveryTaskToTheNextInTheSameOrder) {
  for (const char* policy : {"raise", "sq", "rr", "rd"}) {
    auto on = run_on_sim(tasks(), policy, 5, {{"streams", "1"}, {"handoff", "1"}});
    auto off = run_on_sim(tasks(), policy, 5, {{"streams", "1"}});  // off by default
    ASSERT_TRUE(on.is_ok()) << policy << ": " << on.status().to_string();
    ASSERT_TRUE(off.is_ok()) << policy << ": " << off.status().to_string();
    // One stream: every task but the first is handed the stream by the task before it, decided
    // before that task ended, and starts when it has ended.
    const auto h = handoffs(*on);
    EXPECT_EQ(h.size(), 5u) << policy;
    for (const DispatchRecord* d : h) {
      const DispatchRecord& before = record(*on, d->after);
      EXPECT_LT(d->dispatched, before.end) << policy;
      EXPECT_GE(d->start, before.end) << policy;
    }
    EXPECT_TRUE(handoffs(*off).empty()) << policy;
    // Never two tasks at once, with or without.
    for (const RunRecord* r : {&*on, &*off}) {
      for (size_t i = 0; i < r->dispatches.size(); ++i) {
        for (size_t j = i + 1; j < r->dispatches.size(); ++j) {
          const DispatchRecord& a = r->dispatches[i];
          const DispatchRecord& b = r->dispatches[j];
          if (a.tenants[0] == b.tenants[0]) continue;
          EXPECT_TRUE(a.end <= b.start || b.end <= a.start) << policy << ": dispatches " << i << " and " << j << " overlap";
        }
      }
    }
    // The same decisions (the ending task's resources count as free in a hand-off decision); rd
    // draws its random numbers in another order, so only its task count is the same.
    if (std::string(policy) != "rd") {
      EXPECT_EQ(task_starts(*on), task_starts(*off)) << policy;
    } else {
      EXPECT_EQ(task_starts(*on).size(), task_starts(*off).size());
    }
  }
}

TEST(HandOff, TasksKeepTheirStreamLimitAndFinish) {
  for (const char* policy : {"raise", "sq", "rr", "rd"}) {
    for (const char* streams : {"2", "4"}) {
      auto r = run_on_sim(tasks(), policy, 7, {{"streams", streams}, {"handoff", "1"}});
      ASSERT_TRUE(r.is_ok()) << policy << ": " << r.status().to_string();
      for (const TenantRecord& t : r->tenants) {
        for (const RequestRecord& q : t.requests) EXPECT_GE(q.end, 0) << policy;
      }
      // At any dispatch's start, at most `streams` tasks have started and not ended.
      const int limit = std::stoi(streams);
      for (const TenantRecord& t : r->tenants) {
        for (const RequestRecord& q : t.requests) {
          int overlapping = 0;
          for (const TenantRecord& u : r->tenants) {
            for (const RequestRecord& o : u.requests) overlapping += o.start <= q.start && q.start < o.end;
          }
          EXPECT_LE(overlapping, limit) << policy << " streams=" << streams;
        }
      }
    }
  }
  EXPECT_FALSE(builtin_policies().make("raise", {{"handoff", "2"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("sq", {{"handoff", "off"}}).is_ok());
}

TEST(DispatchAfter, WaitsForAnotherTenantsDispatchAndChecksIt) {
  // b's only kernel is dispatched behind a's: it starts when a's ends.
  auto w = workload({tenant("a", {step("sgemm", 512)}), tenant("b", {step("vector_add", 1 << 20)})});
  DispatchId first;
  bool done = false;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    if (done) return Status::ok();
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    if (ready.size() < 2) return Status::ok();
    auto a = ctx.dispatch(ready[0].id, whole(ctx));
    if (!a) return a.status();
    // Not running: refused, naming it.
    auto bad = ctx.dispatch_after(ready[1].id, whole(ctx), DispatchId{99});
    if (bad || bad.status().message().find("99") == std::string::npos) return Status::internal("expected a refusal naming 99");
    auto b = ctx.dispatch_after(ready[1].id, whole(ctx), *a);
    if (!b) return b.status();
    // Queued: no resize, TLP change or preemption until `a` ends.
    if (ctx.preempt(*b).is_ok()) return Status::internal("preempting a queued dispatch was allowed");
    first = *a;
    done = true;
    return Status::ok();
  });
  auto r = run_on_sim(w, p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->dispatches.size(), 2u);
  EXPECT_EQ(r->dispatches[1].after.value, first.value);
  EXPECT_GE(r->dispatches[1].start, r->dispatches[0].end);
}

}  // namespace
}  // namespace concord
