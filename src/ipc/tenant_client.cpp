#include "ipc/tenant_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "ipc/control_socket.h"
#include "ipc/launch_ledger.h"

namespace concord::ipc {
namespace {

Decision whole_gpu_release(uint64_t seq) { return Decision{seq, Verdict::release, Priority::normal, 0}; }

constexpr uint64_t kLivenessCheckNs = 2'000'000;

class Client final : public TenantClient {
 public:
  Client(TenantClientOptions options, ControlClient control, TenantChannel channel, LeaseReader lease, LcBoard board,
         uint64_t tenant, std::string lc_refused)
      : options_(std::move(options)),
        control_(std::move(control)),
        channel_(std::move(channel)),
        lease_(std::move(lease)),
        board_(std::move(board)),
        tenant_(tenant),
        lc_refused_(std::move(lc_refused)),
        base_(options_.seq_base) {
    const uint64_t now = monotonic_ns();
    channel_.up().claim(RingSide::producer, options_.info.pid, 1, now);
    if (Result<RingWriters> w = RingWriters::over(channel_.up()); w.is_ok()) {
      writers_ = std::move(*w);
      writers_ok_ = true;
    } else {
      go_pass_through("up ring: " + w.status().message());
    }
    channel_.down().claim(RingSide::consumer, options_.info.pid, 1, now);
    heartbeat_ = std::thread([this] { beat_loop(); });
  }
  ~Client() override {
    close();
  }

  uint64_t tenant() const override { return tenant_; }
  TenantClass granted_class() const override { return options_.info.cls; }
  const std::string& lc_refused() const override { return lc_refused_; }
  bool pass_through() const override { return pass_.load(std::memory_order_acquire); }

  LeaseTerms lease() const override {
    if (pass_through()) return LeaseTerms{};
    Result<LeaseTerms> t = lease_.read();
    return t.is_ok() ? *t : LeaseTerms{};
  }
  MemoryQuota memory_quota() const override {
    Result<MemoryQuota> q = lease_.memory_quota();
    return q.is_ok() ? *q : MemoryQuota{};
  }
  void memory_used(uint64_t live_bytes, uint64_t peak_bytes) override {
    if (pass_through()) return;
    std::unique_lock lock(mu_);
    Message m = MemoryUsage{live_bytes, peak_bytes};
    post(lock, m);
  }
  uint64_t lc_active() const override { return pass_through() ? 0 : board_.lc_active(); }
  void raise_lc(uint32_t slot) override {
    if (!pass_through() && board_writable()) board_.raise(slot);
  }
  void lower_lc(uint32_t slot) override {
    // Not in pass-through: the daemon clears the flag of a tenant it removed, and may have handed
    // the slot to another tenant since.
    if (!pass_through() && board_writable()) board_.lower(slot);
  }

  LeaseTerms wait_open(uint64_t timeout_ns, uint64_t recheck_ns) override {
    const uint64_t start = monotonic_ns();
    for (;;) {
      const uint32_t seen = board_.wake_word();
      const LeaseTerms t = lease();
      if (pass_through() || admission(t, board_.lc_active()).open) return t;
      const uint64_t now = monotonic_ns();
      if (now - start >= timeout_ns) return t;
      board_.wait(seen, std::min(recheck_ns, timeout_ns - (now - start)));
      // A daemon that died while the gate was closed must not keep it closed: its liveness every
      // few milliseconds of a long wait.
      if (monotonic_ns() - last_liveness_ns_.load(std::memory_order_relaxed) >= kLivenessCheckNs) {
        last_liveness_ns_.store(monotonic_ns(), std::memory_order_relaxed);
        (void)daemon_alive(monotonic_ns());
      }
    }
  }

  Result<uint64_t> notice(LaunchNotice notice, bool launched) override {
    if (pass_through()) return uint64_t{0};
    if (notice.at_ns == 0) notice.at_ns = monotonic_ns();
    Message m = notice;
    if (launched) {
      // Under a lease: one claim of a slot and a number, no lock, no map (RingWriters). The
      // process's queue, behind its lock, only while the ring is full.
      const int r = try_push(m);
      if (r < 0) return uint64_t{0};
      if (r == 0) {
        std::unique_lock lock(mu_);
        if (!post(lock, m)) return uint64_t{0};
      }
      return base_ + std::get<LaunchNotice>(m).seq;
    }
    std::unique_lock lock(mu_);
    if (!push_up(lock, m)) return uint64_t{0};
    // Booked before the lock goes: the decision for it is read under the same lock.
    const uint64_t seq = std::get<LaunchNotice>(m).seq;
    CONCORD_RETURN_IF_ERROR(ledger_.notice(seq, notice.stream));
    return base_ + seq;
  }

