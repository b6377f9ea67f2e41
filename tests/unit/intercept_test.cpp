// The interception library's CPU-side parts: its settings, the table of intercepted entry points
// and cuGetProcAddress's naming rule, the export list, kernel ids.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "intercept/config.h"
#include "intercept/kernel_id.h"
#include "intercept/residency.h"
#include "intercept/symbols.h"
#include "intercept/thread_cache.h"
#include "intercept_env.h"

namespace concord::intercept {
namespace {

TEST(InterceptConfig, DefaultsAreABestEffortTenantNamedAfterTheProgram) {
  auto c = parse({});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_FALSE(c->disabled);
  EXPECT_EQ(c->socket_path, "/run/concord/concordd.sock");
  EXPECT_EQ(c->tenant.cls, TenantClass::best_effort);
  EXPECT_EQ(c->tenant.latency_target_ns, 0u);
  EXPECT_EQ(c->tenant.weight, 1u);
  EXPECT_EQ(c->tenant.name, "my_app");
  EXPECT_EQ(c->poll_us, 50u);
  EXPECT_EQ(c->be_poll_us, 200u);
  EXPECT_FALSE(c->green_contexts);
  EXPECT_EQ(c->marker_every, 64u);
}

// The ends of each range are accepted: the largest weight, a name of the protocol's full length,
// a marker after every launch and after every 65536.
TEST(InterceptConfig, TheEndsOfEachRangeAreAccepted) {
  auto heavy = parse({{"CONCORD_WEIGHT", std::to_string(ipc::limits::kMaxWeight)}});
  ASSERT_TRUE(heavy.is_ok()) << heavy.status().to_string();
  EXPECT_EQ(heavy->tenant.weight, ipc::limits::kMaxWeight);
  const std::string longest(ipc::limits::kNameBytes, 'n');
  auto named = parse({{"CONCORD_NAME", longest}});
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  EXPECT_EQ(named->tenant.name, longest);
  for (const char* every : {"1", "65536"}) {
    auto c = parse({{"CONCORD_MARKER_EVERY", every}});
    ASSERT_TRUE(c.is_ok()) << every << ": " << c.status().to_string();
    EXPECT_EQ(c->marker_every, std::stoul(every));
  }
  for (const char* poll : {"1", "100000"}) EXPECT_TRUE(parse({{"CONCORD_POLL_US", poll}}).is_ok()) << poll;
}

TEST(InterceptConfig, ReadsAnLcTenant) {
  auto c = parse({{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "2.5"}, {"CONCORD_WEIGHT", "3"},
                  {"CONCORD_NAME", "infer-1"}, {"CONCORD_SOCKET", "/tmp/s.sock"}, {"CONCORD_DISABLE", "0"},
                  {"CONCORD_INTERCEPT_STATS", "/tmp/stats.json"}, {"CONCORD_POLL_US", "20"}});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->tenant.cls, TenantClass::latency_critical);
  EXPECT_EQ(c->tenant.latency_target_ns, 2'500'000u);
  EXPECT_EQ(c->tenant.weight, 3u);
  EXPECT_EQ(c->tenant.name, "infer-1");
  EXPECT_EQ(c->socket_path, "/tmp/s.sock");
  EXPECT_EQ(c->stats_path, "/tmp/stats.json");
  EXPECT_EQ(c->poll_us, 20u);
  EXPECT_FALSE(c->disabled) << "CONCORD_DISABLE=0";
  EXPECT_EQ(parse({{"CONCORD_BE_POLL_US", "500"}})->be_poll_us, 500u);
  EXPECT_TRUE(parse({{"CONCORD_DISABLE", "1"}})->disabled);
  EXPECT_TRUE(parse({{"CONCORD_GREEN_CONTEXTS", "1"}})->green_contexts);
  EXPECT_TRUE(parse({})->room) << "room terms are honoured unless turned off";
  EXPECT_FALSE(parse({{"CONCORD_ROOM", "0"}})->room);
  EXPECT_TRUE(parse({})->reconnect);
  EXPECT_FALSE(parse({{"CONCORD_RECONNECT", "0"}})->reconnect);
  // An LC tenant the daemon does not grant LC runs as BE unless it asks to run unscheduled.
  EXPECT_EQ(c->tenant.on_lc_refused, ipc::LcRefusal::best_effort);
  auto strict = parse({{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "5"}, {"CONCORD_LC_REFUSED", "pass-through"}});
  ASSERT_TRUE(strict.is_ok()) << strict.status().to_string();
  EXPECT_EQ(strict->tenant.on_lc_refused, ipc::LcRefusal::refuse);
}

TEST(InterceptConfig, BadValuesAreNamed) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"CONCORD_CLASS", "rt"}}, "CONCORD_CLASS='rt'"},
      {{{"CONCORD_CLASS", "lc"}}, "needs CONCORD_TARGET_MS"},
      {{{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "0"}}, "CONCORD_TARGET_MS='0'"},
      {{{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "5ms"}}, "CONCORD_TARGET_MS='5ms'"},
      {{{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "nan"}}, "CONCORD_TARGET_MS='nan'"},
      {{{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "1e12"}}, "CONCORD_TARGET_MS='1e12'"},
      {{{"CONCORD_TARGET_MS", "5"}}, "for lc tenants only"},
      {{{"CONCORD_WEIGHT", "0"}}, "CONCORD_WEIGHT='0'"},
      {{{"CONCORD_WEIGHT", "-2"}}, "CONCORD_WEIGHT='-2'"},
      {{{"CONCORD_WEIGHT", "2000000"}}, "CONCORD_WEIGHT='2000000'"},
      {{{"CONCORD_NAME", std::string(65, 'a')}}, "longer than 64"},
      {{{"CONCORD_NAME", "tab\there"}}, "printable ASCII"},
      {{{"CONCORD_DISABLE", "yes"}}, "CONCORD_DISABLE='yes'"},
      {{{"CONCORD_POLL_US", "0"}}, "CONCORD_POLL_US='0'"},
      {{{"CONCORD_BE_POLL_US", "100001"}}, "CONCORD_BE_POLL_US='100001'"},
      {{{"CONCORD_MARKER_EVERY", "0"}}, "CONCORD_MARKER_EVERY='0'"},
      {{{"CONCORD_MARKER_EVERY", "65537"}}, "CONCORD_MARKER_EVERY='65537'"},
      {{{"CONCORD_MARKER_EVERY", "8x"}}, "CONCORD_MARKER_EVERY='8x'"},
      {{{"CONCORD_INTERCEPT_LOG", "on"}}, "CONCORD_INTERCEPT_LOG='on'"},
      {{{"CONCORD_GREEN_CONTEXTS", "yes"}}, "CONCORD_GREEN_CONTEXTS='yes'"},
      {{{"CONCORD_ROOM", "off"}}, "CONCORD_ROOM='off'"},
      {{{"CONCORD_RECONNECT", "yes"}}, "CONCORD_RECONNECT='yes'"},
      {{{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "5"}, {"CONCORD_LC_REFUSED", "fail"}}, "CONCORD_LC_REFUSED='fail'"},
      {{{"CONCORD_LC_REFUSED", "be"}}, "for lc tenants only"},
  };
  for (const auto& [env, want] : cases) {
    auto c = parse(env);
    ASSERT_FALSE(c.is_ok()) << want;
    EXPECT_EQ(c.status().code(), StatusCode::invalid_argument) << want;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message() << " lacks " << want;
  }
}

