// The shared memory of leases (include/concord/lease.h): a page per tenant that the daemon writes
// and the tenant only reads, and one board per GPU on which LC tenants raise and lower their
// work-in-flight flags.
//
// Both are sealed anonymous objects (memfd, as the rings), passed over the control socket with the
// registration's reply. A tenant gets its lease page read-only (a descriptor reopened O_RDONLY: it
// can neither write nor resize it); it gets the board read-only too unless it is latency-critical.
// Nothing a tenant writes is ever trusted by the daemon: it reads only the board's flag word, whose
// every value is valid, and clears flags whose slot no live LC tenant holds.
//
// Lease page: a seqlock (the daemon makes the sequence odd, writes the terms, makes it even; a
// reader retries until it reads one even sequence on both sides of the terms) and the terms; and,
// outside the seqlock, the tenant's memory quota (concord/memory_quota.h), written once when the
// page is made: the terms' publishes never carry it, and the tenant cannot raise it.
// Board: `lc_active` (bit s: the LC tenant in slot s has work in flight) and `wake`, a futex word
// bumped and woken whenever a gate may have opened (an LC flag lowered, a lease published). A
// waiting launch reads `wake`, checks its gate, and sleeps on `wake` only if the gate is still
// closed, with a timeout, so no lost or withheld wake-up blocks it for longer than that.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "concord/lease_terms.h"
#include "concord/memory_quota.h"
#include "concord/status.h"
#include "ipc/protocol.h"
#include "ipc/shared_memory.h"

namespace concord::ipc {

inline constexpr size_t kLeasePageBytes = 4096;
inline constexpr size_t kBoardBytes = 4096;
// LC tenants with a flag on the board at once (one 64-bit word: a launch reads it with one load).
inline constexpr uint32_t kLcSlots = 64;
inline constexpr uint32_t kNoLcSlot = 0xffffffffu;

// The page's terms are in the lease vocabulary (concord/lease_terms.h).
using concord::LcYield;
using concord::LeaseGate;

// A lease as the page holds it: concord::Lease's terms under the same names, with the board slots
// of the LC tenants it yields to (and its own) in place of their tenant ids.
struct LeaseTerms {
  LeaseGate gate = LeaseGate::open;
  Priority priority = Priority::normal;
  uint32_t max_in_flight = 0;   // launches released and not known ended (0: no limit)
  uint64_t yield_mask = 0;      // board slots whose flag applies `on_lc`
  LcYield on_lc = LcYield::run;
  uint32_t be_in_flight_cap = 0;      // with on_lc == cap: >= 1
  uint32_t be_sm_cap = 0;             // room while yielding (on_lc run or cap): SMs at most (0: all)
  uint32_t be_blocks_per_sm_cap = 0;  // and resident blocks per SM at most (0: no cap)
  uint32_t lc_slot = kNoLcSlot;       // an LC tenant's slot on the board (kNoLcSlot: raises no flag)
  bool operator==(const LeaseTerms&) const = default;
};
// An error naming the field that is out of range (the page's reader and writer both check).
Status check_terms(const LeaseTerms& terms);
// Likewise for a quota: a reservation never over the limit, none without one.
Status check_quota(const MemoryQuota& quota);

// What a launch may do now under `terms` with the board's flags `lc_active`.
struct Admission {
  bool open = true;        // false: wait for the gate (closed, or closed while LC work is in flight)
  uint32_t cap = 0;        // with open: launches in flight at most (0: no limit)
  bool lc_yield = false;   // an LC flag the lease yields to is up
  uint32_t sms = 0;            // with open: SMs a kernel launch may use (0: all)
  uint32_t blocks_per_sm = 0;  // with open: its blocks resident per SM at most (0: no cap)
};
inline constexpr uint32_t kMaxRoomSms = limits::kMaxSms;
inline constexpr uint32_t kMaxRoomBlocksPerSm = limits::kMaxRoomBlocksPerSm;
Admission admission(const LeaseTerms& terms, uint64_t lc_active);
// What `terms` do while LC work they yield to is in flight, and whether it is now (`lc_active`):
// what the daemon's tenant list (and `concord top`) shows of a lease.
TenantLease lease_summary(const LeaseTerms& terms, uint64_t lc_active);

namespace detail {
struct LeaseLayout;
struct BoardLayout;
}  // namespace detail

// The daemon's end of a tenant's lease page.
class LeasePage {
 public:
  // A page holding `initial` terms and the tenant's memory quota (none by default).
  static Result<LeasePage> create(const std::string& label, const LeaseTerms& initial, const MemoryQuota& memory = {});
  LeasePage() = default;
  // Writes new terms (invalid ones are refused and change nothing); the quota stays.
  Status publish(const LeaseTerms& terms);
  const LeaseTerms& terms() const { return terms_; }
  // A read-only descriptor of the page for the tenant (the caller owns it).
  Result<int> reader_fd() const;
  const SharedMemory& memory() const { return memory_; }

 private:
  SharedMemory memory_;
  detail::LeaseLayout* page_ = nullptr;
  LeaseTerms terms_;
};

// The tenant's end of its lease page.
class LeaseReader {
 public:
  // Maps the page the descriptor names (taking the descriptor), read-only.
  static Result<LeaseReader> from_fd(int fd, const std::string& label);
  LeaseReader() = default;
  bool valid() const { return page_ != nullptr; }
  // The terms now; terms out of range (which only a daemon bug could write) are an error naming
  // the field.
  Result<LeaseTerms> read() const;
  // The memory quota the daemon wrote when it made the page (it never changes).
  Result<MemoryQuota> memory_quota() const;
  // Changes whenever the daemon publishes (even values only once a publish is complete); a page
  // holding only the terms it was created with reads kCreatedSequence.
  uint32_t sequence() const;
  static constexpr uint32_t kCreatedSequence = 2;

 private:
  SharedMemory memory_;
  const detail::LeaseLayout* page_ = nullptr;
};

// One GPU's board of LC work in flight (its lane's; the daemon has one per GPU it manages), either end.
class LcBoard {
 public:
  // The daemon's: a fresh board.
  static Result<LcBoard> create(const std::string& label);
  // A tenant's: the board the descriptor names (taking it); `writable` for an LC tenant.
  static Result<LcBoard> from_fd(int fd, const std::string& label, bool writable);
  LcBoard() = default;
  bool valid() const { return board_ != nullptr; }

  uint64_t lc_active() const;
  // An LC tenant's flag (slot < kLcSlots), raised and lowered by the tenant itself; lower() also
  // bumps `wake` and wakes every waiter.
  void raise(uint32_t slot);
  void lower(uint32_t slot);
  // The daemon: clears flags of slots in `mask` (slots no live LC tenant holds) and wakes the
  // waiters if any was up; whether any was.
  bool clear(uint64_t mask);
  // Bumps `wake` and wakes every waiter (a lease was published).
  void wake_all();
  // Wakes every waiter without bumping `wake` (a read-only end: its own waiters re-check).
  void wake_waiters() const;
  uint32_t wake_word() const;
  // Sleeps until `wake` differs from `seen`, a wake-up, or `timeout_ns`.
  void wait(uint32_t seen, uint64_t timeout_ns) const;

  // Descriptors for a tenant (the caller owns them): read-only, or read-write for an LC tenant.
  Result<int> tenant_fd(bool writable) const;
  const SharedMemory& memory() const { return memory_; }

 private:
  SharedMemory memory_;
  detail::BoardLayout* board_ = nullptr;
};

}  // namespace concord::ipc
