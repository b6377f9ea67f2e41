// The daemon's record of each launch: the order the ring must keep, and the engine's side.
#include "daemon/launch_book.h"

#include <gtest/gtest.h>

namespace concord::daemon {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LaunchBook, KeepsTheRingsOrderAndRefusesByName) {
  LaunchBook book(3, /*engine=*/false);
  EXPECT_TRUE(book.notice(1, 10, false).is_ok());
  Status s = book.notice(3, 10, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("field seq: 3 after 1"), std::string::npos);
  EXPECT_TRUE(book.notice(2, 10, false).is_ok());
  EXPECT_FALSE(book.end(1, 10).is_ok()) << "an end before the release";
  const auto t0 = Clock::now();
  EXPECT_TRUE(book.decide(1, ipc::Verdict::hold, t0).is_ok());
  EXPECT_FALSE(book.decide(1, ipc::Verdict::hold, t0).is_ok()) << "held twice";
  Result<Clock::duration> held = book.decide(1, ipc::Verdict::release, t0 + std::chrono::milliseconds(5));
  ASSERT_TRUE(held.is_ok());
  EXPECT_EQ(*held, std::chrono::milliseconds(5)) << "how long it was held";
  EXPECT_FALSE(book.decide(1, ipc::Verdict::release, t0).is_ok()) << "released twice";
  EXPECT_FALSE(book.decide(9, ipc::Verdict::release, t0).is_ok()) << "never noticed";
  EXPECT_TRUE(book.notice(3, 10, false).is_ok());
  s = book.notice(4, 10, false);
  ASSERT_FALSE(s.is_ok()) << "over the outstanding limit";
  EXPECT_NE(s.message().find("outstanding"), std::string::npos);
  EXPECT_FALSE(book.end(1, 11).is_ok()) << "another stream's launch";
  Result<std::vector<uint64_t>> ended = book.end(1, 10);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, std::vector<uint64_t>{1});
  ended = book.end(1, 10);
  ASSERT_TRUE(ended.is_ok()) << "named again: nothing changes";
  EXPECT_TRUE(ended->empty());
  EXPECT_FALSE(book.end(4, 10).is_ok()) << "never noticed";
  EXPECT_TRUE(book.notice(4, 10, false).is_ok());
  EXPECT_EQ(book.outstanding(), 3u);
  EXPECT_EQ(book.records(), 3u) << "without an engine a record goes at its end";
}

// An end covers its stream's earlier launches, not another stream's; a refused end changes nothing.
TEST(LaunchBook, AnEndCoversItsStreamsEarlierLaunches) {
  LaunchBook book(100, /*engine=*/false);
  for (uint64_t seq = 1; seq <= 6; ++seq) ASSERT_TRUE(book.notice(seq, seq % 2 == 0 ? 20 : 30, /*released=*/true).is_ok());
  EXPECT_EQ(book.in_flight(), 6u);
  Result<std::vector<uint64_t>> ended = book.end(4, 20);
  ASSERT_TRUE(ended.is_ok()) << ended.status().to_string();
  EXPECT_EQ(*ended, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(book.outstanding(), 4u);
  ended = book.end(5, 30);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, (std::vector<uint64_t>{1, 3, 5}));
  ended = book.end(6, 20);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, (std::vector<uint64_t>{6}));
  EXPECT_EQ(book.outstanding(), 0u);
  EXPECT_EQ(book.in_flight(), 0u);
  EXPECT_EQ(book.records(), 0u);
  ASSERT_TRUE(book.notice(7, 20, false).is_ok());
  ASSERT_TRUE(book.notice(8, 20, true).is_ok());
  EXPECT_FALSE(book.end(8, 20).is_ok()) << "covers held-or-undecided launch 7";
  EXPECT_EQ(book.outstanding(), 2u);
  EXPECT_EQ(book.in_flight(), 1u);
}