TEST(InterceptConfig, ProgramNamesAreMadeAcceptable) {
  EXPECT_EQ(sanitize_name("python3"), "python3");
  EXPECT_EQ(sanitize_name("a\nb"), "ab");
  EXPECT_EQ(sanitize_name(""), "tenant");
  EXPECT_EQ(sanitize_name(std::string(100, 'x')).size(), ipc::limits::kNameBytes);
}

TEST(InterceptSymbols, EveryEntryIsFoundByItsExportedName) {
  const auto entries = entry_points();
  ASSERT_EQ(entries.size(), static_cast<size_t>(Entry::count));
  std::set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_TRUE(names.insert(entries[i].exported).second) << entries[i].exported << " twice";
    EXPECT_EQ(find_exported(entries[i].exported), static_cast<int>(i));
    EXPECT_TRUE(maybe_intercepted(entries[i].exported)) << entries[i].exported;
  }
  EXPECT_EQ(find_exported("cuMemcpyAsync"), -1);
  EXPECT_FALSE(maybe_intercepted("cuMemcpyAsync"));
  EXPECT_FALSE(maybe_intercepted("malloc"));
  EXPECT_FALSE(maybe_intercepted(nullptr));
  EXPECT_EQ(static_cast<int>(Entry::LaunchKernel_ptsz), find_exported("cuLaunchKernel_ptsz"));
  EXPECT_EQ(static_cast<int>(Entry::GetProcAddress_v2), find_exported("cuGetProcAddress_v2"));
  EXPECT_EQ(static_cast<int>(Entry::MemAllocFromPoolAsync_ptsz), find_exported("cuMemAllocFromPoolAsync_ptsz"));
}

