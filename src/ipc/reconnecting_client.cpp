#include "ipc/reconnecting_client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace concord::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// How often the thread looks at the registration it holds (is it pass-through? is the LC flag to
// be raised on it?).
constexpr std::chrono::milliseconds kWatchPeriod{20};
// A registration that lasted this long lost its daemon by chance (a restart): the next tries start
// fast again. One lost sooner (a daemon that drops the tenant at once, say for a failed launch)
// backs off as failures do, up to the refused delay: it is not made again and again.
constexpr auto kSettled = std::chrono::seconds(1);
// A daemon that answered and refused the registration is asked again this many times more slowly.
constexpr int kRefusedSlowdown = 10;

Decision whole_gpu_release(uint64_t seq) { return Decision{seq, Verdict::release, Priority::normal, 0}; }

class Reconnecting final : public TenantClient {
 public:
  Reconnecting(std::unique_ptr<TenantClient> first, const TenantClientOptions& options, ConnectOnce connect)
      : options_(options),
        connect_(std::move(connect)),
        cls_(first->granted_class()),
        lc_refused_(first->lc_refused()),
        quota_(first->memory_quota()),
        tenant_(first->tenant()) {
    // Registered again as what the daemon granted first: an LC refused and run as BE comes back BE.
    // An LC is refused rather than admitted as BE by the new daemon: the process launches as an LC
    // tenant (no gate), so as a BE it would be one that never yields.
    options_.info.cls = cls_;
    if (cls_ != TenantClass::latency_critical) options_.info.latency_target_ns = 0;
    if (cls_ == TenantClass::latency_critical) options_.info.on_lc_refused = LcRefusal::refuse;
    options_.reconnect.enabled = false;
    options_.reconnect.first_retry = std::max(options_.reconnect.first_retry, std::chrono::milliseconds(1));
    options_.reconnect.most_retry = std::max(options_.reconnect.most_retry, options_.reconnect.first_retry);
    current_.store(first.release(), std::memory_order_seq_cst);
    since_ = Clock::now();
    watcher_ = std::thread([this] { watch(); });
  }
  ~Reconnecting() override { close(); }

