// libconcord_intercept.so on the GPU: a CUDA program (tests/gpu/intercept_app.cu) gives the same,
// correct results with stream order kept when the library is preloaded, and the library's own
// counters show that it saw every launch.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "intercept_support.h"

namespace concord::testing {
namespace {

using json = nlohmann::json;

TEST(Intercept, TheProgramIsCorrectWithoutTheLibrary) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  EXPECT_TRUE(plain.line.at("ok").get<bool>()) << plain.stdout_text;
}

TEST(Intercept, WithoutADaemonTheLibraryPassesEveryLaunchThroughAndResultsAreIdentical) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  const std::string stats = scratch_path("passthrough_stats.json");
  const RunResult preloaded = run_app(paths, "chains",
                                      {{"LD_PRELOAD", paths.library},
                                       {"CONCORD_SOCKET", scratch_path("no_daemon_here.sock")},
                                       {"CONCORD_INTERCEPT_STATS", stats}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>()) << preloaded.stdout_text;
  EXPECT_EQ(preloaded.line.at("checksum"), plain.line.at("checksum"));
  // One line says why it runs pass-through.
  EXPECT_NE(preloaded.stderr_text.find("concord-intercept: pass-through"), std::string::npos) << preloaded.stderr_text;
  const json s = read_json(stats);
  EXPECT_EQ(s.at("mode"), "pass_through") << s.dump();
  // Every launch went through a hook: the runtime's, the driver's found by cuGetProcAddress, the
  // graph launches, and the kernels launched into the capturing stream.
  EXPECT_GE(s.at("launches").get<int>(), plain.line.at("launches_made").get<int>()) << s.dump();
  EXPECT_EQ(s.at("launches"), s.at("passed_through")) << s.dump();
  EXPECT_GT(s.at("allocations").get<int>(), 0) << "cudaMalloc reaches cuMemAlloc_v2: " << s.dump();
}

TEST(Intercept, DisabledTheLibraryPassesThroughSilently) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const std::string stats = scratch_path("disabled_stats.json");
  const RunResult preloaded =
      run_app(paths, "chains", {{"LD_PRELOAD", paths.library}, {"CONCORD_DISABLE", "1"}, {"CONCORD_INTERCEPT_STATS", stats}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>());
  EXPECT_EQ(preloaded.stderr_text.find("concord-intercept"), std::string::npos) << preloaded.stderr_text;
  const json s = read_json(stats);
  EXPECT_EQ(s.at("mode"), "pass_through");
  EXPECT_EQ(s.at("launches"), s.at("passed_through"));
}

TEST(Intercept, ABadSettingIsNamedAndTheProgramStillFinishes) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult preloaded = run_app(paths, "chains", {{"LD_PRELOAD", paths.library}, {"CONCORD_CLASS", "realtime"}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>());
  EXPECT_NE(preloaded.stderr_text.find("CONCORD_CLASS='realtime'"), std::string::npos) << preloaded.stderr_text;
}

}  // namespace
}  // namespace concord::testing
