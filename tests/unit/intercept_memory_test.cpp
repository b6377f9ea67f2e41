// The interception library's memory book (src/intercept/memory_book.h) and its settings: sizes as
// people write them, CONCORD_MEMORY_RESERVE / CONCORD_MEMORY_LIMIT, reservations against a quota
// (threads racing for the last bytes), frees, VMM handles counted once and freed as the driver
// frees them, the tenant's view of cuMemGetInfo and the refusal line's rate.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "concord/memory_quota.h"
#include "intercept/config.h"
#include "intercept/memory_book.h"
#include "intercept_env.h"

namespace concord::intercept {
namespace {

constexpr uint64_t MiB = 1 << 20;

TEST(MemorySizes, AreBytesOrNumbersWithABinaryUnit) {
  EXPECT_EQ(*parse_bytes("4096"), 4096u);
  EXPECT_EQ(*parse_bytes("512K"), 512u << 10);
  EXPECT_EQ(*parse_bytes("512M"), 512u << 20);
  EXPECT_EQ(*parse_bytes("8G"), 8ull << 30);
  EXPECT_EQ(*parse_bytes("8GiB"), 8ull << 30);
  EXPECT_EQ(*parse_bytes("8gb"), 8ull << 30);
  EXPECT_EQ(*parse_bytes("1.5G"), 3ull << 29);
  EXPECT_EQ(*parse_bytes("2T"), 2ull << 40);
  EXPECT_EQ(*parse_bytes("100B"), 100u);
  for (const char* bad : {"", "abc", "-1", "-1G", "1.5", "8X", "8GX", "1e9", "..", "1.2.3G", "99999999999T", "G"}) {
    Result<uint64_t> r = parse_bytes(bad);
    EXPECT_FALSE(r.is_ok()) << "'" << bad << "' parsed as " << (r.is_ok() ? *r : 0);
  }
  EXPECT_NE(parse_bytes("abc").status().message().find("not a size"), std::string::npos);
  EXPECT_NE(parse_bytes("1.5").status().message().find("whole number"), std::string::npos);
  EXPECT_EQ(format_bytes(0), "0");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(32 * MiB), "32.0 MiB");
}

TEST(MemorySettings, AnLcReservesABeLimitsItselfEachNamedWhenBad) {
  auto lc = parse({{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "20"}, {"CONCORD_MEMORY_RESERVE", "8G"}});
  ASSERT_TRUE(lc.is_ok()) << lc.status().to_string();
  EXPECT_EQ(lc->tenant.memory_bytes, 8ull << 30);
  auto be = parse({{"CONCORD_MEMORY_LIMIT", "512M"}});
  ASSERT_TRUE(be.is_ok()) << be.status().to_string();
  EXPECT_EQ(be->tenant.memory_bytes, 512 * MiB);
  EXPECT_EQ(parse({})->tenant.memory_bytes, 0u) << "none asked";
  const std::map<std::string, std::string> lc_env = {{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "20"}};
  const auto refusal = [&](std::map<std::string, std::string> env, bool as_lc) {
    if (as_lc) env.insert(lc_env.begin(), lc_env.end());
    Result<InterceptConfig> c = parse(env);
    EXPECT_FALSE(c.is_ok());
    return c.is_ok() ? std::string() : c.status().message();
  };
  EXPECT_EQ(refusal({{"CONCORD_MEMORY_RESERVE", "abc"}}, true).rfind("CONCORD_MEMORY_RESERVE='abc': is not a size", 0), 0u);
  EXPECT_EQ(refusal({{"CONCORD_MEMORY_RESERVE", "-1"}}, true).rfind("CONCORD_MEMORY_RESERVE='-1': ", 0), 0u);
  EXPECT_NE(refusal({{"CONCORD_MEMORY_RESERVE", "0"}}, true).find("is 0"), std::string::npos);
  EXPECT_NE(refusal({{"CONCORD_MEMORY_RESERVE", "2P"}}, true).find("unknown unit"), std::string::npos);
  EXPECT_NE(refusal({{"CONCORD_MEMORY_RESERVE", "2048T"}}, true).find("is over 1.0 PiB"), std::string::npos);
  EXPECT_NE(refusal({{"CONCORD_MEMORY_RESERVE", "8G"}}, false).find("is for lc tenants only"), std::string::npos);
  EXPECT_NE(refusal({{"CONCORD_MEMORY_LIMIT", "8G"}}, true).find("is for be tenants only"), std::string::npos);
  EXPECT_EQ(refusal({{"CONCORD_MEMORY_LIMIT", "1.5"}}, false).rfind("CONCORD_MEMORY_LIMIT='1.5': is not a whole number of bytes", 0), 0u);
}

TEST(MemoryBook, WithoutAQuotaItCountsAndRefusesNothing) {
  MemoryBook book;
  EXPECT_FALSE(book.quota().limited());
  ASSERT_TRUE(book.reserve(uint64_t{1} << 49));
  book.allocated(0x1000, uint64_t{1} << 49);
  EXPECT_EQ(book.live(), uint64_t{1} << 49);
  const auto [free_bytes, total] = book.info(7, 9);
  EXPECT_EQ(free_bytes, 7u) << "the driver's own answer";
  EXPECT_EQ(total, 9u);
  book.freed(book.take(0x1000), true);
  EXPECT_EQ(book.live(), 0u);
  EXPECT_EQ(book.peak(), uint64_t{1} << 49);
}

TEST(MemoryBook, AllocationsAreHeldToTheQuotaAndFreesGiveItBack) {
  MemoryBook book;
  book.set_quota(MemoryQuota{10 * MiB, 0});
  ASSERT_TRUE(book.reserve(6 * MiB));
  book.allocated(0xa000, 6 * MiB);
  EXPECT_FALSE(book.reserve(5 * MiB)) << "6 + 5 > 10";
  EXPECT_EQ(book.live(), 6 * MiB) << "a refusal reserves nothing";
  ASSERT_TRUE(book.reserve(4 * MiB)) << "6 + 4 = 10: the last byte fits";
  book.cancel(4 * MiB);  // the real call failed
  EXPECT_EQ(book.live(), 6 * MiB);
  EXPECT_EQ(book.peak(), 10 * MiB) << "the reservation in flight counted at its peak";
  // The view: the quota as the total, what is left of it as free, never more than the device has.
  EXPECT_EQ(book.info(80ull << 30, 80ull << 30), std::make_pair(4 * MiB, 10 * MiB));
  EXPECT_EQ(book.info(1 * MiB, 80ull << 30), std::make_pair(1 * MiB, 10 * MiB));
  // A free takes the entry out first and gives the bytes back once the real call succeeded.
  const MemoryBook::Taken t = book.take(0xa000);
  EXPECT_EQ(t.bytes, 6 * MiB);
  EXPECT_EQ(book.live(), 6 * MiB) << "still counted while the real free runs";
  book.freed(t, false);  // it failed: back in the book
  EXPECT_EQ(book.take(0xa000).bytes, 6 * MiB);
  book.freed(MemoryBook::Taken{0xa000, 6 * MiB}, true);
  EXPECT_EQ(book.live(), 0u);
  // A free of memory the book never counted changes nothing, and neither does a second free.
  book.freed(book.take(0xa000), true);
  book.freed(book.take(0xdead), true);
  EXPECT_EQ(book.live(), 0u);
  EXPECT_EQ(book.info(80ull << 30, 80ull << 30), std::make_pair(10 * MiB, 10 * MiB));
}

TEST(MemoryBook, AnAddressGivenOutAgainReplacesTheStaleEntry) {
  MemoryBook book;
  book.set_quota(MemoryQuota{10 * MiB, 0});
  ASSERT_TRUE(book.reserve(4 * MiB));
  book.allocated(0xb000, 4 * MiB);
  // Freed by a path the library does not see; the driver hands the address out again.
  ASSERT_TRUE(book.reserve(2 * MiB));
  book.allocated(0xb000, 2 * MiB);
  EXPECT_EQ(book.live(), 2 * MiB);
}

TEST(MemoryBook, VmmMemoryCountsOnceAndIsFreedWhenNothingHoldsIt) {
  MemoryBook book;
  book.set_quota(MemoryQuota{64 * MiB, 64 * MiB});
  ASSERT_TRUE(book.reserve(8 * MiB));
  book.created(7, 8 * MiB);
  book.mapped(0x100000, 7);
  book.mapped(0x900000, 7);  // mapped twice: still 8 MiB
  EXPECT_EQ(book.live(), 8 * MiB);
  book.retained(7);
  EXPECT_EQ(book.released(7), 0u) << "the retained reference";
  EXPECT_EQ(book.released(7), 0u) << "released while mapped: the driver frees it at the last unmap";
  EXPECT_EQ(book.live(), 8 * MiB);
  EXPECT_EQ(book.unmapped(0x100000, 2 * MiB), 0u);
  EXPECT_EQ(book.unmapped(0x900000, 8 * MiB), 8 * MiB);
  EXPECT_EQ(book.live(), 0u);
  // Unmapped first, released last (PyTorch's expandable segments).
  ASSERT_TRUE(book.reserve(4 * MiB));
  book.created(9, 4 * MiB);
  book.mapped(0x200000, 9);
  EXPECT_EQ(book.unmapped(0x200000, 4 * MiB), 0u);
  EXPECT_EQ(book.released(9), 4 * MiB);
  EXPECT_EQ(book.live(), 0u);
  // Handles and mappings the book does not count (imported, from before it started) change nothing.
  book.mapped(0x300000, 42);
  EXPECT_EQ(book.unmapped(0x300000, MiB), 0u);
  EXPECT_EQ(book.released(42), 0u);
  EXPECT_EQ(book.live(), 0u);
  // A handle value handed out again while the book still held it: the old allocation is gone.
  ASSERT_TRUE(book.reserve(2 * MiB));
  book.created(11, 2 * MiB);
  ASSERT_TRUE(book.reserve(4 * MiB));
  book.created(11, 4 * MiB);
  EXPECT_EQ(book.live(), 4 * MiB);
}

// Threads racing for the last bytes: exactly as many reservations as fit succeed, and the count
// is never over the quota nor below zero, whatever the interleaving.
TEST(MemoryBook, ThreadsRacingForTheLastBytesNeverTakeTheCountOver) {
  MemoryBook book;
  constexpr uint64_t kQuota = 1000 * 4096;
  book.set_quota(MemoryQuota{kQuota, 0});
  std::atomic<uint64_t> granted{0}, over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (!book.reserve(4096)) continue;
        if (book.live() > kQuota) over.fetch_add(1);
        granted.fetch_add(1);
        const uint64_t ptr = (uint64_t(t) << 32) | (uint64_t(i) << 12);
        book.allocated(ptr, 4096);
        if (i % 3 == 0) book.freed(book.take(ptr), true);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(over.load(), 0u);
  EXPECT_LE(book.live(), kQuota);
  EXPECT_EQ(book.peak(), kQuota) << "the quota filled exactly";
  EXPECT_FALSE(book.reserve(book.live() == kQuota ? 1 : kQuota)) << "full";
  EXPECT_GT(granted.load(), 1000u) << "frees made room again";
}

TEST(MemoryBook, ARefusalIsSaidAtOnceThenAtMostOnceAnInterval) {
  MemoryBook book;
  uint64_t since = 0;
  EXPECT_TRUE(book.refused(1'000, 10'000, &since));
  EXPECT_EQ(since, 1u);
  EXPECT_FALSE(book.refused(2'000, 10'000, &since));
  EXPECT_FALSE(book.refused(9'000, 10'000, &since));
  EXPECT_TRUE(book.refused(12'000, 10'000, &since));
  EXPECT_EQ(since, 3u) << "this one and the two not said";
  EXPECT_EQ(book.refusals(), 4u);
}

}  // namespace
}  // namespace concord::intercept
