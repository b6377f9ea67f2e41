// The completion book over a fake driver: a GPU whose streams reach their recorded events in order,
// as far as the test lets them. What the book reports, and how many event queries a poll costs.
#include <gtest/gtest.h>

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "intercept/completions.h"
#include "intercept/real_driver.h"

namespace concord::intercept {
namespace {

// The fake GPU: each stream runs its recorded events in order; `reached[stream]` of them are done.
struct FakeGpu {
  std::map<CUevent, std::pair<CUstream, size_t>> recorded;  // event -> (stream, its place there)
  std::map<CUstream, size_t> records;                       // events recorded per stream
  std::map<CUstream, size_t> reached;
  uintptr_t next_event = 0x1000;
  uint64_t queries = 0;
  std::function<void()> during_query;  // run once, from inside the next event query (another thread's launches)
};
FakeGpu* gpu = nullptr;

CUresult fake_create(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(gpu->next_event += 0x10);
  return CUDA_SUCCESS;
}
CUresult fake_record(CUevent e, CUstream s) {
  gpu->recorded[e] = {s, gpu->records[s]++};
  return CUDA_SUCCESS;
}
CUresult fake_query(CUevent e) {
  ++gpu->queries;
  if (gpu->during_query) {
    const std::function<void()> f = std::move(gpu->during_query);
    gpu->during_query = nullptr;
    f();
  }
  const auto [stream, place] = gpu->recorded.at(e);
  return place < gpu->reached[stream] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult fake_destroy(CUevent) { return CUDA_SUCCESS; }

CUstream stream(uintptr_t n) { return reinterpret_cast<CUstream>(n); }

class CompletionBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu = &fake_;
    driver_.event_create = fake_create;
    driver_.event_record = fake_record;
    driver_.event_query = fake_query;
    driver_.event_destroy = fake_destroy;
  }
  void TearDown() override { gpu = nullptr; }
  // `n` launches on stream `key`, a marker behind every `every`th; seqs continue across calls.
  void launch(CompletionBook& book, uintptr_t key, int n, uint64_t every) {
    for (int i = 0; i < n; ++i) {
      book.launching();
      const uint64_t seq = ++seq_;
      const CompletionBook::Booked b = book.book(key, stream(key), true, seq, every, false, 0);
      if (b.marker) {
        EXPECT_EQ(b.seq, seq) << "one thread: the stream's latest launch is this one";
        book.record_marker(stream(key), key, b.seq, b.count);
      }
    }
  }
  FakeGpu fake_;
  RealDriver driver_;
  uint64_t seq_ = 0;
  std::vector<std::tuple<uint64_t, uint64_t, bool>> reports_;  // (seq, key, ok)
  CompletionBook::Report report_ = [this](uint64_t seq, uint64_t key, bool ok, uint64_t) { reports_.emplace_back(seq, key, ok); };
};

TEST_F(CompletionBookTest, EachStreamCostsOneQueryPerPollBehindItsFirstUnreachedMarker) {
  CompletionBook book(driver_, report_);
  launch(book, 0x100, 40, 4);  // 10 markers on stream A, seqs 1-40
  launch(book, 0x200, 40, 4);  // 10 on stream B, seqs 41-80
  ASSERT_EQ(book.markers(), 20u);
  EXPECT_EQ(book.in_flight(), 80u);

  fake_.reached[stream(0x100)] = 3;  // A has run up to its third marker; B has not begun
  book.poll();
  // Three markers of A reached, its fourth not (one query), B's first not (one query): 5, not 20.
  EXPECT_EQ(fake_.queries, 5u);
  ASSERT_EQ(reports_.size(), 3u);
  EXPECT_EQ(reports_.back(), std::make_tuple(uint64_t{12}, uint64_t{0x100}, true));
  EXPECT_EQ(book.in_flight(), 68u);

  book.poll();  // nothing moved: one query per stream
  EXPECT_EQ(fake_.queries, 7u);
  EXPECT_EQ(reports_.size(), 3u);

  fake_.reached[stream(0x100)] = 10;
  fake_.reached[stream(0x200)] = 10;
  book.poll();
  EXPECT_EQ(reports_.size(), 20u);
  EXPECT_EQ(reports_.back(), std::make_tuple(uint64_t{80}, uint64_t{0x200}, true));
  EXPECT_EQ(book.in_flight(), 0u);
  EXPECT_FALSE(book.markers_pending());
}

TEST_F(CompletionBookTest, MarkersRecordedWhileAPollRunsAreKeptInOrderAndEventsAreReused) {
  CompletionBook book(driver_, report_);
  launch(book, 0x100, 8, 4);
  fake_.reached[stream(0x100)] = 2;
  book.poll();
  ASSERT_EQ(reports_.size(), 2u);
  const uintptr_t made = fake_.next_event;
  launch(book, 0x100, 8, 4);  // two more markers, on the two events the poll freed
  EXPECT_EQ(fake_.next_event, made);
  book.poll();
  EXPECT_EQ(reports_.size(), 2u);
  fake_.reached[stream(0x100)] = 4;
  book.poll();
  ASSERT_EQ(reports_.size(), 4u);
  EXPECT_EQ(std::get<0>(reports_[3]), 16u);
  EXPECT_EQ(book.in_flight(), 0u);
}

// Two threads on one stream book out of their seqs' order (the second launch's thread counted
// first): the marker after the first one covers both, and reports the stream's latest launch, so
// the daemon hears of both ends (reporting the marking thread's own seq would leave the other's
// outstanding for good: nothing uncovered is left for a tail marker).
TEST_F(CompletionBookTest, AMarkerReportsTheLatestLaunchOfItsStreamItCovers) {
  CompletionBook book(driver_, report_);
  book.launching();
  book.launching();
  const CompletionBook::Booked later = book.book(0x100, stream(0x100), true, 6, 2, false, 0);
  EXPECT_FALSE(later.marker);
  const CompletionBook::Booked earlier = book.book(0x100, stream(0x100), true, 5, 2, false, 0);
  ASSERT_TRUE(earlier.marker);
  EXPECT_EQ(earlier.count, 2u);
  EXPECT_EQ(earlier.seq, 6u);
  book.record_marker(stream(0x100), 0x100, earlier.seq, earlier.count);
  fake_.reached[stream(0x100)] = 1;
  book.poll();
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0], std::make_tuple(uint64_t{6}, uint64_t{0x100}, true));
  EXPECT_EQ(book.in_flight(), 0u);
  EXPECT_EQ(book.tail_markers(0), 0) << "nothing left uncovered";
}

