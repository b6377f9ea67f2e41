// The engine as a runtime: tenants that join and leave while it runs, launches submitted as time
// passes, policies with and without hints.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

constexpr double kNever = std::numeric_limits<double>::infinity();

// A source that behaves like live processes: "a" is there from the start and runs three requests
// back to back; "b" joins at 2 ms (a timed event) and runs two; "c" joins when a's first request
// ends (in answer to a completion) and runs one. Each request is two kernels, submitted one at a
// time as the one before ends. Every tenant leaves after its last request.
class LiveSource final : public TenantSource {
 public:
  LiveSource() {
    auto a = make_suite_kernel("vector_add", 1 << 20);
    auto b = make_suite_kernel("sgemm", 512);
    auto c = make_suite_kernel("stream_triad", 1 << 22);
    if (!a || !b || !c) throw std::runtime_error("suite kernel missing");
    kernels_ = {*a, *b, *c};
  }
  std::string name() const override { return "live"; }
  Status open(TenantSink& sink) override { return join(sink, 0); }
  Result<Seconds> pump(TenantSink& sink) override {
    for (Client& c : clients_) {
      if (c.requests_left > 0 && c.request < 0) CONCORD_RETURN_IF_ERROR(start(sink, c));
    }
    if (!b_joined_ && sink.now() >= 2e-3) {
      b_joined_ = true;
      CONCORD_RETURN_IF_ERROR(join(sink, 1));
      CONCORD_RETURN_IF_ERROR(start(sink, clients_.back()));
    }
    return b_joined_ ? kNever : 2e-3;
  }
  Status on_launch_end(TenantSink& sink, TenantId tenant, LaunchId, Seconds) override {
    Client& c = client(tenant);
    if (c.submitted == 1) {
      c.submitted = 2;
      return sink.submit(tenant, LaunchSubmission{&kernels_[c.kernel], c.request, true});
    }
    return Status::ok();
  }
  Status on_request_end(TenantSink& sink, TenantId tenant, int64_t, Seconds at) override {
    ends.push_back({tenant.value, at});
    Client& c = client(tenant);
    c.request = -1;
    if (tenant.value == 0 && !c_joined_) {
      c_joined_ = true;
      CONCORD_RETURN_IF_ERROR(join(sink, 2));
      CONCORD_RETURN_IF_ERROR(start(sink, clients_.back()));
    }
    Client& same = client(tenant);  // join() may have moved the clients
    if (same.requests_left > 0) return start(sink, same);
    return sink.leave(tenant);
  }
  bool exhausted() const override {
    if (!b_joined_ || !c_joined_) return false;
    for (const Client& c : clients_) {
      if (c.requests_left > 0 || c.request >= 0) return false;
    }
    return true;
  }

  std::vector<std::pair<int64_t, Seconds>> ends;  // (tenant, end of a request)

 private:
  struct Client {
    TenantId id;
    size_t kernel = 0;
    int requests_left = 0;
    int64_t request = -1;
    int submitted = 0;
  };
  Status join(TenantSink& sink, size_t which) {
    static const char* names[] = {"a", "b", "c"};
    static const int requests[] = {3, 2, 1};
    TenantInfo info;
    info.name = names[which];
    info.cls = which == 1 ? TenantClass::latency_critical : TenantClass::best_effort;
    info.latency_target = which == 1 ? 0.01 : 0;
    auto id = sink.join(info, std::nullopt, {&kernels_[which]});
    if (!id) return id.status();
    clients_.push_back(Client{*id, which, requests[which], -1, 0});
    return Status::ok();
  }
  Status start(TenantSink& sink, Client& c) {
    auto r = sink.arrive(c.id, sink.now());
    if (!r) return r.status();
    c.request = *r;
    --c.requests_left;
    c.submitted = 1;
    return sink.submit(c.id, LaunchSubmission{&kernels_[c.kernel], c.request, false});
  }
  Client& client(TenantId id) {
    for (Client& c : clients_) {
      if (c.id == id) return c;
    }
    throw std::logic_error("unknown tenant");
  }

  std::vector<KernelSpec> kernels_;
  std::vector<Client> clients_;
  bool b_joined_ = false;
  bool c_joined_ = false;
};

