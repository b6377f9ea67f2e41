// The daemon protocol's frames: every message round-trips, and every malformed frame is refused
// with a Status naming the field; random frames never crash the decoder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "ipc/launch_ledger.h"
#include "ipc/protocol.h"
#include "ipc/ring.h"

namespace concord::ipc {
namespace {

std::vector<Message> samples() {
  return {
      RegisterTenant{TenantClass::latency_critical, 5'000'000, 3, 1234, "resnet-serving", ""},
      RegisterTenant{TenantClass::best_effort, 0, 1, 99, "trainer", ""},
      RegisterTenant{TenantClass::latency_critical, 1'000'000, 1, 7, "svc", "0000:18:00.0", LcRefusal::best_effort},
      RegisterTenant{TenantClass::latency_critical, 1'000'000, 1, 7, "svc", "0000:18:00.0", LcRefusal::refuse, 8ull << 30, 80ull << 30},
      LaunchNotice{7, 0xdeadbeef, 0x1234567890abcdef, {128, 2, 1}, {256, 1, 1}, 4096, false, 123456789},
      LaunchNotice{8, 1, 42, {0, 0, 0}, {0, 0, 0}, 0, true, 0},
      Decision{7, Verdict::hold, Priority::high, 5},
      CompletionNotice{7, 0xdeadbeef, false, 987654321},
      Heartbeat{123456789},
      Bye{ByeReason::shutdown},
      ListTenants{},
      GetStats{},
      SetWeight{4, 10},
      Registered{4, "/concord-1000-4"},
      Registered{5, "/concord-1000-5", TenantClass::latency_critical, ""},
      Registered{6, "/concord-1000-6", TenantClass::best_effort, "uid 1000 may not register latency-critical tenants"},
      GrantLc{1000, "slurm-42.0"},
      TenantList{{TenantEntry{1, 1000, 55, TenantClass::latency_critical, 1000, 2, 17, 16, 900, 1500, {}, {8 << 20, 8 << 20, 1 << 20, 2 << 20}, "a", ""},
                  TenantEntry{2, 0, 56, TenantClass::best_effort, 0, 1, 0, 0, 0, 0, {LeaseYield::room, true, 2, 66, 2}, {}, "b b", ""}}},
      MemoryUsage{4096, 8192},
      Stats{3, 100, 2, 1, 4},
      Ack{},
      ErrorReply{StatusCode::permission_denied, "no"},
      SmSetAnnounce{3, {0xff00ff00ff00ff00ULL, 0x1}},
      // 1024 SMs: the largest ring message.
      SmSetAnnounce{1, std::vector<uint64_t>(16, ~0ULL)},
      RequestBoundary{RequestEdge::begin, 0, 5},
      RequestBoundary{RequestEdge::end, 42, 6},
  };
}

std::vector<uint8_t> frame_of(const Message& m) {
  Result<std::vector<uint8_t>> f = encode(m);
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  return f.is_ok() ? *f : std::vector<uint8_t>{};
}

// decode's error message, which the test expects to name `field`.
std::string refusal(const std::vector<uint8_t>& frame) {
  Result<Message> m = decode(frame);
  EXPECT_FALSE(m.is_ok());
  if (m.is_ok()) return "";
  EXPECT_EQ(m.status().code(), StatusCode::parse_error);
  return m.status().message();
}

TEST(IpcProtocol, EveryMessageRoundTrips) {
  for (const Message& m : samples()) {
    const std::vector<uint8_t> f = frame_of(m);
    Result<Message> back = decode(f);
    ASSERT_TRUE(back.is_ok()) << to_string(type_of(m)) << ": " << back.status().to_string();
    EXPECT_EQ(*back, m) << to_string(type_of(m));
  }
}

TEST(IpcProtocol, EncodeIntoARingSlotFitsEveryRingMessage) {
  uint8_t slot[kRingSlotBytes - sizeof(uint32_t)];
  for (const Message& m : samples()) {
    const MessageType t = type_of(m);
    if (!allowed_on(t, Channel::up_ring) && !allowed_on(t, Channel::down_ring)) continue;
    Result<size_t> n = encode_into(m, slot);
    ASSERT_TRUE(n.is_ok()) << n.status().to_string();
    EXPECT_LE(*n, sizeof slot);
  }
  uint8_t tiny[20];
  Result<size_t> n = encode_into(samples()[2], tiny);
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().message().find("does not fit"), std::string::npos);
}

TEST(IpcProtocol, HeaderFieldsAreCheckedByName) {
  std::vector<uint8_t> f = frame_of(Heartbeat{1});
  EXPECT_NE(refusal({f.begin(), f.begin() + 5}).find("field header"), std::string::npos);
  auto bad = f;
  bad[0] ^= 0xff;
  EXPECT_NE(refusal(bad).find("field magic"), std::string::npos);
  bad = f;
  bad[4] = 9;
  EXPECT_NE(refusal(bad).find("field version"), std::string::npos);
  bad = f;
  bad[6] = 200;
  EXPECT_NE(refusal(bad).find("field type"), std::string::npos);
  bad = f;
  bad[8] += 1;  // announces one byte more than given
  EXPECT_NE(refusal(bad).find("field length"), std::string::npos);
  bad = f;
  bad[10] = 0xff;  // announces over the frame limit
  EXPECT_NE(refusal(bad).find("over the limit"), std::string::npos);
  bad = f;
  bad.push_back(0);
  bad[8] += 1;  // a byte past the body's end
  EXPECT_NE(refusal(bad).find("after the body's end"), std::string::npos);
}

TEST(IpcProtocol, BodyFieldsAreCheckedByName) {
  // Offsets below are within the body (after the 12-byte header).
  const size_t h = kHeaderBytes;
  auto reg = frame_of(RegisterTenant{TenantClass::latency_critical, 5'000'000, 3, 1234, "svc", ""});
  auto bad = reg;
  bad[h] = 2;
  EXPECT_NE(refusal(bad).find("field class"), std::string::npos);
  bad = reg;
  for (int i = 0; i < 8; ++i) bad[h + 1 + i] = 0;
  EXPECT_NE(refusal(bad).find("field latency_target_ns"), std::string::npos);
  bad = reg;
  for (int i = 0; i < 4; ++i) bad[h + 9 + i] = 0;
  EXPECT_NE(refusal(bad).find("field weight"), std::string::npos);
  bad = reg;
  for (int i = 0; i < 4; ++i) bad[h + 13 + i] = 0xff;
  EXPECT_NE(refusal(bad).find("field pid"), std::string::npos);
  bad = reg;
  bad[h + 17] = 200;  // name length past the frame's end and over the limit
  EXPECT_NE(refusal(bad).find("field name"), std::string::npos);
  bad = reg;
  bad[h + 19] = '\n';
  EXPECT_NE(refusal(bad).find("not printable"), std::string::npos);

  auto launch = frame_of(LaunchNotice{7, 1, 2, {128, 2, 1}, {256, 1, 1}, 4096, false});
  bad = launch;
  for (int i = 0; i < 8; ++i) bad[h + i] = 0;
  EXPECT_NE(refusal(bad).find("field seq"), std::string::npos);
  bad = launch;
  for (int i = 0; i < 4; ++i) bad[h + 24 + i] = 0;
  EXPECT_NE(refusal(bad).find("field grid.x"), std::string::npos);
  bad = launch;
  bad[h + 28 + 2] = 1;  // grid.y = 65536 + 2
  EXPECT_NE(refusal(bad).find("field grid.y"), std::string::npos);
  bad = launch;
  bad[h + 36] = 0;
  bad[h + 37] = 8;  // block.x = 2048
  EXPECT_NE(refusal(bad).find("field block.x"), std::string::npos);
  bad = launch;
  bad[h + 40] = 8;  // block 256 x 8 x 1 = 2048 threads
  EXPECT_NE(refusal(bad).find("field block:"), std::string::npos);
  bad = launch;
  bad[h + 50] = 0x10;  // 1 MiB of shared memory
  EXPECT_NE(refusal(bad).find("field shared_mem"), std::string::npos);
  bad = launch;
  bad[h + 52] = 2;
  EXPECT_NE(refusal(bad).find("field graph"), std::string::npos);
  bad = launch;
  bad[h + 52] = 1;  // a graph launch with a shape
  EXPECT_NE(refusal(bad).find("graph launch carries no grid"), std::string::npos);

  auto decision = frame_of(Decision{7, Verdict::release, Priority::normal, 0});
  bad = decision;
  bad[h + 8] = 2;
  EXPECT_NE(refusal(bad).find("field verdict"), std::string::npos);
  bad = decision;
  bad[h + 9] = 7;
  EXPECT_NE(refusal(bad).find("field priority"), std::string::npos);

  auto error = frame_of(ErrorReply{StatusCode::not_found, "x"});
  bad = error;
  bad[h] = 0;
  EXPECT_NE(refusal(bad).find("field code"), std::string::npos);

  auto sms = frame_of(SmSetAnnounce{5, {0x3, 0x1}});
  bad = sms;
  for (int i = 0; i < 4; ++i) bad[h + i] = 0;
  EXPECT_NE(refusal(bad).find("field handle"), std::string::npos);
  bad = sms;
  bad[h + 4] = 17;  // 17 words: more than 1024 SMs
  EXPECT_NE(refusal(bad).find("field words"), std::string::npos);
  bad = sms;
  bad[h + 4 + 1 + 8] = 0;  // the last word zero: not the shortest form
  EXPECT_NE(refusal(bad).find("ends with a zero word"), std::string::npos);
  bad = sms;
  bad[h + 4] = 0;
  bad.resize(h + 5);
  bad[8] = 5;
  EXPECT_NE(refusal(bad).find("is empty"), std::string::npos);

  auto completion = frame_of(CompletionNotice{3, 1, true, 0});
  bad = completion;
  bad[h + 16] = 2;
  EXPECT_NE(refusal(bad).find("field ok"), std::string::npos);
  bad = completion;
  bad.pop_back();
  bad[8] -= 1;
  EXPECT_NE(refusal(bad).find("field at_ns"), std::string::npos);

  auto boundary = frame_of(RequestBoundary{RequestEdge::end, 3});
  bad = boundary;
  bad[h] = 2;
  EXPECT_NE(refusal(bad).find("field edge"), std::string::npos);
  bad = boundary;
  bad.resize(bad.size() - 9);
  bad[8] -= 9;
  EXPECT_NE(refusal(bad).find("field last_seq"), std::string::npos);

  auto list = frame_of(TenantList{{TenantEntry{1, 1000, 55, TenantClass::best_effort, 0, 2, 0, 0, 0, 0, {}, {}, "a", ""}}});
  bad = list;
  bad[h] = 0x2c;
  bad[h + 1] = 0x01;  // 300 entries in a frame that holds one
  EXPECT_NE(refusal(bad).find("cannot fit"), std::string::npos);
  // The entry's lease: its yield byte after the count (2), id, uid, pid, class, target, weight,
  // launches, completions, p50 and p99 (2 + 8 + 4 + 4 + 1 + 8 + 4 + 8 * 4 = 63); then yielding.
  bad = list;
  bad[h + 63] = 9;
  EXPECT_NE(refusal(bad).find("field tenants.lease.yield"), std::string::npos);
  bad = list;
  bad[h + 64] = 2;
  EXPECT_NE(refusal(bad).find("field tenants.lease.yielding"), std::string::npos);
  bad = list;
  bad[h + 69] = 0xff;
  bad[h + 70] = 0xff;  // room_sms 65535
  EXPECT_NE(refusal(bad).find("field tenants.lease.room_sms"), std::string::npos);
}

// The reasons read as they did before the fields were declared once (a log or a client may quote
// them): each field's own wording, on decode and on encode alike.
TEST(IpcProtocol, RefusalsKeepTheirWording) {
  const auto encoded = [](const Message& m) {
    Result<std::vector<uint8_t>> f = encode(m);
    return f.is_ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_EQ(encoded(LaunchNotice{0, 1, 2, {1, 1, 1}, {32, 1, 1}, 0, false}),
            "launch notice message: field seq: is 0 (sequences start at 1)");
  EXPECT_EQ(encoded(LaunchNotice{1, 1, 2, {1, 1, 1}, {32, 1, 1}, 300000, false}),
            "launch notice message: field shared_mem: 300000 bytes, over 262144");
  EXPECT_EQ(encoded(SmSetAnnounce{0, {1}}), "sm set message: field handle: is 0 (the whole GPU needs no announcement)");
  EXPECT_EQ(encoded(SmSetAnnounce{1, std::vector<uint64_t>(17, 1)}), "sm set message: field words: 17 words, over 16 (1024 SMs)");
  EXPECT_EQ(encoded(RegisterTenant{TenantClass::best_effort, 0, 1, -4, "be", ""}), "register message: field pid: -4 is not a process id");
  EXPECT_EQ(encoded(RegisterTenant{TenantClass::latency_critical, 4'000'000'000'000, 1, 1, "lc", ""}),
            "register message: field latency_target_ns: 4000000000000 is over an hour");
  EXPECT_EQ(encoded(RegisterTenant{TenantClass::best_effort, 0, 0, 1, "be", ""}), "register message: field weight: 0 is outside 1..1000000");
  TenantEntry e;
  e.pid = 1;
  e.name = "t";
  e.lease.room_sms = 2000;
  EXPECT_EQ(encoded(TenantList{{e}}), "tenant list message: field tenants.lease.room_sms: 2000 is over 1024");
  // Decoding says the same of the same bytes (a frame made with the check bypassed: patched).
  std::vector<uint8_t> f = frame_of(LaunchNotice{7, 1, 2, {1, 1, 1}, {32, 1, 1}, 0, false});
  for (int i = 0; i < 8; ++i) f[kHeaderBytes + i] = 0;
  EXPECT_EQ(refusal(f), "launch notice message: field seq: is 0 (sequences start at 1)");
}

TEST(IpcProtocol, EncodeRefusesWhatDecodeWould) {
  Result<std::vector<uint8_t>> f = encode(RegisterTenant{TenantClass::best_effort, 5, 1, 1, "be", ""});
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(f.status().message().find("field latency_target_ns"), std::string::npos);
  EXPECT_FALSE(encode(RegisterTenant{TenantClass::best_effort, 0, 0, 1, "be", ""}).is_ok());
  EXPECT_FALSE(encode(RegisterTenant{TenantClass::best_effort, 0, 1, 1, std::string(65, 'a'), ""}).is_ok());
  EXPECT_FALSE(encode(Registered{1, "no-slash"}).is_ok());
  EXPECT_FALSE(encode(Registered{1, "/a/b"}).is_ok());
  EXPECT_FALSE(encode(Registered{1, "/a", TenantClass::latency_critical, "refused"}).is_ok()) << "an LC admission with a refusal";
  EXPECT_FALSE(encode(Registered{1, "/a", TenantClass::best_effort, "\x1b[2J"}).is_ok());
  EXPECT_FALSE(encode(GrantLc{1000, ""}).is_ok());
  EXPECT_FALSE(encode(LaunchNotice{1, 0, 0, {1, 1, 1}, {0, 1, 1}, 0, false}).is_ok());
}

TEST(IpcProtocol, SmSetBitmapsRoundTripIds) {
  const std::vector<int> ids = {0, 1, 63, 64, 130, 1023};
  Result<std::vector<uint64_t>> words = sm_words(ids);
  ASSERT_TRUE(words.is_ok());
  EXPECT_EQ(words->size(), 16u);
  EXPECT_EQ(sm_ids(*words), ids);
  EXPECT_FALSE(sm_words({1024}).is_ok());
  EXPECT_FALSE(sm_words({-1}).is_ok());
  EXPECT_FALSE(encode(SmSetAnnounce{0, {1}}).is_ok());
  EXPECT_FALSE(encode(SmSetAnnounce{1, {}}).is_ok());
  EXPECT_FALSE(encode(SmSetAnnounce{1, std::vector<uint64_t>(17, 1)}).is_ok());
}

TEST(IpcProtocol, ChannelsCarryOnlyTheirTypes) {
  const auto notice = frame_of(LaunchNotice{1, 0, 0, {1, 1, 1}, {32, 1, 1}, 0, false});
  EXPECT_TRUE(decode_on(notice, Channel::up_ring).is_ok());
  Result<Message> m = decode_on(notice, Channel::down_ring);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("not carried on the down ring"), std::string::npos);
  EXPECT_FALSE(decode_on(frame_of(Registered{1, "/x"}), Channel::control_request).is_ok());
  EXPECT_TRUE(decode_on(frame_of(SetWeight{1, 2}), Channel::control_request).is_ok());
  EXPECT_FALSE(decode_on(frame_of(Decision{1, Verdict::release, Priority::normal, 0}), Channel::up_ring).is_ok());
  EXPECT_TRUE(decode_on(frame_of(SmSetAnnounce{1, {1}}), Channel::down_ring).is_ok());
  EXPECT_FALSE(decode_on(frame_of(SmSetAnnounce{1, {1}}), Channel::up_ring).is_ok());
  EXPECT_TRUE(decode_on(frame_of(CompletionNotice{1, 1, true, 0}), Channel::up_ring).is_ok());
  EXPECT_FALSE(decode_on(frame_of(CompletionNotice{1, 1, true, 0}), Channel::down_ring).is_ok());
  EXPECT_TRUE(decode_on(frame_of(RequestBoundary{}), Channel::up_ring).is_ok());
  EXPECT_FALSE(decode_on(frame_of(RequestBoundary{}), Channel::down_ring).is_ok());
}

TEST(IpcProtocol, RandomAndMutatedFramesNeverCrashTheDecoder) {
  std::mt19937_64 rng(7);
  const auto all = samples();
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> f = frame_of(all[rng() % all.size()]);
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      switch (rng() % 3) {
        case 0: f[rng() % f.size()] = uint8_t(rng()); break;
        case 1: f.resize(rng() % (f.size() + 1)); break;
        default: f.push_back(uint8_t(rng())); break;
      }
      if (f.empty()) f.push_back(0);
    }
    Result<Message> m = decode(f);
    if (m.is_ok()) {
      ++accepted;
      // What decodes re-encodes to the same bytes: nothing in a frame is ignored.
      Result<std::vector<uint8_t>> again = encode(*m);
      ASSERT_TRUE(again.is_ok()) << again.status().to_string();
      EXPECT_EQ(*again, f);
    } else {
      EXPECT_NE(m.status().message().find("field "), std::string::npos) << m.status().message();
    }
  }
  // Mutations inside a field's valid range (a seq, a stream id) decode: the test saw both sides.
  EXPECT_GT(accepted, 100);
}