std::string resolved(const char* symbol, int version, uint64_t flags) {
  const int e = resolve_proc(symbol, version, flags);
  return e < 0 ? "-" : entry_points()[static_cast<size_t>(e)].exported;
}

TEST(InterceptSymbols, ProcAddressLookupsFollowTheDriversNamingRule) {
  // The stream flavour the flags ask for.
  EXPECT_EQ(resolved("cuLaunchKernel", 13000, kProcAddressLegacyStream), "cuLaunchKernel");
  EXPECT_EQ(resolved("cuLaunchKernel", 13000, 0), "cuLaunchKernel");
  EXPECT_EQ(resolved("cuLaunchKernel", 13000, kProcAddressPerThreadStream), "cuLaunchKernel_ptsz");
  EXPECT_EQ(resolved("cuGraphLaunch", 12000, kProcAddressPerThreadStream), "cuGraphLaunch_ptsz");
  // Per-thread asked of a version before the per-thread variant: the legacy one.
  EXPECT_EQ(resolved("cuLaunchKernel", 6000, kProcAddressPerThreadStream), "cuLaunchKernel");
  // No per-thread variant at all: the legacy one.
  EXPECT_EQ(resolved("cuStreamCreate", 12000, kProcAddressPerThreadStream), "cuStreamCreate");
  // The newest version the caller was built for.
  EXPECT_EQ(resolved("cuStreamDestroy", 3000, 0), "cuStreamDestroy");
  EXPECT_EQ(resolved("cuStreamDestroy", 12000, 0), "cuStreamDestroy_v2");
  EXPECT_EQ(resolved("cuStreamBeginCapture", 10000, 0), "cuStreamBeginCapture");
  EXPECT_EQ(resolved("cuStreamBeginCapture", 12080, 0), "cuStreamBeginCapture_v2");
  EXPECT_EQ(resolved("cuStreamBeginCapture", 12080, kProcAddressPerThreadStream), "cuStreamBeginCapture_v2_ptsz");
  EXPECT_EQ(resolved("cuCtxSynchronize", 12090, 0), "cuCtxSynchronize");
  EXPECT_EQ(resolved("cuCtxSynchronize", 13000, 0), "cuCtxSynchronize_v2");
  EXPECT_EQ(resolved("cuGetProcAddress", 11030, 0), "cuGetProcAddress");
  EXPECT_EQ(resolved("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
  EXPECT_EQ(resolved("cuMemAlloc", 13000, 0), "cuMemAlloc_v2");
  // Too old for any intercepted variant (cuMemAlloc's 32-bit v1), or not intercepted at all.
  EXPECT_EQ(resolved("cuMemAlloc", 3000, 0), "-");
  EXPECT_EQ(resolved("cuLaunchKernelEx", 11000, 0), "-");
  EXPECT_EQ(resolved("cuMemcpy", 13000, 0), "-");
  EXPECT_EQ(resolved("cuLaunchKernel_ptsz", 13000, 0), "-");  // lookups name the base
}

TEST(InterceptSymbols, TheExportListIsTheEntryPointsPlusDlsymAndTheClientApi) {
  std::ifstream in(CONCORD_INTERCEPT_EXPORTS_MAP);
  ASSERT_TRUE(in) << CONCORD_INTERCEPT_EXPORTS_MAP;
  std::stringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  body = std::regex_replace(body, std::regex(R"(/\*[\s\S]*?\*/)"), "");
  const auto global = body.find("global:");
  const auto local = body.find("local:");
  ASSERT_NE(global, std::string::npos);
  ASSERT_NE(local, std::string::npos);
  std::set<std::string> exported;
  const std::string list = body.substr(global + 7, local - global - 7);
  const std::regex word(R"([A-Za-z_][A-Za-z0-9_]*)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), word); it != std::sregex_iterator(); ++it) {
    exported.insert(it->str());
  }
  std::set<std::string> want = {"dlsym", "concord_request_begin", "concord_request_end"};
  for (const EntryPoint& e : entry_points()) want.insert(e.exported);
  EXPECT_EQ(exported, want);
}

// An H100 SXM's limits as the driver reports them (cuDeviceGetAttribute).
constexpr RoomDevice kH100{132, 233472, 232448, 1024, 2048, 32, 65536};

TEST(InterceptResidency, BlocksPerSmFollowThreadsRegistersAndSharedMemory) {
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 256, 0), 8) << "threads: 2048 / 256";
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 64, 0), 32) << "the block limit";
  EXPECT_EQ(resident_blocks(kH100, {64, 0}, 1024, 0), 1) << "registers: 64 x 1024 fill the file";
  EXPECT_EQ(resident_blocks(kH100, {33, 0}, 128, 0), 12) << "33 registers round up to 40 per thread (256 per warp): 65536 / 5120";
  EXPECT_EQ(resident_blocks(kH100, {32, 49152}, 128, 0), 4) << "48 KiB static plus 1 KiB reserved, 4 fit";
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 128, 100000), 2);
  // A partial warp takes a whole warp's registers and threads: 48 threads are two warps.
  EXPECT_EQ(resident_blocks(kH100, {64, 0}, 48, 0), 16) << "registers: 64 x 32 per warp, two warps a block";
}