  // The daemon numbers this registration's launches from 1; the caller from seq_base + 1.
  Result<Decision> wait_release(uint64_t global) override {
    if (global <= base_ || pass_through()) return whole_gpu_release(global);
    Result<Decision> d = wait_local(global - base_);
    if (d.is_ok()) d->seq = global;
    return d;
  }

  Status completed(uint64_t global, uint64_t stream, bool ok, uint64_t at_ns) override {
    // A launch of an earlier registration: its daemon is gone, and this one never saw it.
    if (global <= base_ || pass_through()) return Status::ok();
    return completed_local(global - base_, stream, ok, at_ns);
  }

  uint64_t last_seq() const override { return base_ + (writers_ok_ ? writers_.last_number() : 0); }
  std::string pass_through_reason() const override {
    std::lock_guard lock(why_mu_);
    return why_;
  }

 private:
  Result<Decision> wait_local(uint64_t seq) {
    const WaitPolicy& w = options_.wait;
    const uint64_t start = monotonic_ns();
    uint64_t last_check = 0;
    bool held = false;
    for (int i = 0;; ++i) {
      {
        std::unique_lock lock(mu_);
        take_down();
        if (const auto it = released_.find(seq); it != released_.end()) {
          const Decision d = it->second;
          released_.erase(it);
          return d;
        }
        held = held || held_.count(seq) > 0;
      }
      if (pass_through()) return whole_gpu_release(seq);
      if (i < w.spin_iterations) {
        cpu_pause();
        continue;
      }
      const uint64_t now = monotonic_ns();
      // The daemon's liveness (a kill(pid, 0)) every few milliseconds of a long wait.
      if (now - last_check >= kLivenessCheckNs) {
        last_check = now;
        if (!daemon_alive(now)) return whole_gpu_release(seq);
      }
      if (!held && now - start >= w.timeout_ns) {
        go_pass_through(fmt::format("no decision for launch {} within {} ms", seq, w.timeout_ns / 1'000'000));
        return whole_gpu_release(seq);
      }
      sleep_ns(w.sleep_ns);
    }
  }

  Status completed_local(uint64_t seq, uint64_t stream, bool ok, uint64_t at_ns) {
    if (seq > writers_.last_number()) {
      return Status::failed_precondition(fmt::format("completion: field seq: {} was never noticed (last notice {})", seq, writers_.last_number()));
    }
    std::unique_lock lock(mu_);
    // Launches that waited for a decision must have had their release; those made under a lease
    // are not in the ledger.
    CONCORD_RETURN_IF_ERROR(ledger_.completion(seq, stream).status());
    // A dedupe only (the daemon takes a repeated end as nothing new): bounded for programs that
    // make a stream per request.
    if (ended_.size() >= kMaxEndedStreams && ended_.count(stream) == 0) ended_.clear();
    uint64_t& told = ended_[stream];
    if (seq <= told && ok) return Status::ok();  // told before (a marker behind a synchronisation)
    told = std::max(told, seq);
    Message m = CompletionNotice{seq, stream, ok, at_ns != 0 ? at_ns : monotonic_ns()};
    post(lock, m);
    return Status::ok();
  }

 public:
  void flush() override {
    if (pass_through()) return;
    std::unique_lock lock(mu_);
    (void)drain_overflow();
  }

  std::vector<SmSetAnnouncement> take_announcements() override {
    std::unique_lock lock(mu_);
    if (!pass_through()) take_down();
    std::vector<SmSetAnnouncement> out;
    out.swap(announcements_);
    return out;
  }

  Status request_begin() override { return boundary(RequestEdge::begin); }
  Status request_end() override { return boundary(RequestEdge::end); }