TEST(IpcProtocol, LedgerKeepsLaunchOrder) {
  LaunchLedger ledger(3);
  EXPECT_TRUE(ledger.notice(1, 10).is_ok());
  Status s = ledger.notice(1, 10);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("field seq: 1 after 1"), std::string::npos);
  EXPECT_TRUE(ledger.notice(2, 10).is_ok());
  EXPECT_FALSE(ledger.completion(1, 10).is_ok()) << "completion before release";
  EXPECT_TRUE(ledger.decision({1, Verdict::hold, Priority::normal, 0}).is_ok());
  EXPECT_FALSE(ledger.decision({1, Verdict::hold, Priority::normal, 0}).is_ok()) << "held twice";
  EXPECT_TRUE(ledger.decision({1, Verdict::release, Priority::high, 2}).is_ok());
  EXPECT_FALSE(ledger.decision({1, Verdict::release, Priority::high, 2}).is_ok()) << "released twice";
  EXPECT_FALSE(ledger.decision({9, Verdict::release, Priority::normal, 0}).is_ok()) << "never noticed";
  EXPECT_TRUE(ledger.notice(3, 10).is_ok());
  s = ledger.notice(4, 10);
  ASSERT_FALSE(s.is_ok()) << "over the outstanding limit";
  EXPECT_NE(s.message().find("outstanding"), std::string::npos);
  EXPECT_FALSE(ledger.completion(1, 11).is_ok()) << "another stream's launch";
  Result<std::vector<uint64_t>> ended = ledger.completion(1, 10);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, std::vector<uint64_t>{1});
  ended = ledger.completion(1, 10);
  ASSERT_TRUE(ended.is_ok()) << "named again: nothing changes";
  EXPECT_TRUE(ended->empty());
  EXPECT_TRUE(ledger.notice(5, 10).is_ok()) << "the launches between went out under a lease";
  EXPECT_EQ(ledger.outstanding(), 3u);
}