TEST(InterceptResidency, PaddingHoldsAKernelAtTheCapAndNeverBelowItsOwnSize) {
  // 256 threads, 32 registers: 8 per SM; capped at 2 and at 4.
  const uint32_t two = padded_shared(kH100, {32, 0}, 256, 0, 2);
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 256, static_cast<int>(two)), 2);
  EXPECT_EQ(two % 128, 0u);
  const uint32_t four = padded_shared(kH100, {32, 0}, 256, 0, 4);
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 256, static_cast<int>(four)), 4);
  EXPECT_LT(four, two);
  // At or under the cap already (threads, registers or its own memory): untouched.
  EXPECT_EQ(padded_shared(kH100, {32, 0}, 256, 0, 8), 0u);
  EXPECT_EQ(padded_shared(kH100, {64, 0}, 1024, 0, 1), 0u);
  EXPECT_EQ(padded_shared(kH100, {32, 0}, 256, 4096, 0), 4096u) << "cap 0: no cap";
  EXPECT_EQ(padded_shared(kH100, {32, 0}, 128, 100000, 2), 100000u);
  // Its own dynamic memory is the floor, its static memory counts.
  const uint32_t own = padded_shared(kH100, {32, 0}, 128, 100000, 1);
  EXPECT_GE(own, 100000u);
  EXPECT_EQ(resident_blocks(kH100, {32, 0}, 128, static_cast<int>(own)), 1);
  const uint32_t with_static = padded_shared(kH100, {32, 49152}, 128, 0, 1);
  EXPECT_EQ(resident_blocks(kH100, {32, 49152}, 128, static_cast<int>(with_static)), 1);
  EXPECT_LE(static_cast<int>(with_static) + 49152, kH100.shared_per_block_max);
  // A part whose per-block maximum is under what the cap needs: the padding stops at the maximum
  // and more than the cap still fit (Room::shared_for then refuses to call it a cap).
  RoomDevice small = kH100;
  small.shared_per_block_max = 49152;
  const uint32_t short_of = padded_shared(small, {32, 0}, 256, 0, 1);
  EXPECT_EQ(short_of, 49152u);
  EXPECT_GT(resident_blocks(small, {32, 0}, 256, static_cast<int>(short_of)), 1);
  // Every cap, every block size: at most the cap, never past the per-block maximum.
  for (int threads : {32, 64, 96, 128, 256, 512, 1024}) {
    for (int cap = 1; cap <= 32; ++cap) {
      for (uint32_t own_shared : {0u, 1000u, 40000u}) {
        const uint32_t s = padded_shared(kH100, {24, 1024}, threads, own_shared, cap);
        EXPECT_GE(s, own_shared);
        EXPECT_LE(static_cast<int>(s) + 1024, kH100.shared_per_block_max);
        EXPECT_LE(resident_blocks(kH100, {24, 1024}, threads, static_cast<int>(s)), cap)
            << threads << " threads, cap " << cap << ", own " << own_shared;
      }
    }
  }
}

