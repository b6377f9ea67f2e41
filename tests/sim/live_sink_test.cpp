// What a live source (the daemon's) needs of the engine beyond a replayed spec: ending a request
// after its last launch was submitted, and dropping a tenant whose process died, with its
// queued work and a failed running dispatch, while the run goes on.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

#include "test_support.h"
#include "concord/backend_factory.h"

namespace concord {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class ScriptSource final : public TenantSource {
 public:
  std::function<Status(TenantSink&)> open_fn;
  std::function<Result<Seconds>(TenantSink&)> pump_fn;
  std::function<Status(TenantSink&, TenantId, LaunchId)> launch_end_fn;
  std::vector<std::pair<int64_t, Seconds>> request_ends;  // (request, end)
  bool done = false;

  std::string name() const override { return "script"; }
  Status open(TenantSink& sink) override { return open_fn ? open_fn(sink) : Status::ok(); }
  Result<Seconds> pump(TenantSink& sink) override { return pump_fn ? pump_fn(sink) : Result<Seconds>(kNever); }
  Status on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds) override {
    return launch_end_fn ? launch_end_fn(sink, tenant, launch) : Status::ok();
  }
  Status on_request_end(TenantSink&, TenantId, int64_t request, Seconds at) override {
    request_ends.emplace_back(request, at);
    return Status::ok();
  }
  bool exhausted() const override { return done; }
};

// The simulator, with the dispatches of chosen tenants failing (as a dead process's do).
class FailingBackend final : public Backend {
 public:
  explicit FailingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::set<int64_t> failing;  // tenant ids
  std::string name() const override { return inner_->name(); }
  const DeviceSpec& device() const override { return inner_->device(); }
  Capabilities capabilities(const KernelSpec& k) const override { return inner_->capabilities(k); }
  Status can_implement(const DispatchRequest& r) const override { return inner_->can_implement(r); }
  Status start_clock() override { return inner_->start_clock(); }
  Status dispatch(const DispatchRequest& r) override {
    tenant_of_[r.id.value] = r.parts[0].tenant.value;
    return inner_->dispatch(r);
  }
  Status set_sm_set(DispatchId d, const SmSet& s) override { return inner_->set_sm_set(d, s); }
  Status set_tlp(DispatchId d, int t, const SmSet& s, int tt) override { return inner_->set_tlp(d, t, s, tt); }
  Status preempt(DispatchId d) override { return inner_->preempt(d); }
  Result<std::vector<int64_t>> progress(DispatchId d) const override { return inner_->progress(d); }
  Seconds now() const override { return inner_->now(); }
  Result<std::vector<Completion>> advance(Seconds until) override {
    auto out = inner_->advance(until);
    if (!out) return out;
    for (Completion& c : *out) {
      if (!failing.count(tenant_of_[c.dispatch.value])) continue;
      c.error = Status::device_error("tenant " + std::to_string(tenant_of_[c.dispatch.value]) + " is gone");
      for (int64_t& b : c.blocks_done) b = 0;
    }
    return out;
  }
  int running() const override { return inner_->running(); }
  Status abort_all(Seconds grace) override { return inner_->abort_all(grace); }

 private:
  std::unique_ptr<Backend> inner_;
  std::map<int64_t, int64_t> tenant_of_;
};

std::unique_ptr<Backend> sim() {
  BackendConfig c;
  c.device = h100_sxm_spec();
  auto b = make_backend(c);
  EXPECT_TRUE(b.is_ok());
  return std::move(*b);
}

KernelSpec kernel() {
  auto k = make_suite_kernel("vector_add", 1 << 20);
  EXPECT_TRUE(k.is_ok());
  return *k;
}