// A completion ends its stream's released launches up to it, not another stream's.
TEST(IpcProtocol, ACompletionEndsItsStreamsEarlierLaunches) {
  LaunchLedger ledger(100);
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    ASSERT_TRUE(ledger.notice(seq, seq % 2 == 0 ? 20 : 30).is_ok());
    ASSERT_TRUE(ledger.decision({seq, Verdict::release, Priority::normal, 0}).is_ok());
  }
  Result<std::vector<uint64_t>> ended = ledger.completion(4, 20);
  ASSERT_TRUE(ended.is_ok()) << ended.status().to_string();
  EXPECT_EQ(*ended, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(ledger.outstanding(), 4u);
  ended = ledger.completion(5, 30);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, (std::vector<uint64_t>{1, 3, 5}));
  ended = ledger.completion(6, 20);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(*ended, (std::vector<uint64_t>{6}));
  EXPECT_EQ(ledger.outstanding(), 0u);
  // A held launch cannot end with its stream: the completion is refused and changes nothing.
  ASSERT_TRUE(ledger.notice(7, 20).is_ok());
  ASSERT_TRUE(ledger.notice(8, 20).is_ok());
  ASSERT_TRUE(ledger.decision({8, Verdict::release, Priority::normal, 0}).is_ok());
  EXPECT_FALSE(ledger.completion(8, 20).is_ok());
  EXPECT_EQ(ledger.outstanding(), 2u);
}