// With an engine: launches are queued, decided and dispatched in order; one released ahead of the
// engine that ended before its dispatch ends at the dispatch; the record goes only when both sides
// are done with it.
TEST(LaunchBook, TheEnginesSideMovesInOrder) {
  LaunchBook book;
  const auto now = Clock::now();
  for (uint64_t seq = 1; seq <= 4; ++seq) ASSERT_TRUE(book.notice(seq, 7, false).is_ok());
  EXPECT_FALSE(book.dispatch_next(DispatchId{1})) << "nothing queued yet";
  EXPECT_FALSE(book.queue(2).is_ok()) << "queued out of order";
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(book.queue(seq).is_ok());
  EXPECT_EQ(book.queued(), 3u);
  EXPECT_EQ(book.undecided(), (std::vector<uint64_t>{1, 2, 3})) << "launch 4 is still in the inbox";
  // 1 follows on (released ahead of the engine), 2 and 3 are held.
  ASSERT_TRUE(book.decide(1, ipc::Verdict::release, now, /*follow_on=*/true).is_ok());
  ASSERT_TRUE(book.decide(2, ipc::Verdict::hold, now).is_ok());
  ASSERT_TRUE(book.decide(3, ipc::Verdict::hold, now).is_ok());
  EXPECT_TRUE(book.undecided().empty());
  EXPECT_EQ(book.oldest_held(), 2u);
  EXPECT_EQ(book.held(), 2u);
  // 1 ends before the engine dispatches it: its record stays for the dispatch.
  Result<std::vector<uint64_t>> ended = book.end(1, 7);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, std::vector<uint64_t>{1});
  EXPECT_EQ(book.records(), 4u);
  auto d = book.dispatch_next(DispatchId{11});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->first, 1u);
  EXPECT_TRUE(d->second->followed);
  EXPECT_EQ(d->second->told, Told::ended);
  book.finish(1);
  EXPECT_EQ(book.records(), 3u) << "both sides done with launch 1";
  // 2 is dispatched, so released by the dispatch; the oldest held is 3 now.
  d = book.dispatch_next(DispatchId{12});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->first, 2u);
  ASSERT_TRUE(book.decide(2, ipc::Verdict::release, now).is_ok());
  EXPECT_EQ(book.oldest_held(), 3u);
  EXPECT_EQ(book.running(), 1u);
  EXPECT_EQ(book.running_as(2), DispatchId{12});
  EXPECT_EQ(book.in_flight(), 1u);
  ended = book.end(2, 7);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(book.records(), 3u) << "ended, but the engine has not finished it";
  book.finish(2);
  EXPECT_EQ(book.records(), 2u);
  EXPECT_EQ(book.running(), 0u);
  EXPECT_EQ(book.queued_seqs(), std::vector<uint64_t>{3});
}

// The engine drops the tenant: what it had not dispatched is forgotten (but still checked against
// the ring), what runs stays until finished.
TEST(LaunchBook, ADropForgetsTheQueueAndKeepsWhatRuns) {
  LaunchBook book;
  const auto now = Clock::now();
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(book.notice(seq, 5, true).is_ok());
  ASSERT_TRUE(book.queue(1).is_ok());
  ASSERT_TRUE(book.queue(2).is_ok());
  ASSERT_TRUE(book.dispatch_next(DispatchId{1}));
  book.drop();
  EXPECT_TRUE(book.dropped());
  EXPECT_EQ(book.queued(), 0u);
  EXPECT_EQ(book.running(), 1u);
  EXPECT_EQ(book.running_dispatches().size(), 1u);
  EXPECT_FALSE(book.dispatch_next(DispatchId{2}));
  // The ring goes on until the tenant is removed: its ends are still checked and taken.
  Result<std::vector<uint64_t>> ended = book.end(3, 5);
  ASSERT_TRUE(ended.is_ok()) << ended.status().to_string();
  EXPECT_EQ(*ended, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(book.records(), 1u) << "launch 1 still runs in the engine's books";
  book.finish(1);
  EXPECT_EQ(book.records(), 0u);
  (void)now;
}

}  // namespace
}  // namespace concord::daemon
