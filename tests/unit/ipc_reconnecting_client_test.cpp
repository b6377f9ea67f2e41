// The reconnecting tenant client (ipc/reconnecting_client.h) over registrations of the test's own:
// they turn pass-through when the test says, and count the calls in them, so a registration let go
// while a call holds it, or called after it was let go, is seen.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ipc/reconnecting_client.h"

namespace concord::ipc {
namespace {

using namespace std::chrono_literals;

struct Books {
  std::atomic<int> made{0}, let_go{0};
  std::atomic<int> let_go_in_use{0};  // destroyed while a call was inside it
  std::atomic<int> called_after{0};   // a call that came into one already destroyed
  std::mutex mu;
  std::vector<uint64_t> bases;       // each registration's seq_base, in the order made
  std::vector<uint64_t> last_seqs;   // each let-go registration's last number
  std::vector<std::string> events;
};

class Fake final : public TenantClient {
 public:
  Fake(Books& b, uint64_t base, uint32_t slot, TenantClass cls = TenantClass::latency_critical)
      : b_(b), base_(base), slot_(slot), cls_(cls) {}
  ~Fake() override {
    if (in_.load() != 0) ++b_.let_go_in_use;
    {
      std::lock_guard lock(b_.mu);
      b_.last_seqs.push_back(base_ + n_.load());
    }
    dead_.store(true);
    ++b_.let_go;
  }
  // The memory stays, so that a call into a destroyed one is counted rather than undefined.
  static void operator delete(void*) {}

  uint64_t tenant() const override {
    In in(*this);
    return 7;
  }
  TenantClass granted_class() const override { return cls_; }
  const std::string& lc_refused() const override { return none_; }
  bool pass_through() const override {
    In in(*this);
    return gone.load();
  }
  LeaseTerms lease() const override {
    In in(*this);
    LeaseTerms t;
    t.lc_slot = slot_.load();
    return t;
  }
  MemoryQuota memory_quota() const override { return MemoryQuota{}; }
  void memory_used(uint64_t live, uint64_t peak) override {
    In in(*this);
    std::lock_guard lock(mu_);
    memory.emplace_back(live, peak);
  }
  uint64_t lc_active() const override {
    In in(*this);
    return 0;
  }
  void raise_lc(uint32_t slot) override {
    In in(*this);
    raised.store(slot);
  }
  void lower_lc(uint32_t slot) override {
    In in(*this);
    if (raised.load() == slot) raised.store(kNoLcSlot);
  }
  LeaseTerms wait_open(uint64_t, uint64_t) override {
    In in(*this);
    std::this_thread::sleep_for(200us);  // a call that holds the registration a while
    return lease();
  }
  Result<uint64_t> notice(LaunchNotice, bool) override {
    In in(*this);
    if (gone.load()) return uint64_t{0};
    return base_ + n_.fetch_add(1) + 1;
  }
  Result<Decision> wait_release(uint64_t seq) override {
    In in(*this);
    return Decision{seq, Verdict::release, Priority::normal, 0};
  }
  Status completed(uint64_t seq, uint64_t, bool, uint64_t) override {
    In in(*this);
    if (seq > base_ + n_.load()) return Status::failed_precondition("never noticed");
    return Status::ok();
  }
  void flush() override { In in(*this); }
  std::vector<SmSetAnnouncement> take_announcements() override {
    In in(*this);
    return {};
  }
  Status request_begin() override {
    In in(*this);
    ++begun;
    return Status::ok();
  }
  Status request_end() override {
    In in(*this);
    ++ended;
    return Status::ok();
  }
  void close() override {
    In in(*this);
    gone.store(true);
  }
  uint64_t last_seq() const override {
    In in(*this);
    return base_ + n_.load();
  }

  std::atomic<bool> gone{false};
  std::atomic<uint32_t> raised{kNoLcSlot};
  std::atomic<int> begun{0}, ended{0};
  std::atomic<uint32_t>& slot() { return slot_; }
  std::mutex mu_;
  std::vector<std::pair<uint64_t, uint64_t>> memory;

 private:
  struct In {
    explicit In(const Fake& f) : f(f) {
      if (f.dead_.load()) ++f.b_.called_after;
      ++f.in_;
    }
    ~In() { --f.in_; }
    const Fake& f;
  };
  Books& b_;
  const uint64_t base_;
  std::atomic<uint32_t> slot_;
  std::atomic<uint64_t> n_{0};
  mutable std::atomic<int> in_{0};
  std::atomic<bool> dead_{false};
  const TenantClass cls_;
  const std::string none_;
};

// The test's registrations: each made with the base the client asks for; the latest one kept.
struct Registrations {
  Books books;
  std::mutex mu;
  Fake* latest = nullptr;
  uint32_t next_slot = 3;
  int refuse = 0;  // refuse this many registrations first (as a daemon that says no)
  int as_be = 0;   // then admit this many as BE (a daemon told to fall back to BE would)
  std::vector<LcRefusal> asked;  // each registration's on_lc_refused

