// Dispatching behind a running dispatch (SchedContext::dispatch's `after`): a tenant's next
// submitted kernel dispatched behind the running one, stream ordered (no host round trip), on the
// simulator; the errors it gives; the task-stream policies' `ahead` parameter that uses it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::ScriptedPolicy;
using testing::step;
using testing::tenant;
using testing::whole;
using testing::workload;

// The tenant's first queued launch, dispatched behind `behind` (which runs that tenant's launch).
Result<DispatchId> queue_next(SchedContext& ctx, DispatchId behind, const Placement& placement) {
  for (const RunningDispatch& r : ctx.running()) {
    if (r.id != behind) continue;
    const auto queued = ctx.queued(r.tenants[0]);
    if (queued.empty()) return Status::failed_precondition("nothing submitted behind it: the last of its request");
    return ctx.dispatch(queued.front().id, placement, behind);
  }
  return Status::not_found("dispatch " + std::to_string(behind.value) + " is not running");
}

// Dispatches every ready launch on the whole GPU and, when `chain`, queues the rest of its request
// behind it at once.
Status dispatch_all(SchedContext& ctx, bool chain) {
  const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
  for (const ReadyLaunch& r : ready) {
    if (r.has_running_dispatch) continue;
    auto d = ctx.dispatch(r.id, whole(ctx));
    if (!d) return d.status();
    if (!chain) continue;
    DispatchId last = *d;
    while (!ctx.queued(r.tenant).empty() && ctx.queued(r.tenant).front().request == r.request) {
      auto n = queue_next(ctx, last, whole(ctx));
      if (!n) return n.status();
      last = *n;
    }
  }
  return Status::ok();
}

Workload chained_workload() {
  // Two tenants, each two requests of three kernels (two steps, the first repeated).
  return workload({tenant("a", {step("vector_add", 1 << 20, 2), step("stream_triad", 1 << 22)}, 2),
                   tenant("b", {step("sgemm", 512), step("hotspot", 1024, 2)}, 2)});
}

TEST(QueueNext, ChainedKernelsRunInOrderBehindTheirPredecessor) {
  ScriptedPolicy chained([](SchedContext& ctx) { return dispatch_all(ctx, true); });
  ScriptedPolicy plain([](SchedContext& ctx) { return dispatch_all(ctx, false); });
  auto c = run_on_sim(chained_workload(), chained);
  auto p = run_on_sim(chained_workload(), plain);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ(c->launches.size(), 12u);
  ASSERT_EQ(p->launches.size(), 12u);
  // Every request's kernels in order, each starting after the one before it ended, and ready
  // (queued launches: when their predecessor ended) no later than its start.
  std::map<std::pair<int64_t, int64_t>, std::vector<const LaunchRecord*>> by_request;
  for (const LaunchRecord& l : c->launches) by_request[{l.tenant.value, l.request}].push_back(&l);
  ASSERT_EQ(by_request.size(), 4u);
  for (const auto& [key, ls] : by_request) {
    ASSERT_EQ(ls.size(), 3u);
    for (size_t i = 0; i < ls.size(); ++i) {
      EXPECT_LE(ls[i]->ready, ls[i]->start + 1e-12);
      EXPECT_LT(ls[i]->start, ls[i]->end);
      if (i > 0) {
        EXPECT_GE(ls[i]->start, ls[i - 1]->end - 1e-12);
        EXPECT_DOUBLE_EQ(ls[i]->ready, ls[i - 1]->end);
      }
    }
    EXPECT_EQ(ls[0]->index, 0);
    EXPECT_EQ(ls[2]->index, 2);
  }
  // The second and third kernel of every request were queued (dispatch records say behind what),
  // and in the plain run nothing was.
  int queued = 0;
  for (const DispatchRecord& d : c->dispatches) {
    if (!d.after.valid()) continue;
    ++queued;
    const DispatchRecord& before = c->dispatches[static_cast<size_t>(d.after.value)];
    EXPECT_EQ(before.tenants, d.tenants);
    EXPECT_GE(d.start, before.end - 1e-12);
    EXPECT_LE(d.dispatched, before.end);  // dispatched while its predecessor still ran
  }
  EXPECT_EQ(queued, 8);
  for (const DispatchRecord& d : p->dispatches) EXPECT_FALSE(d.after.valid());
  // Every logical block ran once; the simulator charges no host round trip, so the same makespan.
  for (size_t t = 0; t < 2; ++t) EXPECT_EQ(c->tenants[t].logical_blocks, p->tenants[t].logical_blocks);
  EXPECT_NEAR(c->makespan, p->makespan, 1e-9 * p->makespan);
}