TEST(OpenWorld, TenantsJoinAndLeaveWhileTheEngineRuns) {
  for (const auto& entry : builtin_policies().list()) {
    if (entry.name == "manual") continue;  // needs placements named per tenant
    SCOPED_TRACE(entry.name);
    auto policy = builtin_policies().make(entry.name, {});
    ASSERT_TRUE(policy.is_ok()) << policy.status().to_string();
    sim::SimBackend backend(h200_spec());
    LiveSource source;
    auto r = run_engine(source, backend, **policy, EngineOptions{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ(r->tenants.size(), 3u);
    // In join order: a, then c (joined early, at a's first request end), then b (at 2 ms).
    const TenantRecord& a = r->tenants[0];
    const TenantRecord& c = r->tenants[1];
    const TenantRecord& b = r->tenants[2];
    EXPECT_EQ(a.name, "a");
    EXPECT_EQ(b.name, "b");
    EXPECT_EQ(c.name, "c");
    EXPECT_EQ(a.requests.size(), 3u);
    EXPECT_EQ(b.requests.size(), 2u);
    EXPECT_EQ(c.requests.size(), 1u);
    // b joined at its timed event, c when a's first request ended.
    EXPECT_DOUBLE_EQ(a.joined, 0);
    EXPECT_GE(b.joined, 2e-3);
    EXPECT_DOUBLE_EQ(c.joined, a.requests[0].end);
    EXPECT_GE(b.requests[0].arrival, b.joined);
    // Every request ran both kernels, in order, and ended after it arrived; every tenant finished
    // when its last request did.
    std::map<std::pair<int64_t, int64_t>, std::vector<const LaunchRecord*>> by_request;
    for (const LaunchRecord& l : r->launches) by_request[{l.tenant.value, l.request}].push_back(&l);
    EXPECT_EQ(by_request.size(), 6u);
    for (const auto& [key, ls] : by_request) {
      ASSERT_EQ(ls.size(), 2u);
      EXPECT_EQ(ls[0]->index, 0);
      EXPECT_EQ(ls[1]->index, 1);
      EXPECT_GE(ls[1]->start, ls[0]->end - 1e-12);
      const RequestRecord& req = r->tenants[static_cast<size_t>(key.first)].requests[static_cast<size_t>(key.second)];
      EXPECT_DOUBLE_EQ(req.end, ls[1]->end);
      EXPECT_LE(req.arrival, ls[0]->start + 1e-12);
    }
    for (const TenantRecord& t : r->tenants) EXPECT_DOUBLE_EQ(t.finish, t.requests.back().end);
    EXPECT_EQ(source.ends.size(), 6u);
  }
}

// Refusals a source gets from the engine.
class MisbehavingSource final : public TenantSource {
 public:
  explicit MisbehavingSource(int fault) : fault_(fault) {
    auto k = make_suite_kernel("vector_add", 1 << 16);
    if (!k) throw std::runtime_error("suite kernel missing");
    kernel_ = *k;
  }
  std::string name() const override { return "misbehaving"; }
  Status open(TenantSink& sink) override {
    if (fault_ == 0) return sink.arrive(TenantId{0}, 0).status();  // no such tenant
    auto id = sink.join(TenantInfo{"t", TenantClass::best_effort, 0, {}}, std::nullopt, {&kernel_});
    if (!id) return id.status();
    id_ = *id;
    if (fault_ == 1) return sink.arrive(id_, 0).status();  // before the clock
    return Status::ok();
  }
  Result<Seconds> pump(TenantSink& sink) override {
    if (done_) return kNever;
    done_ = true;
    auto r = sink.arrive(id_, sink.now());
    if (!r) return r.status();
    if (fault_ == 2) CONCORD_RETURN_IF_ERROR(sink.arrive(id_, sink.now()).status());  // request 0 still open
    if (fault_ == 3) CONCORD_RETURN_IF_ERROR(sink.submit(id_, LaunchSubmission{&kernel_, *r + 1, true}));
    CONCORD_RETURN_IF_ERROR(sink.submit(id_, LaunchSubmission{&kernel_, *r, true}));
    CONCORD_RETURN_IF_ERROR(sink.leave(id_));
    if (fault_ == 4) CONCORD_RETURN_IF_ERROR(sink.submit(id_, LaunchSubmission{&kernel_, *r, true}));
    return kNever;
  }
  // Fault 5: claims more may come but never delivers anything.
  bool exhausted() const override { return done_ && fault_ != 5; }

 private:
  int fault_;
  KernelSpec kernel_;
  TenantId id_;
  bool done_ = false;
};

TEST(OpenWorld, TheEngineRefusesWhatASourceCannotDo) {
  const char* expected[] = {"no tenant", "after the clock starts", "has not had its last launch", "open request is",
                            "has left"};
  for (int fault = 0; fault < 5; ++fault) {
    SCOPED_TRACE(fault);
    auto policy = builtin_policies().make("streams", {});
    sim::SimBackend backend(h200_spec());
    MisbehavingSource source(fault);
    auto r = run_engine(source, backend, **policy, EngineOptions{});
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(expected[fault]), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("misbehaving"), std::string::npos) << r.status().to_string();
  }
  // A source that is never exhausted but has nothing due: an error once its work has run, not a hang.
  auto policy = builtin_policies().make("streams", {});
  sim::SimBackend backend(h200_spec());
  MisbehavingSource source(5);
  auto r = run_engine(source, backend, **policy, EngineOptions{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'misbehaving' has nothing due"), std::string::npos) << r.status().to_string();
}

// Every policy runs on the present alone (no hints), and with a source that submits each kernel
// only when the one before it ended; the work done is the same.
TEST(OpenWorld, EveryPolicyRunsWithoutHints) {
  auto w = workload({tenant("com", {step("sgemm", 512, 2), step("vector_add", 1 << 20)}, 3),
                     tenant("mem", {step("stream_triad", 1 << 22, 3)}, 2), tenant("lat", {step("bfs", 1 << 18, 2)}, 2)});
  for (const auto& entry : builtin_policies().list()) {
    if (entry.name == "manual") continue;
    for (int mode = 0; mode < 3; ++mode) {
      SCOPED_TRACE(entry.name + " mode " + std::to_string(mode));
      SpecSourceOptions so;
      so.hints = mode == 0;
      so.submit = mode == 2 ? SpecSourceOptions::Submit::launch : SpecSourceOptions::Submit::request;
      auto policy = builtin_policies().make(entry.name, {});
      ASSERT_TRUE(policy.is_ok());
      sim::SimBackend backend(h200_spec());
      auto r = run_workload(w, backend, **policy, EngineOptions{}, so);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      ASSERT_EQ(r->tenants.size(), 3u);
      EXPECT_EQ(r->tenants[0].requests.size(), 3u);
      EXPECT_EQ(r->launches.size(), 3u * 3 + 2u * 3 + 2u * 2);
      for (const LaunchRecord& l : r->launches) EXPECT_GT(l.end, l.start);
      if (mode == 2) {
        // Submitted one at a time: nothing was ever dispatched behind another.
        for (const DispatchRecord& d : r->dispatches) EXPECT_FALSE(d.after.valid());
      }
    }
  }
}

// With hints and without, on a spec whose requests are submitted whole, RAISE decides the same:
// the task contents it needs are in the present (the submitted launches).
TEST(OpenWorld, RaiseNeedsNoHintWhenTasksAreSubmittedWhole) {
  auto w = workload({tenant("com", {step("sgemm", 512, 4)}, 2), tenant("mem", {step("stream_triad", 1 << 22, 4)}, 2),
                     tenant("lat", {step("bfs", 1 << 18, 4)}, 2)});
  std::vector<double> makespans;
  for (bool hints : {true, false}) {
    auto policy = builtin_policies().make("raise", {});
    sim::SimBackend backend(h200_spec());
    SpecSourceOptions so;
    so.hints = hints;
    auto r = run_workload(w, backend, **policy, EngineOptions{}, so);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    makespans.push_back(r->makespan);
  }
  EXPECT_DOUBLE_EQ(makespans[0], makespans[1]);
}

}  // namespace
}  // namespace concord

namespace concord {
namespace {

// A backend whose host clock reads a little behind the device clock its completions are stamped
// with, as the CUDA backend's can (events against steady_clock): a closed-loop request that
// arrives as the previous one ends carries that end as its arrival time.
class HostClockBehind final : public Backend {
 public:
  explicit HostClockBehind(Seconds lag) : sim_(h200_spec()), lag_(lag) {}
  std::string name() const override { return "sim-host-behind"; }
  const DeviceSpec& device() const override { return sim_.device(); }
  Capabilities capabilities(const KernelSpec& k) const override { return sim_.capabilities(k); }
  Status prepare_tenant(TenantId t, const std::vector<const KernelSpec*>& k) override { return sim_.prepare_tenant(t, k); }
  Status start_clock() override { return sim_.start_clock(); }
  Status dispatch(const DispatchRequest& r) override { return sim_.dispatch(r); }
  Status set_sm_set(DispatchId d, const SmSet& s) override { return sim_.set_sm_set(d, s); }
  Status set_tlp(DispatchId d, int tlp, const SmSet& s, int t) override { return sim_.set_tlp(d, tlp, s, t); }
  Status preempt(DispatchId d) override { return sim_.preempt(d); }
  Result<std::vector<int64_t>> progress(DispatchId d) const override { return sim_.progress(d); }
  Seconds now() const override { return std::max(0.0, sim_.now() - lag_); }
  Result<std::vector<Completion>> advance(Seconds until) override { return sim_.advance(until + lag_); }
  int running() const override { return sim_.running(); }
  Status abort_all(Seconds grace) override { return sim_.abort_all(grace); }

 private:
  sim::SimBackend sim_;
  Seconds lag_;
};

TEST(OpenWorld, ArrivalsStampedWithADeviceClockAheadOfTheHostAreAccepted) {
  auto w = workload({tenant("loop", {step("vector_add", 1 << 20)}, 4)});
  auto policy = builtin_policies().make("streams", {});
  HostClockBehind backend(20e-6);
  auto r = run_workload(w, backend, **policy, EngineOptions{});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tenants[0].requests.size(), 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_DOUBLE_EQ(r->tenants[0].requests[i].arrival, r->tenants[0].requests[i - 1].end);
}

}  // namespace
}  // namespace concord