  TenantClientOptions options() {
    TenantClientOptions o;
    o.info.cls = TenantClass::latency_critical;
    o.info.latency_target_ns = 10'000'000;
    o.reconnect.enabled = true;
    o.reconnect.first_retry = 1ms;
    o.reconnect.most_retry = 2ms;
    o.on_event = [this](const std::string& e) {
      std::lock_guard lock(books.mu);
      books.events.push_back(e);
    };
    return o;
  }
  std::unique_ptr<TenantClient> make(uint64_t base, TenantClass cls = TenantClass::latency_critical) {
    std::lock_guard lock(mu);
    {
      std::lock_guard l(books.mu);
      books.bases.push_back(base);
    }
    ++books.made;
    auto f = std::make_unique<Fake>(books, base, next_slot, cls);
    latest = f.get();
    return f;
  }
  ConnectOnce connect() {
    return [this](const TenantClientOptions& o) -> Result<std::unique_ptr<TenantClient>> {
      bool be = false;
      {
        std::lock_guard lock(mu);
        asked.push_back(o.info.on_lc_refused);
        if (refuse > 0) {
          --refuse;
          return Status::permission_denied("no LC for you");
        }
        if (as_be > 0) {
          --as_be;
          be = true;
        }
      }
      return make(o.seq_base, be ? TenantClass::best_effort : TenantClass::latency_critical);
    };
  }
  Fake* current() {
    std::lock_guard lock(mu);
    return latest;
  }
};

bool eventually(const std::function<bool()>& f, std::chrono::milliseconds within = 2s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!f()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Four threads call the client without pause while its registration is lost and made again every
// 10 ms (as fast as the client notices): no registration is let go while a call is in it or called afterwards, every number
// given out is given once and each registration goes on from the last number of the one before.
TEST(ReconnectingClient, ManyThreadsCallingWhileRegistrationsComeAndGoNeverFindOneLetGo) {
  Registrations r;
  std::unique_ptr<TenantClient> c = reconnecting(r.make(0), r.options(), r.connect());
  std::atomic<bool> stop{false};
  std::mutex seqs_mu;
  std::vector<uint64_t> seqs;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> mine;
      for (uint64_t i = 0; !stop.load(); ++i) {
        (void)c->lease();
        const Result<uint64_t> seq = c->notice(LaunchNotice{}, true);
        if (seq.is_ok() && *seq != 0) {
          mine.push_back(*seq);
          EXPECT_TRUE(c->completed(*seq, 1, true).is_ok());
        }
        (void)c->pass_through();
        if (i % 16 == 0) (void)c->wait_open(1'000'000);
        if (t == 0 && i % 32 == 0) {
          c->raise_lc(0);
          c->lower_lc(0);
        }
        if (t == 1 && i % 32 == 0) {
          (void)c->request_begin();
          (void)c->request_end();
        }
      }
      std::lock_guard lock(seqs_mu);
      seqs.insert(seqs.end(), mine.begin(), mine.end());
    });
  }
  for (int k = 0; k < 80; ++k) {
    std::this_thread::sleep_for(10ms);
    if (Fake* f = r.current()) f->gone.store(true);
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  c->close();
  EXPECT_EQ(r.books.let_go_in_use.load(), 0) << "a registration was let go while a call was inside it";
  EXPECT_EQ(r.books.called_after.load(), 0) << "a call came into a registration after it was let go";
  EXPECT_EQ(r.books.made.load(), r.books.let_go.load());
  EXPECT_GE(r.books.made.load(), 10) << "too few registrations came and went to judge";
  EXPECT_EQ(c->reconnections(), static_cast<uint64_t>(r.books.made.load() - 1));
  std::sort(seqs.begin(), seqs.end());
  EXPECT_EQ(std::adjacent_find(seqs.begin(), seqs.end()), seqs.end()) << "a launch number was given out twice";
  EXPECT_GT(seqs.size(), 1000u);
  // Registration k + 1 goes on from the number registration k ended at (let go in the order made).
  std::lock_guard lock(r.books.mu);
  ASSERT_EQ(r.books.bases.size(), r.books.last_seqs.size());
  for (size_t k = 0; k + 1 < r.books.bases.size(); ++k) EXPECT_EQ(r.books.bases[k + 1], r.books.last_seqs[k]) << "registration " << k + 1;
}

// What the new daemon cannot know goes to the new registration before any call finds it: the LC
// flag (on its own slot, once its lease names one), an open request and the memory in use. While
// no registration answers the client is pass-through.
TEST(ReconnectingClient, TheNewRegistrationGetsTheFlagTheOpenRequestAndTheMemory) {
  Registrations r;
  r.refuse = 3;  // the first tries after the loss are refused (told once)
  std::unique_ptr<TenantClient> c = reconnecting(r.make(0), r.options(), r.connect());
  Fake* first = r.current();
  ASSERT_TRUE(c->request_begin().is_ok());
  c->raise_lc(99);  // whatever is passed: its own slot goes up
  EXPECT_EQ(first->raised.load(), 3u);
  c->memory_used(1000, 2000);
  {
    std::lock_guard lock(r.mu);
    r.next_slot = kNoLcSlot;  // the next lease names no slot at first
  }
  first->gone.store(true);
  ASSERT_TRUE(eventually([&] { return r.current() != first; })) << "not registered again";
  Fake* second = r.current();
  EXPECT_EQ(second->begun.load(), 1) << "the open request was not told again";
  {
    std::lock_guard lock(second->mu_);
    ASSERT_EQ(second->memory.size(), 1u);
    EXPECT_EQ(second->memory[0], std::make_pair(uint64_t{1000}, uint64_t{2000}));
  }
  EXPECT_EQ(second->raised.load(), kNoLcSlot);
  second->slot().store(5);  // its lease names a slot now
  EXPECT_TRUE(eventually([&] { return second->raised.load() == 5u; })) << "the flag was not raised on the new slot";
  c->lower_lc(3);  // the slot the caller read before: the client lowers its own
  EXPECT_EQ(second->raised.load(), kNoLcSlot);
  ASSERT_TRUE(c->request_end().is_ok());
  EXPECT_EQ(second->ended.load(), 1);
  // The old registration's numbers are not the new one's to take.
  EXPECT_EQ(c->reconnections(), 1u);
  c->close();
  EXPECT_TRUE(c->pass_through());
  EXPECT_EQ(*c->notice(LaunchNotice{}, true), 0u);
  std::lock_guard lock(r.books.mu);
  const auto count = [&](const char* what) {
    return std::count_if(r.books.events.begin(), r.books.events.end(), [&](const std::string& e) { return e.find(what) != std::string::npos; });
  };
  EXPECT_EQ(count("lost concordd"), 1);
  EXPECT_EQ(count("refused: no LC for you"), 1) << "a refusal is told once per reason";
  EXPECT_EQ(count("registered again"), 1);
}

// An LC tenant registers again as LC or not at all: the new daemon is asked to refuse rather than
// admit it as BE (the process launches as an LC, ungated), and a registration of another class is
// let go at once, the client staying pass-through.
TEST(ReconnectingClient, AnLcComesBackAsLcOrStaysPassThrough) {
  Registrations r;
  TenantClientOptions o = r.options();
  o.info.on_lc_refused = LcRefusal::best_effort;  // the first registration's own choice
  std::unique_ptr<TenantClient> c = reconnecting(r.make(0), o, r.connect());
  Fake* first = r.current();
  {
    std::lock_guard lock(r.mu);
    r.as_be = 1;
  }
  first->gone.store(true);
  ASSERT_TRUE(eventually([&] { return r.books.let_go.load() >= 2; })) << "the BE registration was not let go";
  ASSERT_TRUE(eventually([&] { return !c->pass_through(); }, 3s)) << "not registered again as LC";
  EXPECT_EQ(c->granted_class(), TenantClass::latency_critical);
  EXPECT_EQ(r.current()->granted_class(), TenantClass::latency_critical);
  EXPECT_EQ(c->reconnections(), 1u) << "the BE registration counted as one";
  {
    std::lock_guard lock(r.mu);
    ASSERT_GE(r.asked.size(), 2u);
    for (LcRefusal a : r.asked) EXPECT_EQ(a, LcRefusal::refuse);
  }
  c->close();
  std::lock_guard lock(r.books.mu);
  EXPECT_EQ(std::count_if(r.books.events.begin(), r.books.events.end(),
                          [](const std::string& e) { return e.find("admitted the tenant as another class") != std::string::npos; }),
            1);
}

}  // namespace
}  // namespace concord::ipc