  uint64_t tenant() const override {
    Use u(*this);
    return u ? u->tenant() : tenant_.load(std::memory_order_relaxed);
  }
  TenantClass granted_class() const override { return cls_; }
  const std::string& lc_refused() const override { return lc_refused_; }
  bool pass_through() const override {
    Use u(*this);
    return !u || u->pass_through();
  }
  LeaseTerms lease() const override {
    Use u(*this);
    if (!u) return LeaseTerms{};
    const LeaseTerms t = u->lease();
    // The flag wanted up and not yet raised on this registration (its lease named no slot until
    // now): raised here, at the LC's next launch, rather than at the watcher's next look. Never
    // waited for: the watcher takes the lock while it lets a registration go.
    if (raise_pending_.load(std::memory_order_acquire) && t.lc_slot != kNoLcSlot) {
      std::unique_lock lock(flag_mu_, std::try_to_lock);
      if (lock.owns_lock() && flag_wanted_ && raised_slot_ == kNoLcSlot && current_.load() == u.get()) raise_on(*u.get());
    }
    return t;
  }
  MemoryQuota memory_quota() const override { return quota_; }
  void memory_used(uint64_t live_bytes, uint64_t peak_bytes) override {
    std::lock_guard lock(memory_mu_);
    memory_ = {live_bytes, peak_bytes};
    memory_told_ = true;
    Use u(*this);
    if (u) u->memory_used(live_bytes, peak_bytes);
  }
  uint64_t lc_active() const override {
    Use u(*this);
    return u ? u->lc_active() : 0;
  }
  void raise_lc(uint32_t) override {
    std::lock_guard lock(flag_mu_);
    flag_wanted_ = true;
    Use u(*this);
    if (u) raise_on(*u.get());
  }
  void lower_lc(uint32_t) override {
    std::lock_guard lock(flag_mu_);
    flag_wanted_ = false;
    raise_pending_.store(false, std::memory_order_release);
    Use u(*this);
    if (u && raised_slot_ != kNoLcSlot) u->lower_lc(raised_slot_);
    raised_slot_ = kNoLcSlot;
  }
  LeaseTerms wait_open(uint64_t timeout_ns, uint64_t recheck_ns) override {
    Use u(*this);
    return u ? u->wait_open(timeout_ns, recheck_ns) : LeaseTerms{};
  }
  Result<uint64_t> notice(LaunchNotice notice, bool launched) override {
    Use u(*this);
    if (!u) return uint64_t{0};
    return u->notice(notice, launched);
  }
  Result<Decision> wait_release(uint64_t seq) override {
    Use u(*this);
    if (!u) return whole_gpu_release(seq);
    return u->wait_release(seq);
  }
  Status completed(uint64_t seq, uint64_t stream, bool ok, uint64_t at_ns) override {
    Use u(*this);
    return u ? u->completed(seq, stream, ok, at_ns) : Status::ok();
  }
  void flush() override {
    Use u(*this);
    if (u) u->flush();
  }
  std::vector<SmSetAnnouncement> take_announcements() override {
    Use u(*this);
    return u ? u->take_announcements() : std::vector<SmSetAnnouncement>{};
  }
  Status request_begin() override {
    std::lock_guard lock(request_mu_);
    ++open_requests_;
    Use u(*this);
    return u ? u->request_begin() : Status::ok();
  }
  Status request_end() override {
    std::lock_guard lock(request_mu_);
    open_requests_ = std::max(open_requests_, 1) - 1;
    Use u(*this);
    return u ? u->request_end() : Status::ok();
  }
  void close() override {
    if (closed_.exchange(true)) return;
    {
      std::lock_guard lock(stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    {
      // Closed first: calls waiting in it (a held launch, a closed gate) answer at once, so
      // letting it go waits for nothing.
      Use u(*this);
      if (u) u->close();
    }
    retire();
  }
  uint64_t last_seq() const override {
    Use u(*this);
    return u ? u->last_seq() : next_base_.load(std::memory_order_acquire);
  }
  uint64_t reconnections() const override { return reconnections_.load(std::memory_order_relaxed); }

 private:
  // A call's hold on the registration it found (null: none now). Users count on one of two
  // counters, the one the epoch names as they come: retire() moves the epoch, so it waits only for
  // the calls that came before it, however many keep coming.
  class Use {
   public:
    explicit Use(const Reconnecting& r) : r_(r), side_(r.epoch_.load(std::memory_order_seq_cst) & 1) {
      r_.users_[side_].fetch_add(1, std::memory_order_seq_cst);
      c_ = r_.current_.load(std::memory_order_seq_cst);
    }
    ~Use() { r_.users_[side_].fetch_sub(1, std::memory_order_release); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    explicit operator bool() const { return c_ != nullptr; }
    TenantClient* operator->() const { return c_; }
    TenantClient* get() const { return c_; }

   private:
    const Reconnecting& r_;
    const unsigned side_;
    TenantClient* c_ = nullptr;
  };

  // The registration, taken out of reach: no call finds it from here on, and none that found it
  // before still holds it once this returns.
  std::unique_ptr<TenantClient> retire() {
    std::lock_guard lock(flag_mu_);
    std::unique_ptr<TenantClient> c(current_.exchange(nullptr, std::memory_order_seq_cst));
    raised_slot_ = kNoLcSlot;
    raise_pending_.store(flag_wanted_, std::memory_order_release);
    // Calls on either counter may hold it: drain the old side, move the epoch, drain the other.
    for (int i = 0; i < 2; ++i) {
      const unsigned side = epoch_.fetch_add(1, std::memory_order_seq_cst) & 1;
      while (users_[side].load(std::memory_order_seq_cst) != 0) sleep_ns(20'000);
    }
    return c;
  }

  // flag_mu_ held. The registration's own slot, once its lease names one (until then the raise is
  // pending: lease() and the watcher try again).
  void raise_on(TenantClient& c) const {
    const uint32_t slot = c.lease().lc_slot;
    if (slot == kNoLcSlot) {
      raise_pending_.store(true, std::memory_order_release);
      return;
    }
    c.raise_lc(slot);
    raised_slot_ = slot;
    raise_pending_.store(false, std::memory_order_release);
  }

  void tell(const std::string& what) const {
    if (options_.on_event) options_.on_event(what);
  }

  void watch() {
    bool lost = false;
    auto delay = options_.reconnect.first_retry;
    std::string last_failure;
    std::unique_lock lock(stop_mu_);
    while (!stopping_) {
      stop_cv_.wait_for(lock, lost ? delay : kWatchPeriod, [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      if (!lost) {
        lost = let_go_if_gone();
        if (lost) {
          delay = Clock::now() - since_ >= kSettled
                      ? options_.reconnect.first_retry
                      : std::min(delay * 2, options_.reconnect.most_retry * kRefusedSlowdown);
        }
      } else {
        bool refused = false;
        if (register_again(last_failure, refused)) {
          lost = false;
          last_failure.clear();
        } else {
          delay = std::min(delay * 2, options_.reconnect.most_retry);
          if (refused) delay = options_.reconnect.most_retry * kRefusedSlowdown;
        }
      }
      lock.lock();
    }
  }

  // Whether the registration held turned pass-through (then let go); raises the LC flag on it
  // when it is wanted up and its lease named no slot until now.
  bool let_go_if_gone() {
    {
      Use u(*this);
      if (u && !u->pass_through()) {
        std::lock_guard lock(flag_mu_);
        if (flag_wanted_ && raised_slot_ == kNoLcSlot && current_.load() == u.get()) raise_on(*u.get());
        return false;
      }
    }
    std::unique_ptr<TenantClient> gone = retire();
    if (!gone) return true;
    next_base_.store(gone->last_seq(), std::memory_order_release);
    const std::string why = gone->pass_through_reason();
    gone.reset();  // its ring ends closed, its heartbeat thread joined
    tell(fmt::format("lost concordd at {}{}{}: launches pass through until it is back", options_.socket_path,
                     why.empty() ? "" : " (", why.empty() ? "" : why + ")"));
    return true;
  }

  bool register_again(std::string& last_failure, bool& refused) {
    TenantClientOptions o = options_;
    o.seq_base = next_base_.load(std::memory_order_acquire);
    Result<std::unique_ptr<TenantClient>> c = connect_(o);
    if (!c.is_ok()) {
      const StatusCode code = c.status().code();
      refused = code == StatusCode::permission_denied || code == StatusCode::failed_precondition;
      if (refused && c.status().message() != last_failure) tell("registering again was refused: " + c.status().message());
      last_failure = c.status().message();
      return false;
    }
    if ((*c)->granted_class() != cls_) {
      // Not what the process launches as (a connect told to refuse should never give this).
      refused = true;
      last_failure = "the daemon admitted the tenant as another class";
      tell("registering again was refused: " + last_failure);
      (*c)->close();
      return false;
    }
    TenantClient* fresh = c->release();
    {
      // What the new daemon cannot know, before any call finds the registration: an LC request
      // open now and the memory in use.
      std::scoped_lock lock(request_mu_, memory_mu_, flag_mu_);
      if (open_requests_ > 0) (void)fresh->request_begin();
      if (memory_told_) fresh->memory_used(memory_.first, memory_.second);
      tenant_.store(fresh->tenant(), std::memory_order_relaxed);
      current_.store(fresh, std::memory_order_seq_cst);
      if (flag_wanted_) raise_on(*fresh);
    }
    since_ = Clock::now();
    reconnections_.fetch_add(1, std::memory_order_relaxed);
    tell(fmt::format("registered again with concordd as tenant {} ({} times now)", fresh->tenant(), reconnections()));
    return true;
  }

  TenantClientOptions options_;
  const ConnectOnce connect_;
  const TenantClass cls_;
  const std::string lc_refused_;
  const MemoryQuota quota_;
  std::atomic<uint64_t> tenant_;

  std::atomic<TenantClient*> current_{nullptr};
  mutable std::atomic<uint64_t> epoch_{0};
  mutable std::atomic<uint64_t> users_[2]{};
  std::atomic<uint64_t> next_base_{0};  // the last number of the registration let go
  std::atomic<uint64_t> reconnections_{0};
  Clock::time_point since_;  // the watcher's: when the registration held was made

  // The LC flag, and which registration it is up on (mutable: lease() raises a pending one).
  mutable std::mutex flag_mu_;
  bool flag_wanted_ = false;
  mutable std::atomic<bool> raise_pending_{false};  // wanted up, and not up on the current registration
  mutable uint32_t raised_slot_ = kNoLcSlot;  // up on the current registration's slot (kNoLcSlot: not up there)

  std::mutex request_mu_;
  int open_requests_ = 0;

  std::mutex memory_mu_;
  std::pair<uint64_t, uint64_t> memory_{0, 0};  // live, peak: the last told
  bool memory_told_ = false;

  std::atomic<bool> closed_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace

std::unique_ptr<TenantClient> reconnecting(std::unique_ptr<TenantClient> first, const TenantClientOptions& options,
                                           ConnectOnce connect) {
  return std::make_unique<Reconnecting>(std::move(first), options, std::move(connect));
}

Result<std::unique_ptr<TenantClient>> TenantClient::connect(const TenantClientOptions& options) {
  Result<std::unique_ptr<TenantClient>> first = connect_once(options);
  if (!first.is_ok() || !options.reconnect.enabled) return first;
  return reconnecting(std::move(*first), options, connect_once);
}

}  // namespace concord::ipc