TEST(LiveSink, ARequestEndsWithItsLastSubmittedLaunchAfterTheFact) {
  const KernelSpec k = kernel();
  ScriptSource src;
  TenantId t;
  int ended = 0;
  src.open_fn = [&](TenantSink& sink) -> Status {
    auto id = sink.join(TenantInfo{"lc", TenantClass::latency_critical, 0.01, {}}, std::nullopt, {});
    if (!id) return id.status();
    t = *id;
    return Status::ok();
  };
  bool started = false;
  src.pump_fn = [&](TenantSink& sink) -> Result<Seconds> {
    if (started) return kNever;
    started = true;
    auto r = sink.arrive(t, sink.now());
    if (!r) return r.status();
    CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, false}));
    CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, false}));
    return kNever;
  };
  src.launch_end_fn = [&](TenantSink& sink, TenantId, LaunchId) -> Status {
    if (++ended == 2) {
      // Request 0's last launch has ended: its end comes only now (the boundary came late).
      CONCORD_RETURN_IF_ERROR(sink.end_request(t));
      EXPECT_FALSE(sink.end_request(t).is_ok()) << "no request open";
      // Request 1: its end is known before its launch runs.
      auto r = sink.arrive(t, sink.now());
      if (!r) return r.status();
      CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, false}));
      CONCORD_RETURN_IF_ERROR(sink.end_request(t));
      CONCORD_RETURN_IF_ERROR(sink.leave(t));
      src.done = true;
    }
    return Status::ok();
  };
  auto backend = sim();
  auto policy = builtin_policies().make("streams", {});
  ASSERT_TRUE(policy.is_ok());
  Result<RunRecord> rec = run_engine(src, *backend, **policy, EngineOptions{});
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  ASSERT_EQ(rec->tenants[0].requests.size(), 2u);
  ASSERT_EQ(rec->launches.size(), 3u);
  EXPECT_DOUBLE_EQ(rec->tenants[0].requests[0].end, rec->launches[1].end);
  EXPECT_DOUBLE_EQ(rec->tenants[0].requests[1].end, rec->launches[2].end);
  ASSERT_EQ(src.request_ends.size(), 2u);
  EXPECT_EQ(src.request_ends[0].first, 0);
  EXPECT_DOUBLE_EQ(src.request_ends[0].second, rec->launches[1].end);
  EXPECT_EQ(src.request_ends[1].first, 1);
}

TEST(LiveSink, ADroppedTenantsFailedAndQueuedWorkDoNotEndTheRun) {
  const KernelSpec k = kernel();
  ScriptSource src;
  TenantId a, b;
  src.open_fn = [&](TenantSink& sink) -> Status {
    auto x = sink.join(TenantInfo{"a", TenantClass::best_effort, 0, {}}, std::nullopt, {});
    auto y = sink.join(TenantInfo{"b", TenantClass::best_effort, 0, {}}, std::nullopt, {});
    if (!x || !y) return Status::internal("join");
    a = *x;
    b = *y;
    return Status::ok();
  };
  auto failing = std::make_unique<FailingBackend>(sim());
  FailingBackend& backend = *failing;
  int pumps = 0;
  src.pump_fn = [&](TenantSink& sink) -> Result<Seconds> {
    if (++pumps == 1) {
      for (int i = 0; i < 3; ++i) {
        for (TenantId t : {a, b}) {
          auto r = sink.arrive(t, sink.now());
          if (!r) return r.status();
          CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, true}));
        }
      }
      return 1e-6;  // while a's first launch runs
    }
    if (pumps == 2) {
      backend.failing.insert(a.value);
      CONCORD_RETURN_IF_ERROR(sink.drop(a, "its process died"));
      EXPECT_FALSE(sink.submit(a, {&k, 0, true}).is_ok()) << "a dropped tenant submits nothing";
      CONCORD_RETURN_IF_ERROR(sink.leave(b));
      src.done = true;
    }
    return kNever;
  };
  auto policy = builtin_policies().make("serial", {});
  ASSERT_TRUE(policy.is_ok());
  Result<RunRecord> rec = run_engine(src, backend, **policy, EngineOptions{});
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  int a_done = 0, b_done = 0;
  for (const LaunchRecord& l : rec->launches) {
    if (l.tenant == a) a_done += l.end >= 0 ? 1 : 0;
    if (l.tenant == b) b_done += l.end >= 0 ? 1 : 0;
  }
  EXPECT_EQ(a_done, 0) << "its running launch failed, its queued ones were dropped";
  EXPECT_EQ(b_done, 3);
  int failed = 0;
  for (const DispatchRecord& d : rec->dispatches) failed += d.error.empty() ? 0 : 1;
  EXPECT_EQ(failed, 1);
  EXPECT_GE(rec->tenants[static_cast<size_t>(a.value)].finish, 0);
}