// A marker recorded while a poll is under way (another thread launching as the completion thread
// queries) is polled from then on, behind the markers the poll found unreached.
TEST_F(CompletionBookTest, AMarkerRecordedDuringAPollIsPolledFromThenOn) {
  CompletionBook book(driver_, report_);
  launch(book, 0x100, 4, 4);                                      // A's marker, seq 4
  fake_.during_query = [&] { launch(book, 0x200, 4, 4); };        // B's, seq 8, recorded mid-poll
  book.poll();
  EXPECT_TRUE(reports_.empty());
  EXPECT_EQ(book.markers(), 2u);
  fake_.reached[stream(0x100)] = 1;
  fake_.reached[stream(0x200)] = 1;
  book.poll();
  ASSERT_EQ(reports_.size(), 2u) << "the marker recorded during the first poll was lost";
  EXPECT_EQ(std::get<0>(reports_[1]), 8u);
  EXPECT_EQ(book.in_flight(), 0u);
  EXPECT_FALSE(book.markers_pending());
}

TEST_F(CompletionBookTest, AStreamThatEndsUnreachedDoesNotHoldAnotherBack) {
  CompletionBook book(driver_, report_);
  launch(book, 0x100, 4, 4);
  launch(book, 0x200, 4, 4);
  fake_.reached[stream(0x200)] = 1;  // B's marker is reached, A's (recorded first) is not
  book.poll();
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(std::get<1>(reports_[0]), 0x200u);
  EXPECT_EQ(book.in_flight(), 4u);
}

}  // namespace
}  // namespace concord::intercept