// The fuzz corpus (fuzz/corpus/ipc_protocol): one valid frame of each kind, and a ring image. With
// CONCORD_IPC_CORPUS_OUT=<dir> the test writes them there (how the corpus is made after a layout
// change); otherwise it checks that every file of the corpus is current: each frame decodes, and
// the ring image attaches and yields a frame that decodes.
std::vector<std::pair<std::string, Message>> corpus_frames() {
  return {
      {"register_lc", RegisterTenant{TenantClass::latency_critical, 5'000'000, 3, 1234, "resnet-serving", "0000:18:00.0",
                                     LcRefusal::refuse, 8ull << 30, 80ull << 30}},
      {"register_be", RegisterTenant{TenantClass::best_effort, 0, 1, 99, "trainer", ""}},
      {"launch", LaunchNotice{7, 0xdeadbeef, 0x1234567890abcdef, {128, 2, 1}, {256, 1, 1}, 4096, false, 1000}},
      {"launch_graph", LaunchNotice{8, 1, 42, {0, 0, 0}, {0, 0, 0}, 0, true, 2000}},
      {"decision", Decision{7, Verdict::release, Priority::high, 5}},
      {"completion", CompletionNotice{7, 0xdeadbeef, true, 3000}},
      {"heartbeat", Heartbeat{123456789}},
      {"bye", Bye{ByeReason::exit}},
      {"list", ListTenants{}},
      {"stats_request", GetStats{}},
      {"set_weight", SetWeight{4, 10}},
      {"registered", Registered{4, "/concord-1000-4", TenantClass::latency_critical, ""}},
      {"registered_as_be", Registered{5, "/concord-1000-5", TenantClass::best_effort, "uid 1000 may not register latency-critical tenants"}},
      {"register_lc_or_be", RegisterTenant{TenantClass::latency_critical, 5'000'000, 1, 1234, "svc", "", LcRefusal::best_effort}},
      {"grant_lc", GrantLc{1000, "slurm-42.0"}},
      {"tenant_list", TenantList{{TenantEntry{1, 1000, 55, TenantClass::latency_critical, 1000, 2, 17, 16, 900, 1500, {}, {8 << 20, 8 << 20, 1 << 20, 2 << 20}, "a", ""},
                                  TenantEntry{2, 1000, 56, TenantClass::best_effort, 0, 1, 9, 9, 0, 0, {LeaseYield::cap, true, 2, 66, 2}, {}, "b", "1"}}}},
      {"stats", Stats{3, 100, 2, 1, 1}},
      {"ack", Ack{}},
      {"error", ErrorReply{StatusCode::permission_denied, "no"}},
      {"sm_set", SmSetAnnounce{3, {0xff00ff00ff00ff00ULL, 0x1}}},
      {"sm_set_1024", SmSetAnnounce{1, std::vector<uint64_t>(16, ~0ULL)}},
      {"request_begin", RequestBoundary{RequestEdge::begin, 0, 4000}},
      {"request_end", RequestBoundary{RequestEdge::end, 42, 5000}},
      {"memory_usage", MemoryUsage{1 << 20, 2 << 20}},
  };
}