TEST(LiveSink, AFailedDispatchOfATenantNotDroppedStillEndsTheRun) {
  const KernelSpec k = kernel();
  ScriptSource src;
  TenantId a;
  src.open_fn = [&](TenantSink& sink) -> Status {
    auto x = sink.join(TenantInfo{"a", TenantClass::best_effort, 0, {}}, std::nullopt, {});
    if (!x) return x.status();
    a = *x;
    return Status::ok();
  };
  src.pump_fn = [&](TenantSink& sink) -> Result<Seconds> {
    if (src.done) return kNever;
    auto r = sink.arrive(a, sink.now());
    if (!r) return r.status();
    CONCORD_RETURN_IF_ERROR(sink.submit(a, {&k, *r, true}));
    CONCORD_RETURN_IF_ERROR(sink.leave(a));
    src.done = true;
    return kNever;
  };
  FailingBackend backend(sim());
  backend.failing.insert(0);
  auto policy = builtin_policies().make("serial", {});
  ASSERT_TRUE(policy.is_ok());
  RunOutcome out = run_engine_outcome(src, backend, **policy, EngineOptions{});
  EXPECT_EQ(out.status.code(), StatusCode::device_error);
  EXPECT_NE(out.status.message().find("tenant 'a'"), std::string::npos) << out.status.message();
}

}  // namespace
}  // namespace concord

namespace concord {
namespace {

class CountRequests final : public EngineObserver {
 public:
  void on_request_end(TenantId, const RequestRecord& r) override {
    ++ended;
    if (r.end < r.arrival) ++backwards;
  }
  int ended = 0;
  int backwards = 0;
};

// A daemon runs for days: with keep_history off the engine forgets what finished, and ending a
// request whose last launch was forgotten already still works.
TEST(LiveSink, WithoutHistoryFinishedWorkIsForgottenAndRequestsStillEnd) {
  const KernelSpec k = *make_suite_kernel("vector_add", 1 << 16);
  ScriptSource src;
  TenantId t;
  src.open_fn = [&](TenantSink& sink) -> Status {
    auto id = sink.join(TenantInfo{"lc", TenantClass::latency_critical, 0.01, {}}, std::nullopt, {});
    if (!id) return id.status();
    t = *id;
    return Status::ok();
  };
  constexpr int kRequests = 500;
  int started = 0;
  bool end_pending = false;
  auto next = [&](TenantSink& sink) -> Status {
    if (started == kRequests) {
      src.done = true;
      return sink.leave(t);
    }
    ++started;
    auto r = sink.arrive(t, sink.now());
    if (!r) return r.status();
    CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, false}));
    CONCORD_RETURN_IF_ERROR(sink.submit(t, {&k, *r, false}));
    end_pending = true;
    return Status::ok();
  };
  src.pump_fn = [&](TenantSink& sink) -> Result<Seconds> {
    if (end_pending) {
      // The boundary comes late: both launches (maybe long trimmed) have ended.
      end_pending = false;
      CONCORD_RETURN_IF_ERROR(sink.end_request(t));
      CONCORD_RETURN_IF_ERROR(next(sink));
      return src.done ? kNever : sink.now() + 1e-3;
    }
    if (started == 0) CONCORD_RETURN_IF_ERROR(next(sink));
    return src.done ? kNever : sink.now() + 1e-3;
  };
  auto backend = sim();
  auto policy = builtin_policies().make("streams", {});
  ASSERT_TRUE(policy.is_ok());
  CountRequests count;
  EngineOptions o;
  o.keep_history = false;
  o.observer = &count;
  Result<RunRecord> rec = run_engine(src, *backend, **policy, o);
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  EXPECT_EQ(count.ended, kRequests);
  EXPECT_EQ(count.backwards, 0);
  EXPECT_LT(rec->launches.size(), 8u) << "finished launches were forgotten";
  EXPECT_LT(rec->dispatches.size(), 8u);
  EXPECT_LT(rec->tenants[0].requests.size(), 100u);
}

}  // namespace
}  // namespace concord