  void close() override {
    if (closed_.exchange(true)) return;
    {
      std::lock_guard lock(stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
    if (!pass_.exchange(true)) {
      std::unique_lock lock(mu_);
      (void)drain_overflow();
      Message bye = Bye{ByeReason::exit};
      push_up(lock, bye, /*final=*/true);
      (void)control_.call(Bye{ByeReason::exit}, std::chrono::milliseconds(200));
    }
    channel_.up().close(RingSide::producer);
    channel_.down().close(RingSide::consumer);
  }

 private:
  // What may queue in the process while the up ring is full, at most (then pass-through: a daemon
  // that reads nothing for this long is not serving the tenant).
  static constexpr size_t kMaxOverflow = 65536;
  static constexpr size_t kMaxEndedStreams = 4096;

  bool board_writable() const { return options_.info.cls == TenantClass::latency_critical && board_.valid(); }

  Status boundary(RequestEdge edge) {
    if (pass_through()) return Status::ok();
    std::unique_lock lock(mu_);
    Message m = RequestBoundary{edge, 0, monotonic_ns()};  // its last_seq: the last number claimed before it
    post(lock, m);
    return Status::ok();
  }

  // The number a message takes from its claim: a notice the next (its seq), a boundary the last
  // (the last launch noticed before it, in the ring's order).
  static void number(Message& m, uint64_t n) {
    if (auto* l = std::get_if<LaunchNotice>(&m)) l->seq = n;
    if (auto* b = std::get_if<RequestBoundary>(&m)) b->last_seq = n;
  }

  // Posts one message up without ever waiting (mu_ held): behind what queued before it, into the
  // ring while it has room, else into the process's queue with its number. False when the client
  // turned pass-through instead.
  bool post(std::unique_lock<std::mutex>& lock, Message& m) {
    (void)lock;
    if (pass_through() || !drain_overflow()) return false;
    if (overflow_.empty()) {
      const int r = try_push(m);
      if (r != 0) return r > 0;
    }
    if (overflow_.size() >= kMaxOverflow) {
      go_pass_through(fmt::format("the daemon read nothing while {} messages queued", kMaxOverflow));
      return false;
    }
    number(m, writers_.queue_number(std::holds_alternative<LaunchNotice>(m)));
    overflow_.push_back(m);
    return true;
  }

  // One message into the up ring, from any thread: 1 posted, 0 the ring is full (or a queue
  // waits), -1 pass-through now.
  int try_push(Message& m) {
    Result<std::variant<RingWriters::Claim, RingWriters::Refusal>> c = writers_.claim(std::holds_alternative<LaunchNotice>(m));
    if (!c.is_ok()) {
      go_pass_through("up ring: " + c.status().message());
      return -1;
    }
    const auto* claim = std::get_if<RingWriters::Claim>(&*c);
    if (claim == nullptr) return 0;
    number(m, claim->number);
    return write(m, *claim);
  }

  int write(const Message& m, const RingWriters::Claim& claim) {
    Result<size_t> n = encode_into(m, claim.bytes);
    if (!n.is_ok()) {
      go_pass_through("encode: " + n.status().message());
      return -1;
    }
    if (Status s = writers_.publish(claim, *n); !s.is_ok()) {
      go_pass_through("up ring: " + s.message());
      return -1;
    }
    return 1;
  }

  // Moves what queued into the ring while it has room (mu_ held), numbered as they were queued;
  // false when the ring broke.
  bool drain_overflow() {
    while (!overflow_.empty()) {
      Result<std::optional<RingWriters::Claim>> c = writers_.claim_queued();
      if (!c.is_ok()) {
        go_pass_through("up ring: " + c.status().message());
        return false;
      }
      if (!*c) return true;
      if (write(overflow_.front(), **c) < 0) return false;
      overflow_.pop_front();
    }
    if (writers_.queueing()) writers_.stop_queueing();
    return true;
  }

  // Posts one message up (mu_ held), waiting out a full ring while the daemon lives (a launch that
  // waits for its decision anyway); false when the client turned pass-through instead.
  bool push_up(std::unique_lock<std::mutex>& lock, Message& m, bool final = false) {
    for (int i = 0;; ++i) {
      if (!drain_overflow()) return false;
      if (overflow_.empty()) {
        const int r = try_push(m);
        if (r != 0) return r > 0;
      }
      // Full: the daemon is behind (or gone). Let it catch up without holding the lock.
      if (final || pass_through()) return false;
      if (i >= options_.wait.spin_iterations && !daemon_alive(monotonic_ns())) return false;
      lock.unlock();
      if (i < options_.wait.spin_iterations) cpu_pause();
      else sleep_ns(options_.wait.sleep_ns);
      lock.lock();
      if (pass_through()) return false;
    }
  }

  // Takes every message the daemon posted down (mu_ held).
  void take_down() {
    uint8_t buf[kRingSlotBytes];
    for (;;) {
      Result<size_t> n = channel_.down().try_pop(buf);
      if (!n.is_ok()) {
        go_pass_through("down ring: " + n.status().message());
        return;
      }
      if (*n == 0) return;
      Result<Message> m = decode_on({buf, *n}, Channel::down_ring);
      if (!m.is_ok()) {
        go_pass_through("down ring: " + m.status().message());
        return;
      }
      if (const auto* d = std::get_if<Decision>(&*m)) {
        if (Status s = ledger_.decision(*d); !s.is_ok()) {
          go_pass_through("down ring: " + s.message());
          return;
        }
        if (d->verdict == Verdict::release) {
          held_.erase(d->seq);
          released_[d->seq] = *d;
        } else {
          held_.insert(d->seq);
        }
      } else if (const auto* a = std::get_if<SmSetAnnounce>(&*m)) {
        announcements_.push_back(SmSetAnnouncement{a->handle, sm_ids(a->words)});
      } else if (std::holds_alternative<Bye>(*m)) {
        go_pass_through("the daemon said goodbye");
        return;
      }
      // Heartbeats: the ring's endpoint carries the daemon's liveness; nothing to do.
    }
  }

  bool daemon_alive(uint64_t now) {
    const PeerStatus p = channel_.down().peer(RingSide::producer, now, options_.wait.stale_after_ns);
    if (p.state == PeerState::alive) return true;
    go_pass_through(fmt::format("the daemon (pid {}) is {}{}{}", p.pid, to_string(p.state), p.reason.empty() ? "" : ": ", p.reason));
    return false;
  }

  void go_pass_through(const std::string& why) {
    if (pass_.exchange(true)) return;
    {
      std::lock_guard lock(why_mu_);
      why_ = why;
    }
    // Tell a daemon that may still be alive (a refused message, a decision that did not come)
    // that this tenant is gone: its ring closed and its connection shut, so it drops the tenant and
    // what it had dispatched rather than waiting forever for completions that will not come.
    channel_.up().close(RingSide::producer);
    (void)::shutdown(control_.fd(), SHUT_RDWR);
    // Launches waiting for a gate go on (they now see an open lease).
    if (board_.valid()) board_.wake_waiters();
  }

  void beat_loop() {
    std::unique_lock lock(stop_mu_);
    while (!stopping_) {
      const uint64_t now = monotonic_ns();
      channel_.up().beat(RingSide::producer, now);
      channel_.down().beat(RingSide::consumer, now);
      if (!pass_through()) {
        (void)daemon_alive(now);
        // The control socket: the daemon never writes to it unasked, so anything readable is its
        // end (EOF) or a stray byte; either way it is gone or broken.
        pollfd p{control_.fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          uint8_t b = 0;
          const ssize_t n = ::recv(control_.fd(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) go_pass_through("the daemon closed the control socket");
        }
        flush();
      }
      stop_cv_.wait_for(lock, options_.heartbeat_period, [this] { return stopping_; });
    }
  }

  TenantClientOptions options_;
  ControlClient control_;
  TenantChannel channel_;
  LeaseReader lease_;
  LcBoard board_;
  const uint64_t tenant_;
  const std::string lc_refused_;
  const uint64_t base_;  // seq_base: what the caller's numbers are ahead of the daemon's

  RingWriters writers_;  // the up ring's producer end, any thread's
  bool writers_ok_ = false;  // made (else the client went pass-through at once)
  std::mutex mu_;  // the down ring's end, the ledger, what came down and what queued up
  LaunchLedger ledger_{kMaxOutstandingLaunches};
  std::map<uint64_t, uint64_t> ended_;  // per stream: the latest launch whose end was posted
  std::map<uint64_t, Decision> released_;  // releases not yet waited for
  std::set<uint64_t> held_;
  std::vector<SmSetAnnouncement> announcements_;
  std::deque<Message> overflow_;

  std::atomic<bool> pass_{false};
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> last_liveness_ns_{0};
  mutable std::mutex why_mu_;
  std::string why_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace

Result<std::unique_ptr<TenantClient>> connect_once(const TenantClientOptions& options) {
  TenantClientOptions o = options;
  if (o.info.pid == 0) o.info.pid = static_cast<int32_t>(::getpid());
  Result<ControlClient> control = ControlClient::connect(o.socket_path, o.connect_timeout);
  if (!control.is_ok()) return control.status();
  std::vector<int> fds;
  Result<Message> reply = control->call(o.info, o.connect_timeout, fds);
  // The reply carries four descriptors: up ring, down ring, lease page, GPU's board. Any beyond
  // them are not ours to keep, and none is kept when the reply is not a registration.
  constexpr size_t kFds = 4;
  const bool registered = reply.is_ok() && std::holds_alternative<Registered>(*reply) && fds.size() >= kFds;
  for (size_t i = registered ? kFds : 0; i < fds.size(); ++i) ::close(fds[i]);
  if (!reply.is_ok()) return reply.status();
  if (const auto* e = std::get_if<ErrorReply>(&*reply)) {
    return Status(e->code, "the daemon refused the registration: " + e->message);
  }
  const auto* r = std::get_if<Registered>(&*reply);
  if (r == nullptr) return Status::parse_error(fmt::format("register: the daemon answered with a {} message", to_string(type_of(*reply))));
  if (!registered) return Status::parse_error(fmt::format("register: {} descriptors came with the reply, not {}", fds.size(), kFds));
  // The class the daemon admitted: an LC registration it refused runs as BE, when it asked to.
  if (r->cls != o.info.cls) {
    const bool as_be = o.info.cls == TenantClass::latency_critical && o.info.on_lc_refused == LcRefusal::best_effort;
    if (!as_be) {
      for (size_t i = 0; i < kFds; ++i) ::close(fds[i]);
      return Status::parse_error(fmt::format("register: the daemon admitted a {} tenant, asked for a {} one",
                                             r->cls == TenantClass::latency_critical ? "LC" : "BE",
                                             o.info.cls == TenantClass::latency_critical ? "LC" : "BE"));
    }
    o.info.cls = TenantClass::best_effort;
    o.info.latency_target_ns = 0;
  }
  // Each of these takes its descriptor, also when it fails.
  Result<TenantChannel> channel = TenantChannel::from_fds(fds[0], fds[1], r->channel);
  Result<LeaseReader> lease = LeaseReader::from_fd(fds[2], r->channel + ".lease");
  Result<LcBoard> board = LcBoard::from_fd(fds[3], r->channel + ".board", o.info.cls == TenantClass::latency_critical);
  if (!channel.is_ok()) return channel.status();
  if (!lease.is_ok()) return lease.status();
  if (!board.is_ok()) return board.status();
  // The page holds the policy's initial terms, made before the daemon's lane saw the other
  // tenants (a BE tenant's yields to no LC yet). A BE tenant under a lease waits, a bounded while,
  // for the lane's first decision, which counts them, before its first launch.
  if (o.info.cls == TenantClass::best_effort && o.first_lease_timeout.count() > 0) {
    const Result<LeaseTerms> terms = lease->read();
    if (terms.is_ok() && terms->gate != LeaseGate::per_launch) {
      const auto deadline = std::chrono::steady_clock::now() + o.first_lease_timeout;
      while (lease->sequence() == LeaseReader::kCreatedSequence && std::chrono::steady_clock::now() < deadline) sleep_ns(50'000);
    }
  }
  if (channel->up().max_message() + sizeof(uint32_t) < kRingSlotBytes ||
      channel->down().max_message() + sizeof(uint32_t) < kRingSlotBytes) {
    return Status::failed_precondition(fmt::format("rings {}: slots under {} bytes", r->channel, kRingSlotBytes));
  }
  return std::unique_ptr<TenantClient>(std::make_unique<Client>(std::move(o), std::move(*control), std::move(*channel),
                                                                std::move(*lease), std::move(*board), r->tenant, r->lc_refused));
}

}  // namespace concord::ipc
