#include "ipc/lease_page.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <new>

#include <fmt/format.h>

namespace concord::ipc {
namespace detail {

struct LeaseLayout {
  uint32_t magic;
  uint32_t version;
  alignas(64) std::atomic<uint32_t> seq;
  std::atomic<uint32_t> gate;
  std::atomic<uint32_t> priority;
  std::atomic<uint32_t> max_in_flight;
  std::atomic<uint32_t> on_lc;
  std::atomic<uint32_t> be_in_flight_cap;
  std::atomic<uint32_t> lc_slot;
  std::atomic<uint64_t> yield_mask;
  std::atomic<uint32_t> be_sm_cap;
  std::atomic<uint32_t> be_blocks_per_sm_cap;
  // The tenant's memory quota: a section of its own, outside the seqlock, written once when the
  // page is made (before its descriptor is handed out) and never after, so publishes of terms do
  // not carry it.
  alignas(64) std::atomic<uint64_t> memory_limit;
  std::atomic<uint64_t> memory_reserved;
};

struct BoardLayout {
  uint32_t magic;
  uint32_t version;
  alignas(64) std::atomic<uint64_t> lc_active;
  alignas(64) std::atomic<uint32_t> wake;
};

static_assert(sizeof(LeaseLayout) <= kLeasePageBytes && sizeof(BoardLayout) <= kBoardBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

}  // namespace detail

namespace {

constexpr uint32_t kLeaseMagic = 0x4553454c;  // "LESE"
constexpr uint32_t kBoardMagic = 0x44524f42;  // "BORD"
constexpr uint32_t kLayoutVersion = 3;  // 2: room terms (be_sm_cap, be_blocks_per_sm_cap); 3: the memory quota

long futex(const void* addr, int op, uint32_t val, const timespec* timeout) {
  return ::syscall(SYS_futex, addr, op, val, timeout, nullptr, 0);
}

// A publish is a few stores long: a reader spins past one. A sequence still odd (or moving) after
// kSpinTries tries is a daemon thread preempted in the middle of a publish (a loaded node: for as
// long as a scheduler's time slice) or a daemon killed there: the reader yields its CPU, and only
// a publish unfinished for kUnfinishedPublishNs is taken for a dead daemon's.
constexpr int kSpinTries = 1000;
constexpr uint64_t kUnfinishedPublishNs = 100'000'000;

uint64_t clock_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

Status check_terms(const LeaseTerms& t) {
  auto bad = [](const char* field, const std::string& why) { return Status::invalid_argument(fmt::format("lease: field {}: {}", field, why)); };
  if (static_cast<uint8_t>(t.gate) > 2) return bad("gate", fmt::format("{} is not open, closed or per-launch", static_cast<int>(t.gate)));
  if (static_cast<uint8_t>(t.priority) > 1) return bad("priority", fmt::format("{} is not normal or high", static_cast<int>(t.priority)));
  if (static_cast<uint8_t>(t.on_lc) > 2) return bad("on_lc", fmt::format("{} is not run, close or cap", static_cast<int>(t.on_lc)));
  if (t.on_lc == LcYield::cap && t.be_in_flight_cap == 0) return bad("be_in_flight_cap", "is 0 with on_lc cap (at least 1)");
  if (t.be_sm_cap > kMaxRoomSms) return bad("be_sm_cap", fmt::format("{} is over {}", t.be_sm_cap, kMaxRoomSms));
  if (t.be_blocks_per_sm_cap > kMaxRoomBlocksPerSm) {
    return bad("be_blocks_per_sm_cap", fmt::format("{} is over {}", t.be_blocks_per_sm_cap, kMaxRoomBlocksPerSm));
  }
  if (t.on_lc == LcYield::close && (t.be_sm_cap != 0 || t.be_blocks_per_sm_cap != 0)) {
    return bad("be_sm_cap", "room terms with on_lc close (a closed gate launches nothing to confine)");
  }
  if (t.lc_slot != kNoLcSlot && t.lc_slot >= kLcSlots) return bad("lc_slot", fmt::format("{} is outside 0..{}", t.lc_slot, kLcSlots - 1));
  return Status::ok();
}

Admission admission(const LeaseTerms& terms, uint64_t lc_active) {
  Admission a;
  if (terms.gate != LeaseGate::open) {
    a.open = false;
    return a;
  }
  a.cap = terms.max_in_flight;
  a.lc_yield = (lc_active & terms.yield_mask) != 0;
  if (!a.lc_yield) return a;
  if (terms.on_lc == LcYield::close) {
    a.open = false;
    return a;
  }
  a.sms = terms.be_sm_cap;
  a.blocks_per_sm = terms.be_blocks_per_sm_cap;
  if (terms.on_lc == LcYield::run) return a;
  a.cap = a.cap == 0 ? terms.be_in_flight_cap : std::min(a.cap, terms.be_in_flight_cap);
  return a;
}

TenantLease lease_summary(const LeaseTerms& terms, uint64_t lc_active) {
  TenantLease s;
  if (terms.gate == LeaseGate::per_launch) {
    s.yield = LeaseYield::per_launch;
    return s;
  }
  if (terms.yield_mask == 0) return s;
  s.yielding = (lc_active & terms.yield_mask) != 0;
  switch (terms.on_lc) {
    case LcYield::run: s.yield = terms.be_sm_cap != 0 || terms.be_blocks_per_sm_cap != 0 ? LeaseYield::room : LeaseYield::none; break;
    case LcYield::close: s.yield = LeaseYield::close; break;
    case LcYield::cap: s.yield = LeaseYield::cap; break;
  }
  if (s.yield == LeaseYield::cap) s.in_flight_cap = terms.be_in_flight_cap;
  s.room_sms = terms.be_sm_cap;
  s.room_blocks_per_sm = terms.be_blocks_per_sm_cap;
  return s;
}

Status check_quota(const MemoryQuota& q) {
  if (q.limited() && q.reserved_bytes > q.limit_bytes) {
    return Status::invalid_argument(fmt::format("lease: field memory_reserved: {} is over the limit {}", q.reserved_bytes, q.limit_bytes));
  }
  if (!q.limited() && q.reserved_bytes != 0) return Status::invalid_argument("lease: field memory_reserved: set without a limit");
  return Status::ok();
}

Result<LeasePage> LeasePage::create(const std::string& label, const LeaseTerms& initial, const MemoryQuota& memory) {
  CONCORD_RETURN_IF_ERROR(check_terms(initial));
  CONCORD_RETURN_IF_ERROR(check_quota(memory));
  // Sealed against writes by anyone but this mapping: the tenant's page is the daemon's alone.
  Result<SharedMemory> m = SharedMemory::create_sealed(label, kLeasePageBytes, /*peers_write=*/false);
  if (!m.is_ok()) return m.status();
  LeasePage p;
  p.memory_ = std::move(*m);
  p.page_ = new (p.memory_.data()) detail::LeaseLayout{};
  p.page_->magic = kLeaseMagic;
  p.page_->version = kLayoutVersion;
  p.page_->seq.store(LeaseReader::kCreatedSequence - 2, std::memory_order_relaxed);
  p.page_->memory_limit.store(memory.limit_bytes, std::memory_order_relaxed);
  p.page_->memory_reserved.store(memory.reserved_bytes, std::memory_order_relaxed);
  CONCORD_RETURN_IF_ERROR(p.publish(initial));
  return p;
}

Status LeasePage::publish(const LeaseTerms& t) {
  CONCORD_RETURN_IF_ERROR(check_terms(t));
  if (page_ == nullptr) return Status::failed_precondition("lease page: not created");
  const uint32_t s = page_->seq.load(std::memory_order_relaxed);
  page_->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  page_->gate.store(static_cast<uint32_t>(t.gate), std::memory_order_relaxed);
  page_->priority.store(static_cast<uint32_t>(t.priority), std::memory_order_relaxed);
  page_->max_in_flight.store(t.max_in_flight, std::memory_order_relaxed);
  page_->on_lc.store(static_cast<uint32_t>(t.on_lc), std::memory_order_relaxed);
  page_->be_in_flight_cap.store(t.be_in_flight_cap, std::memory_order_relaxed);
  page_->lc_slot.store(t.lc_slot, std::memory_order_relaxed);
  page_->yield_mask.store(t.yield_mask, std::memory_order_relaxed);
  page_->be_sm_cap.store(t.be_sm_cap, std::memory_order_relaxed);
  page_->be_blocks_per_sm_cap.store(t.be_blocks_per_sm_cap, std::memory_order_relaxed);
  page_->seq.store(s + 2, std::memory_order_release);
  terms_ = t;
  return Status::ok();
}

Result<int> LeasePage::reader_fd() const { return memory_.reopen_read_only(); }

Result<LeaseReader> LeaseReader::from_fd(int fd, const std::string& label) {
  Result<SharedMemory> m = SharedMemory::from_fd_read_only(fd, label);
  if (!m.is_ok()) return m.status();
  if (m->size() < kLeasePageBytes) {
    return Status::failed_precondition(fmt::format("lease page {}: {} bytes, under {}", label, m->size(), kLeasePageBytes));
  }
  const auto* page = reinterpret_cast<const detail::LeaseLayout*>(m->data());
  if (page->magic != kLeaseMagic || page->version != kLayoutVersion) {
    return Status::failed_precondition(fmt::format("lease page {}: not a version {} lease page", label, kLayoutVersion));
  }
  LeaseReader r;
  r.memory_ = std::move(*m);
  r.page_ = page;
  return r;
}

Result<MemoryQuota> LeaseReader::memory_quota() const {
  if (page_ == nullptr) return Status::failed_precondition("lease page: not mapped");
  const MemoryQuota q{page_->memory_limit.load(std::memory_order_acquire), page_->memory_reserved.load(std::memory_order_acquire)};
  if (Status st = check_quota(q); !st) return Status::parse_error(st.message());
  return q;
}

uint32_t LeaseReader::sequence() const { return page_ ? page_->seq.load(std::memory_order_acquire) : 0; }

Result<LeaseTerms> LeaseReader::read() const {
  if (page_ == nullptr) return Status::failed_precondition("lease page: not mapped");
  LeaseTerms t;
  uint32_t gate = 0, priority = 0, on_lc = 0;
  uint64_t give_up_at = 0;
  for (int tries = 0;; ++tries) {
    if (tries >= kSpinTries) {
      const uint64_t now = clock_ns();
      if (give_up_at == 0) {
        give_up_at = now + kUnfinishedPublishNs;
      } else if (now > give_up_at) {
        return Status::deadline_exceeded("lease page: the daemon left a publish unfinished");
      }
      ::sched_yield();
    }
    const uint32_t s1 = page_->seq.load(std::memory_order_acquire);
    if (s1 & 1u) continue;
    gate = page_->gate.load(std::memory_order_relaxed);
    priority = page_->priority.load(std::memory_order_relaxed);
    t.max_in_flight = page_->max_in_flight.load(std::memory_order_relaxed);
    on_lc = page_->on_lc.load(std::memory_order_relaxed);
    t.be_in_flight_cap = page_->be_in_flight_cap.load(std::memory_order_relaxed);
    t.lc_slot = page_->lc_slot.load(std::memory_order_relaxed);
    t.yield_mask = page_->yield_mask.load(std::memory_order_relaxed);
    t.be_sm_cap = page_->be_sm_cap.load(std::memory_order_relaxed);
    t.be_blocks_per_sm_cap = page_->be_blocks_per_sm_cap.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (page_->seq.load(std::memory_order_relaxed) == s1) break;
  }
  if (gate > 2 || priority > 1 || on_lc > 2) {
    return Status::parse_error(fmt::format("lease page: gate {}, priority {}, on_lc {}: out of range", gate, priority, on_lc));
  }
  t.gate = static_cast<LeaseGate>(gate);
  t.priority = static_cast<Priority>(priority);
  t.on_lc = static_cast<LcYield>(on_lc);
  CONCORD_RETURN_IF_ERROR(check_terms(t));
  return t;
}

Result<LcBoard> LcBoard::create(const std::string& label) {
  Result<SharedMemory> m = SharedMemory::create_sealed(label, kBoardBytes);
  if (!m.is_ok()) return m.status();
  LcBoard b;
  b.memory_ = std::move(*m);
  b.board_ = new (b.memory_.data()) detail::BoardLayout{};
  b.board_->magic = kBoardMagic;
  b.board_->version = kLayoutVersion;
  return b;
}

Result<LcBoard> LcBoard::from_fd(int fd, const std::string& label, bool writable) {
  Result<SharedMemory> m = writable ? SharedMemory::from_fd(fd, label) : SharedMemory::from_fd_read_only(fd, label);
  if (!m.is_ok()) return m.status();
  // Only the size is checked: an LC tenant may have scribbled over the header, which must not
  // keep others from attaching (nothing but the two words below is read).
  if (m->size() < kBoardBytes) return Status::failed_precondition(fmt::format("board {}: {} bytes, under {}", label, m->size(), kBoardBytes));
  LcBoard b;
  b.memory_ = std::move(*m);
  b.board_ = reinterpret_cast<detail::BoardLayout*>(b.memory_.data());
  return b;
}

uint64_t LcBoard::lc_active() const { return board_->lc_active.load(std::memory_order_acquire); }

void LcBoard::raise(uint32_t slot) {
  if (slot >= kLcSlots) return;
  board_->lc_active.fetch_or(uint64_t{1} << slot, std::memory_order_acq_rel);
}

void LcBoard::lower(uint32_t slot) {
  if (slot >= kLcSlots) return;
  board_->lc_active.fetch_and(~(uint64_t{1} << slot), std::memory_order_acq_rel);
  wake_all();
}

bool LcBoard::clear(uint64_t mask) {
  const uint64_t before = board_->lc_active.fetch_and(~mask, std::memory_order_acq_rel);
  if ((before & mask) == 0) return false;
  wake_all();
  return true;
}

void LcBoard::wake_all() {
  board_->wake.fetch_add(1, std::memory_order_acq_rel);
  (void)futex(&board_->wake, FUTEX_WAKE, INT_MAX, nullptr);
}

void LcBoard::wake_waiters() const { (void)futex(&board_->wake, FUTEX_WAKE, INT_MAX, nullptr); }

uint32_t LcBoard::wake_word() const { return board_->wake.load(std::memory_order_acquire); }

void LcBoard::wait(uint32_t seen, uint64_t timeout_ns) const {
  const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
  (void)futex(&board_->wake, FUTEX_WAIT, seen, &ts);
}

Result<int> LcBoard::tenant_fd(bool writable) const { return writable ? memory_.duplicate() : memory_.reopen_read_only(); }

}  // namespace concord::ipc