TEST(QueueNext, RefusesWhatItCannotQueueAndKeepsTheRunConsistent) {
  std::vector<std::string> errors;
  bool tried = false;
  ScriptedPolicy policy([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      auto d = ctx.dispatch(r.id, whole(ctx));
      if (!d) return d.status();
      if (tried) continue;
      tried = true;
      // Bad placement: refused, and nothing was created (the next kernel still comes as usual).
      Placement bad = whole(ctx);
      bad.variant = 99;
      auto e = queue_next(ctx, *d, bad);
      EXPECT_FALSE(e.is_ok());
      if (!e) errors.push_back(e.status().message());
      auto q = queue_next(ctx, *d, whole(ctx));
      if (!q) return q.status();
      // A second launch behind the same dispatch; a queued dispatch resized or preempted.
      auto twice = queue_next(ctx, *d, whole(ctx));
      EXPECT_FALSE(twice.is_ok());
      if (!twice) errors.push_back(twice.status().message());
      Status pre = ctx.preempt(*q);
      EXPECT_FALSE(pre.is_ok());
      errors.push_back(pre.message());
      // Nor the one in front of it: its unfinished blocks would come back behind its successor.
      Status front = ctx.preempt(*d);
      EXPECT_FALSE(front.is_ok());
      EXPECT_NE(front.message().find("queued behind it"), std::string::npos) << front.message();
      // The last kernel of its request: nothing follows.
      auto last = queue_next(ctx, *q, whole(ctx));
      EXPECT_FALSE(last.is_ok());
      if (!last) errors.push_back(last.status().message());
      auto gone = queue_next(ctx, DispatchId{999}, whole(ctx));
      EXPECT_FALSE(gone.is_ok());
    }
    return Status::ok();
  });
  auto w = workload({tenant("a", {step("vector_add", 1 << 20, 2)}, 2)});
  auto r = run_on_sim(w, policy);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->launches.size(), 4u);
  // (The second try behind the same dispatch finds nothing more submitted in this request of two
  // launches; the engine's own "already queued" refusal is checked below.)
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_NE(errors[0].find("no variant"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("last of its request"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("queued behind"), std::string::npos) << errors[2];
  EXPECT_NE(errors[3].find("last of its request"), std::string::npos) << errors[3];
  for (const LaunchRecord& l : r->launches) EXPECT_GT(l.end, 0);
}

TEST(QueueNext, TaskStreamPoliciesQueueAsFarAsAheadSays) {
  auto w = workload({tenant("com", {step("sgemm", 512, 4)}), tenant("mem", {step("stream_triad", 1 << 22, 4)}),
                     tenant("lat", {step("bfs", 1 << 18, 4)})});
  for (const char* policy : {"raise", "sq", "rr", "rd"}) {
    for (const char* ahead : {"task", "0", "1"}) {
      auto r = run_on_sim(w, policy, 3, {{"ahead", ahead}});
      ASSERT_TRUE(r.is_ok()) << policy << " ahead=" << ahead << ": " << r.status().to_string();
      int queued = 0;
      for (const DispatchRecord& d : r->dispatches) {
        if (!d.after.valid()) continue;
        ++queued;
        if (std::string(ahead) == "1") {
          // One behind the running kernel at most: the one before its predecessor had ended.
          const DispatchRecord& before = r->dispatches[static_cast<size_t>(d.after.value)];
          if (before.after.valid()) {
            EXPECT_GE(d.dispatched, r->dispatches[static_cast<size_t>(before.after.value)].end);
          }
        }
      }
      // Three tasks of four kernels: all but each task's first kernel queued, unless ahead=0.
      EXPECT_EQ(queued, std::string(ahead) == "0" ? 0 : 9) << policy << " ahead=" << ahead;
    }
  }
  // A burst limit spreads the queueing over ticks; the same kernels end up queued in the same order.
  for (const char* burst : {"0", "1", "4"}) {
    auto r = run_on_sim(w, "raise", 3, {{"burst", burst}});
    ASSERT_TRUE(r.is_ok()) << "burst=" << burst << ": " << r.status().to_string();
    int queued = 0;
    for (const DispatchRecord& d : r->dispatches) queued += d.after.valid();
    EXPECT_EQ(queued, 9) << "burst=" << burst;
  }
  EXPECT_FALSE(builtin_policies().make("raise", {{"burst", "-1"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("raise", {{"ahead", "-1"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("sq", {{"ahead", "all"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("rd", {{"ahead", "2"}}).is_ok());
}

// Counts the dispatches each hook call of the wrapped policy makes.
class PerCall final : public Policy {
 public:
  explicit PerCall(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Status on_start(SchedContext& ctx) override { return inner_->on_start(ctx); }
  Status on_tenant_joined(SchedContext& ctx, TenantId t) override { return inner_->on_tenant_joined(ctx, t); }
  Status on_ready(SchedContext& ctx, LaunchId l) override { return count(ctx, [&] { return inner_->on_ready(ctx, l); }); }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    return count(ctx, [&] { return inner_->on_complete(ctx, c); });
  }
  Status on_tick(SchedContext& ctx) override { return count(ctx, [&] { return inner_->on_tick(ctx); }); }
  std::vector<int> per_call;

 private:
  template <typename F>
  Status count(SchedContext& ctx, F&& hook) {
    DispatchId last;
    for (const RunningDispatch& d : ctx.running()) {
      if (d.id.value > last.value) last = d.id;
    }
    CONCORD_RETURN_IF_ERROR(hook());
    int n = 0;
    for (const RunningDispatch& d : ctx.running()) n += d.id.value > last.value;
    per_call.push_back(n);
    return Status::ok();
  }
  std::unique_ptr<Policy> inner_;
};

// A task's later kernels go behind it at most `burst` per scheduling call (the rest on a tick),
// and only its own request's: the tenant's next request is a new task, started by the chooser.
TEST(QueueNext, TaskStreamsQueueOnlyTheTasksOwnKernelsAtMostBurstPerCall) {
  Workload w = workload({tenant("a", {step("vector_add", 1 << 20, 6)}, 2)});
  w.tenants[0].arrival.kind = ArrivalProcess::Kind::timestamps;
  w.tenants[0].arrival.timestamps = {0, 0};  // both requests submitted at once
  for (const char* policy : {"raise", "rd"}) {
    auto inner = builtin_policies().make(policy, {{"burst", "2"}, {"streams", "1"}});
    ASSERT_TRUE(inner.is_ok());
    PerCall p(std::move(*inner));
    auto r = run_on_sim(w, p);
    ASSERT_TRUE(r.is_ok()) << policy << ": " << r.status().to_string();
    ASSERT_EQ(r->dispatches.size(), 12u);
    // The first call starts the task and queues two behind it: three dispatches, never more.
    ASSERT_FALSE(p.per_call.empty());
    EXPECT_EQ(*std::max_element(p.per_call.begin(), p.per_call.end()), 3) << policy;
    int queued = 0;
    for (const DispatchRecord& d : r->dispatches) {
      if (!d.after.valid()) continue;
      ++queued;
      const DispatchRecord& before = r->dispatches[static_cast<size_t>(d.after.value)];
      EXPECT_EQ(r->launches[static_cast<size_t>(d.launches[0].value)].request,
                r->launches[static_cast<size_t>(before.launches[0].value)].request)
          << policy << ": dispatch " << d.id.value << " queued behind another request's kernel";
    }
    EXPECT_EQ(queued, 10) << policy << ": all but the first kernel of each of the two tasks";
  }
}

TEST(QueueNext, StreamsQueuesWholeRequests) {
  // Two tenants of six kernels a request, three requests each.
  auto w = workload({tenant("a", {step("vector_add", 1 << 20, 3), step("sgemm", 512), step("stream_triad", 1 << 22, 2)}, 3),
                     tenant("b", {step("hotspot", 1024, 4), step("bfs", 1 << 18, 2)}, 3)});
  auto queued = [](const RunRecord& r) {
    int n = 0;
    for (const DispatchRecord& d : r.dispatches) n += d.after.valid();
    return n;
  };
  auto plain = run_on_sim(w, "streams");
  auto ahead = run_on_sim(w, "streams", 1, {{"ahead", "task"}});
  ASSERT_TRUE(plain.is_ok() && ahead.is_ok()) << ahead.status().to_string();
  EXPECT_EQ(queued(*plain), 0);
  EXPECT_EQ(queued(*ahead), 2 * 3 * 5);  // all but the first kernel of each request
  EXPECT_EQ(ahead->launches.size(), plain->launches.size());
  EXPECT_FALSE(builtin_policies().make("streams", {{"ahead", "2"}}).is_ok());
  // Requests submitted together: each request's first kernel is dispatched on its own, never
  // queued behind the request before it.
  Workload together = w;
  for (TenantSpec& t : together.tenants) {
    t.arrival.kind = ArrivalProcess::Kind::timestamps;
    t.arrival.timestamps = {0, 0, 0};
  }
  auto at_once = run_on_sim(together, "streams", 1, {{"ahead", "task"}});
  ASSERT_TRUE(at_once.is_ok()) << at_once.status().to_string();
  EXPECT_EQ(queued(*at_once), 2 * 3 * 5);
  for (const DispatchRecord& d : at_once->dispatches) {
    const LaunchRecord& l = at_once->launches[static_cast<size_t>(d.launches[0].value)];
    EXPECT_EQ(d.after.valid(), l.index > 0) << "tenant " << l.tenant.value << " request " << l.request << " launch " << l.index;
  }
  EXPECT_FALSE(builtin_policies().make("fedcm", {{"ahead", "task"}}).is_ok());
}

}  // namespace
}  // namespace concord