TEST(InterceptKernelId, IsFnv1aOfTheName) {
  static_assert(kernel_id_of("") == 14695981039346656037ull);
  EXPECT_EQ(kernel_id_of("a"), 0xaf63dc4c8601ec8cull);  // the published FNV-1a 64 of "a"
  EXPECT_NE(kernel_id_of("_Z6kernelPf"), kernel_id_of("_Z6kernelPi"));
  EXPECT_NE(handle_id_of(0x1000), handle_id_of(0x1010));
}

// The launch path's per-thread copies: a kept value is found again on its thread only, until an
// invalidation anywhere makes every copy stale; another cache of the same types keeps its own.
TEST(InterceptThreadCache, KeptValuesStayOnTheirThreadUntilInvalidated) {
  ThreadCache<int, int, struct TestTagA> cache;
  EXPECT_FALSE(cache.find(1).has_value()) << "empty at first";
  cache.keep(1, 10);
  ASSERT_TRUE(cache.find(1).has_value());
  EXPECT_EQ(*cache.find(1), 10);
  EXPECT_FALSE(cache.find(2).has_value());
  std::optional<int> elsewhere = 0;
  std::thread([&] { elsewhere = cache.find(1); }).join();
  EXPECT_FALSE(elsewhere.has_value()) << "another thread has no copy of this thread's value";
  cache.invalidate();
  EXPECT_FALSE(cache.find(1).has_value()) << "stale after an invalidation";
  cache.keep(1, 11);
  EXPECT_EQ(cache.find(1).value_or(0), 11);
}

TEST(InterceptThreadCache, TwoCachesOfOneTypeKeepSeparateCopies) {
  ThreadCache<int, int, struct TestTagB> a, b;
  EXPECT_FALSE(a.find(1).has_value());
  a.keep(1, 1);
  EXPECT_FALSE(b.find(1).has_value()) << "b starts its copy";
  b.keep(1, 2);
  EXPECT_EQ(b.find(1).value_or(0), 2);
  // The thread's one copy now belongs to b: a finds nothing (a miss, never b's value).
  EXPECT_FALSE(a.find(1).has_value());
}

}  // namespace
}  // namespace concord::intercept