std::vector<uint8_t> ring_image() {
  const RingGeometry g{64, 2};
  const size_t bytes = *SpscRing::bytes_for(g);
  std::vector<std::byte> storage(bytes + 64);
  const size_t pad = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  std::span<std::byte> memory(storage.data() + pad, bytes);
  Result<SpscRing> ring = SpscRing::format(memory, g);
  EXPECT_TRUE(ring.is_ok());
  const auto frame = frame_of(Decision{7, Verdict::release, Priority::normal, 5});
  EXPECT_TRUE(*ring->try_push(frame));
  const auto* p = reinterpret_cast<const uint8_t*>(memory.data());
  return {p, p + bytes};
}

TEST(IpcProtocol, FuzzCorpusIsCurrent) {
  if (const char* out = std::getenv("CONCORD_IPC_CORPUS_OUT")) {
    for (const auto& [name, m] : corpus_frames()) {
      const auto f = frame_of(m);
      std::ofstream(std::filesystem::path(out) / name, std::ios::binary).write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
    }
    const auto image = ring_image();
    std::ofstream(std::filesystem::path(out) / "ring_one_decision", std::ios::binary)
        .write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
  }
  const std::filesystem::path dir = CONCORD_IPC_CORPUS_DIR;
  for (const auto& [name, m] : corpus_frames()) {
    std::ifstream in(dir / name, std::ios::binary);
    ASSERT_TRUE(in.good()) << (dir / name) << " is missing";
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Result<Message> back = decode(bytes);
    ASSERT_TRUE(back.is_ok()) << name << ": " << back.status().to_string();
    EXPECT_EQ(*back, m) << name;
  }
  std::ifstream in(dir / "ring_one_decision", std::ios::binary);
  const std::vector<uint8_t> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(image, ring_image());
}

}  // namespace
}  // namespace concord::ipc
