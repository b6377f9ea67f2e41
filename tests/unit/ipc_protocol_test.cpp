// The daemon protocol's frames: every message round-trips, and every malformed frame is refused
// with a Status naming the field; random frames never crash the decoder.
#include <gtest/gtest.h>

#include <random>

#include "ipc/protocol.h"

namespace concord::ipc {
namespace {

std::vector<Message> samples() {
  return {
      RegisterTenant{TenantClass::latency_critical, 5'000'000, 3, 1234, "resnet-serving"},
      RegisterTenant{TenantClass::best_effort, 0, 1, 99, "trainer"},
      LaunchNotice{7, 0xdeadbeef, 0x1234567890abcdef, {128, 2, 1}, {256, 1, 1}, 4096, false},
      LaunchNotice{8, 1, 42, {0, 0, 0}, {0, 0, 0}, 0, true},
      Decision{7, Verdict::hold, Priority::high, 5},
      CompletionNotice{7, false},
      Heartbeat{123456789},
      Bye{ByeReason::shutdown},
      ListTenants{},
      GetStats{},
      SetWeight{4, 10},
      Registered{4, "/concord-1000-4"},
      TenantList{{TenantEntry{1, 1000, 55, TenantClass::latency_critical, 1000, 2, 17, "a"},
                  TenantEntry{2, 0, 56, TenantClass::best_effort, 0, 1, 0, "b b"}}},
      Stats{3, 100, 2, 1},
      Ack{},
      ErrorReply{StatusCode::permission_denied, "no"},
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
  uint8_t slot[124];
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
  auto reg = frame_of(RegisterTenant{TenantClass::latency_critical, 5'000'000, 3, 1234, "svc"});
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

  auto list = frame_of(TenantList{{TenantEntry{1, 1000, 55, TenantClass::best_effort, 0, 2, 0, "a"}}});
  bad = list;
  bad[h] = 0xff;
  bad[h + 1] = 0x01;  // 511 entries in a frame that holds one
  EXPECT_NE(refusal(bad).find("cannot fit"), std::string::npos);
}

TEST(IpcProtocol, EncodeRefusesWhatDecodeWould) {
  Result<std::vector<uint8_t>> f = encode(RegisterTenant{TenantClass::best_effort, 5, 1, 1, "be"});
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(f.status().message().find("field latency_target_ns"), std::string::npos);
  EXPECT_FALSE(encode(RegisterTenant{TenantClass::best_effort, 0, 0, 1, "be"}).is_ok());
  EXPECT_FALSE(encode(RegisterTenant{TenantClass::best_effort, 0, 1, 1, std::string(65, 'a')}).is_ok());
  EXPECT_FALSE(encode(Registered{1, "no-slash"}).is_ok());
  EXPECT_FALSE(encode(Registered{1, "/a/b"}).is_ok());
  EXPECT_FALSE(encode(LaunchNotice{1, 0, 0, {1, 1, 1}, {0, 1, 1}, 0, false}).is_ok());
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
  EXPECT_TRUE(ledger.notice(1).is_ok());
  Status s = ledger.notice(3);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("field seq: 3 after 1"), std::string::npos);
  EXPECT_TRUE(ledger.notice(2).is_ok());
  EXPECT_FALSE(ledger.completion(1).is_ok()) << "completion before release";
  EXPECT_TRUE(ledger.decision({1, Verdict::hold, Priority::normal, 0}).is_ok());
  EXPECT_FALSE(ledger.decision({1, Verdict::hold, Priority::normal, 0}).is_ok()) << "held twice";
  EXPECT_TRUE(ledger.decision({1, Verdict::release, Priority::high, 2}).is_ok());
  EXPECT_FALSE(ledger.decision({1, Verdict::release, Priority::high, 2}).is_ok()) << "released twice";
  EXPECT_FALSE(ledger.decision({9, Verdict::release, Priority::normal, 0}).is_ok()) << "never noticed";
  EXPECT_TRUE(ledger.notice(3).is_ok());
  s = ledger.notice(4);
  ASSERT_FALSE(s.is_ok()) << "over the outstanding limit";
  EXPECT_NE(s.message().find("outstanding"), std::string::npos);
  EXPECT_TRUE(ledger.completion(1).is_ok());
  EXPECT_FALSE(ledger.completion(1).is_ok()) << "completed twice";
  EXPECT_TRUE(ledger.notice(4).is_ok());
  EXPECT_EQ(ledger.outstanding(), 3u);
}

}  // namespace
}  // namespace concord::ipc
