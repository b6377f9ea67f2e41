// The spec checker against each class of bad input: every problem reported with file, line,
// field and reason; nothing throws, hangs or is accepted silently.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "concord/device.h"
#include "concord/suite.h"
#include "concord/workload.h"

namespace concord {
namespace {

// The errors of a check, for assertions and failure messages.
std::vector<SpecDiagnostic> errors_of(const WorkloadCheck& c) {
  std::vector<SpecDiagnostic> out;
  for (const auto& d : c.diagnostics) {
    if (d.severity == SpecDiagnostic::Severity::error) out.push_back(d);
  }
  return out;
}

std::string all_of(const WorkloadCheck& c) {
  std::string s;
  for (const auto& d : c.diagnostics) s += d.to_string() + "\n";
  return s;
}

// Expects exactly one error, on `line` and `field`, whose reason holds `reason_part`.
void expect_one_error(const std::string& yaml, int line, const std::string& field, const std::string& reason_part,
                      const DeviceSpec* device = nullptr) {
  WorkloadCheck c = check_workload(yaml, "s.yaml", device);
  const auto errs = errors_of(c);
  ASSERT_EQ(errs.size(), 1u) << all_of(c);
  EXPECT_EQ(errs[0].file, "s.yaml");
  EXPECT_EQ(errs[0].line, line) << all_of(c);
  EXPECT_EQ(errs[0].field, field) << all_of(c);
  EXPECT_NE(errs[0].reason.find(reason_part), std::string::npos) << all_of(c);
  // parse_workload (no device) fails on the same spec with the same text.
  if (device) return;
  auto w = parse_workload(yaml, "s.yaml");
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find(errs[0].to_string()), std::string::npos) << w.status().message();
}

std::string one_tenant(const std::string& tenant_fields, const std::string& kernels = "[{kernel: bfs}]") {
  return "tenants:\n  - name: a\n" + tenant_fields + "    kernels: " + kernels + "\n";
}

TEST(SpecCheck, ReportsEveryProblemInLineOrder) {
  const std::string yaml =
      "tenants:\n"
      "  - name: a\n"
      "    requests: 0\n"                       // line 3
      "    kernels:\n"
      "      - {kernel: nosuch}\n"              // line 5
      "      - {kernel: bfs, size: -1}\n"       // line 6
      "  - name: b\n"
      "    class: XX\n"                         // line 8
      "    kernels: [{kernel: bfs}]\n";
  WorkloadCheck c = check_workload(yaml, "many.yaml");
  EXPECT_FALSE(c.ok());
  const auto errs = errors_of(c);
  ASSERT_EQ(errs.size(), 4u) << all_of(c);
  EXPECT_EQ(errs[0].line, 3);
  EXPECT_EQ(errs[0].field, "tenants[0].requests");
  EXPECT_EQ(errs[1].line, 5);
  EXPECT_EQ(errs[1].field, "tenants[0].kernels[0].kernel");
  EXPECT_EQ(errs[2].line, 6);
  EXPECT_EQ(errs[2].field, "tenants[0].kernels[1].size");
  EXPECT_EQ(errs[3].line, 8);
  EXPECT_EQ(errs[3].field, "tenants[1].class");
  // The one-error API fails on the first and names them all.
  auto w = parse_workload(yaml, "many.yaml");
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::parse_error);
  for (const auto& e : errs) EXPECT_NE(w.status().message().find(e.to_string()), std::string::npos) << e.to_string();
  EXPECT_EQ(w.status().message().rfind("many.yaml:3: field 'tenants[0].requests'", 0), 0u) << w.status().message();
}

TEST(SpecCheck, AFloodOfProblemsIsCountedNotDropped) {
  std::string yaml = "tenants:\n";
  for (int i = 0; i < 250; ++i) {
    yaml += "  - {name: t" + std::to_string(i) + ", requests: 0, class: XX, target_ms: x, kernels: [{kernel: nosuch}, {kernel: bfs, size: 0}]}\n";
  }
  WorkloadCheck c = check_workload(yaml, "flood.yaml");
  ASSERT_EQ(c.diagnostics.size(), 1001u);
  EXPECT_EQ(c.diagnostics.back().severity, SpecDiagnostic::Severity::error);
  EXPECT_NE(c.diagnostics.back().reason.find("250 more errors"), std::string::npos) << c.diagnostics.back().reason;
  EXPECT_NE(c.status().message().find("more errors"), std::string::npos);
}

TEST(SpecCheck, GoodSpecHasNoDiagnostics) {
  WorkloadCheck c = check_workload(one_tenant("    requests: 3\n"), "ok.yaml");
  EXPECT_TRUE(c.ok()) << all_of(c);
  EXPECT_TRUE(c.diagnostics.empty());
  EXPECT_TRUE(c.status().is_ok());
  ASSERT_EQ(c.workload.tenants.size(), 1u);
  EXPECT_EQ(c.workload.tenants[0].requests, 3);
}

TEST(SpecCheck, NonScalarKeysAreErrorsNotExceptions) {
  expect_one_error("tenants:\n  - name: a\n    ? [x, y]\n    : 1\n    kernels: [{kernel: bfs}]\n", 3, "tenants[0]",
                   "a key must be a plain name");
  expect_one_error("{a: 1}: 2\ntenants: [{name: a, kernels: [{kernel: bfs}]}]\n", 1, "", "a key must be a plain name");
  // A non-scalar where a scalar is wanted, anywhere.
  expect_one_error(one_tenant("", "[{kernel: [bfs]}]"), 3, "tenants[0].kernels[0].kernel", "must be a scalar");
  expect_one_error(one_tenant("    class: {LC: 1}\n"), 3, "tenants[0].class", "must be a scalar");
}

TEST(SpecCheck, YamlThatYamlCppRejectsIsReportedNotThrown) {
  WorkloadCheck deep = check_workload(std::string(20000, '[') + std::string(20000, ']'), "deep.yaml");
  EXPECT_FALSE(deep.ok());
  WorkloadCheck bad = check_workload("tenants: [a, b\n", "bad.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(errors_of(bad)[0].reason.find("bad YAML"), std::string::npos);
  WorkloadCheck empty = check_workload("", "empty.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(errors_of(empty)[0].reason.find("empty"), std::string::npos);
  // An alias that contains itself: a cycle the checker must not follow forever.
  WorkloadCheck cycle = check_workload("tenants: &t [{name: a, kernels: *t}]\n", "cycle.yaml");
  EXPECT_FALSE(cycle.ok());
}

TEST(SpecCheck, RequestsBeyondTheLimitAreRefusedNotWrapped) {
  for (const char* v : {"2147483648", "4294967296", "4294967297", "9223372036854775807"}) {
    expect_one_error(one_tenant(std::string("    requests: ") + v + "\n"), 3, "tenants[0].requests", "at most 1000000");
  }
  expect_one_error(one_tenant("    requests: 99999999999999999999\n"), 3, "tenants[0].requests", "out of range");
  expect_one_error(one_tenant("    requests: -4294967296\n"), 3, "tenants[0].requests", "must be > 0");
  // Decimal, never octal or hex as yaml-cpp would read them.
  WorkloadCheck octal = check_workload(one_tenant("    requests: 010\n"), "o.yaml");
  ASSERT_TRUE(octal.ok()) << all_of(octal);
  EXPECT_EQ(octal.workload.tenants[0].requests, 10);
  expect_one_error(one_tenant("    requests: 0x10\n"), 3, "tenants[0].requests", "positive integer");
  expect_one_error(one_tenant("    requests: 1e3\n"), 3, "tenants[0].requests", "positive integer");
}

TEST(SpecCheck, CountsAndLaunchesUseCheckedLimits) {
  expect_one_error(one_tenant("", "[{kernel: bfs, count: 4294967297}]"), 3, "tenants[0].kernels[0].count", "at most 1000000");
  expect_one_error(one_tenant("", "[{kernel: bfs, count: 2147483648}]"), 3, "tenants[0].kernels[0].count", "at most");
  // Each count within its limit, their sum over the launches a request may have.
  expect_one_error(one_tenant("", "[{kernel: bfs, count: 1000000}, {kernel: bfs, count: 1}]"), 3, "tenants[0].kernels",
                   "1000001 launches");
  // requests x launches per request over the workload's limit, though each is within its own.
  expect_one_error(one_tenant("    requests: 1000000\n", "[{kernel: bfs, count: 101}]"), 2, "tenants[0]",
                   "pass the limit of 100000000");
  WorkloadCheck at_limit = check_workload(one_tenant("    requests: 1000000\n", "[{kernel: bfs, count: 100}]"), "l.yaml");
  EXPECT_TRUE(at_limit.ok()) << all_of(at_limit);
  EXPECT_EQ(at_limit.workload.tenants[0].launches_per_request() * at_limit.workload.tenants[0].requests, 100'000'000);
}

TEST(SpecCheck, SizesAndLogicalBlocksWithinLimits) {
  expect_one_error(one_tenant("", "[{kernel: bfs, size: 1099511627777}]"), 3, "tenants[0].kernels[0].size", "at most");
  // A size within the limit whose logical grid would not fit a launch.
  expect_one_error(one_tenant("", "[{kernel: hotspot, size: 1000000000}]"), 3, "tenants[0].kernels[0].size",
                   "logical blocks");
  auto k = make_suite_kernel("hotspot", int64_t{1} << 40);
  ASSERT_FALSE(k.is_ok());
  EXPECT_EQ(k.status().code(), StatusCode::invalid_argument);
}

TEST(SpecCheck, NumbersMustBeFiniteAndInRange) {
  for (const char* v : {".nan", ".NaN", ".inf", "-.inf", "nan", "inf", "1e400"}) {
    expect_one_error(one_tenant(std::string("    class: LC\n    target_ms: ") + v + "\n"), 4, "tenants[0].target_ms",
                     "finite");
    expect_one_error(one_tenant(std::string("    arrival: {poisson: ") + v + "}\n"), 3, "tenants[0].arrival.poisson",
                     "finite");
    expect_one_error(one_tenant(std::string("    arrival: {timestamps: [0, ") + v + "]}\n"), 3,
                     "tenants[0].arrival.timestamps[1]", "finite");
  }
  expect_one_error(one_tenant("    class: LC\n    target_ms: 4000000\n"), 4, "tenants[0].target_ms", "at most");
  expect_one_error(one_tenant("    arrival: {poisson: 1e8}\n"), 3, "tenants[0].arrival.poisson", "at most");
  expect_one_error(one_tenant("    arrival: {timestamps: [0, 2e6]}\n"), 3, "tenants[0].arrival.timestamps[1]", "at most");
  expect_one_error(one_tenant("    arrival: {timestamps: [-1]}\n"), 3, "tenants[0].arrival.timestamps[0]", ">= 0");
  expect_one_error(one_tenant("    class: LC\n    target_ms: 0\n"), 4, "tenants[0].target_ms", "> 0");
  WorkloadCheck ok = check_workload(one_tenant("    class: LC\n    target_ms: +2.5e0\n"), "f.yaml");
  ASSERT_TRUE(ok.ok()) << all_of(ok);
  EXPECT_DOUBLE_EQ(ok.workload.tenants[0].latency_target, 0.0025);
}

TEST(SpecCheck, RepeatedKeysNameBothLines) {
  expect_one_error("tenants:\n  - name: a\n    requests: 2\n    requests: 3\n    kernels: [{kernel: bfs}]\n", 4,
                   "tenants[0].requests", "given at line 3 and again at line 4");
  expect_one_error("name: x\nname: y\ntenants: [{name: a, kernels: [{kernel: bfs}]}]\n", 2, "name",
                   "given at line 1 and again at line 2");
  expect_one_error(one_tenant("", "[{kernel: bfs, size: 4096, size: 8192}]"), 3, "tenants[0].kernels[0].size",
                   "given at line 3 and again at line 3");
}

TEST(SpecCheck, ASecondDocumentIsRefused) {
  expect_one_error(one_tenant("") + "---\n" + one_tenant(""), 5, "", "second YAML document");
  // A lone ',' as a document: yaml-cpp's LoadAll would yield empty documents forever.
  expect_one_error(one_tenant("") + "---\n,\n", 5, "", "second YAML document");
  EXPECT_FALSE(check_workload(",\n", "comma.yaml").ok());
}

TEST(SpecCheck, TooManyTenantsAndAnOversizedSpec) {
  std::string many = "tenants:\n";
  for (int i = 0; i <= spec_limits::kTenants; ++i) many += "  - {name: t" + std::to_string(i) + ", kernels: [{kernel: bfs}]}\n";
  expect_one_error(many, 2, "tenants", "over the limit of 256");
  const std::string huge = one_tenant("") + "# " + std::string(spec_limits::kSpecBytes, 'x') + "\n";
  expect_one_error(huge, 0, "", "larger than the limit");
}

class SpecFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("spec_check_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write_spec(const std::string& timestamps) {
    const std::string path = (dir_ / "spec.yaml").string();
    std::ofstream(path) << "tenants:\n  - name: a\n    arrival: {timestamps: " << timestamps
                        << "}\n    kernels: [{kernel: bfs}]\n";
    return path;
  }
  // The one error of the spec, on line 3 and the timestamps field.
  SpecDiagnostic only_error(const std::string& spec) {
    WorkloadCheck c = check_workload_file(spec);
    const auto errs = errors_of(c);
    EXPECT_EQ(errs.size(), 1u) << all_of(c);
    return errs.empty() ? SpecDiagnostic{} : errs[0];
  }
  std::filesystem::path dir_;
};

TEST_F(SpecFiles, TimestampsFromDevicesAndFifosAreRefusedAtOnce) {
  SpecDiagnostic zero = only_error(write_spec("/dev/zero"));
  EXPECT_EQ(zero.field, "tenants[0].arrival.timestamps");
  EXPECT_EQ(zero.line, 3);
  EXPECT_NE(zero.reason.find("not a regular file (a character device)"), std::string::npos) << zero.reason;
  const auto fifo = dir_ / "arrivals.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  SpecDiagnostic f = only_error(write_spec(fifo.string()));
  EXPECT_NE(f.reason.find("a FIFO"), std::string::npos) << f.reason;
  SpecDiagnostic d = only_error(write_spec(dir_.string()));
  EXPECT_NE(d.reason.find("is a directory"), std::string::npos) << d.reason;
}

TEST_F(SpecFiles, TimestampsFileErrorsNeverQuoteTheFile) {
  std::ofstream(dir_ / "secret.txt") << "root:hunter2:0:0\n";
  SpecDiagnostic e = only_error(write_spec("secret.txt"));
  EXPECT_EQ(e.file, (dir_ / "secret.txt").string());
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.field, "tenants[0].arrival.timestamps");
  EXPECT_NE(e.reason.find("not a number"), std::string::npos);
  EXPECT_EQ(e.to_string().find("hunter2"), std::string::npos) << e.to_string();
  // Finite numbers in range only, and the line of each bad one.
  std::ofstream(dir_ / "nan.txt") << "0\n# comment\n0.5\nnan\n";
  SpecDiagnostic n = only_error(write_spec("nan.txt"));
  EXPECT_EQ(n.line, 4);
  EXPECT_NE(n.reason.find("finite"), std::string::npos) << n.reason;
}

TEST_F(SpecFiles, TimestampsFileSizeIsLimited) {
  const auto big = dir_ / "big.txt";
  std::ofstream(big) << "0\n";
  std::filesystem::resize_file(big, static_cast<uintmax_t>(spec_limits::kTimestampFileBytes) + 1);  // sparse
  SpecDiagnostic e = only_error(write_spec("big.txt"));
  EXPECT_NE(e.reason.find("larger than the limit"), std::string::npos) << e.reason;
}

TEST_F(SpecFiles, DirectoryOrMissingSpecIsSaidPlainly) {
  WorkloadCheck dir = check_workload_file(dir_.string());
  ASSERT_EQ(errors_of(dir).size(), 1u);
  EXPECT_NE(errors_of(dir)[0].reason.find("is a directory"), std::string::npos) << all_of(dir);
  auto w = load_workload_file(dir_.string());
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("is a directory"), std::string::npos);
  EXPECT_EQ(w.status().message().find("top level"), std::string::npos);
  EXPECT_EQ(load_workload_file((dir_ / "none.yaml").string()).status().code(), StatusCode::not_found);
  EXPECT_FALSE(load_workload_file("/dev/zero").is_ok());
}

TEST(SpecCheck, BlocksThatDoNotFitAnSmAreRefusedOnTheDevice) {
  const DeviceSpec h200 = h200_spec();
  // lbm: 80 registers per thread; its 1024-thread max variant needs 81920 of an SM's 65536.
  expect_one_error(one_tenant("", "[{kernel: lbm, variant: max}]"), 3, "tenants[0].kernels[0].variant",
                   "one block does not fit on an SM", &h200);
  // Its default (mid) runs; the max variant a policy might pick is a warning.
  WorkloadCheck mid = check_workload(one_tenant("", "[{kernel: lbm}]"), "s.yaml", &h200);
  EXPECT_TRUE(mid.ok()) << all_of(mid);
  ASSERT_EQ(mid.diagnostics.size(), 1u);
  EXPECT_EQ(mid.diagnostics[0].severity, SpecDiagnostic::Severity::warning);
  EXPECT_NE(mid.diagnostics[0].reason.find("'max'"), std::string::npos) << all_of(mid);
  EXPECT_NE(mid.diagnostics[0].to_string().find("warning: "), std::string::npos);
  // One warning per variant, however many steps run it.
  WorkloadCheck twice = check_workload(one_tenant("", "[{kernel: lbm}, {kernel: lbm, count: 2}]"), "s.yaml", &h200);
  EXPECT_TRUE(twice.ok());
  EXPECT_EQ(twice.diagnostics.size(), 1u) << all_of(twice);
  // Without a device, no device check.
  EXPECT_TRUE(check_workload(one_tenant("", "[{kernel: lbm, variant: max}]"), "s.yaml").ok());
  // Shared memory against a device with little of it: sgemm's tiles scale with the block.
  DeviceSpec small = h200;
  small.sm.max_shared_bytes = 1024;
  expect_one_error(one_tenant("", "[{kernel: sgemm, size: 1024}]"), 3, "tenants[0].kernels[0].kernel", "shared memory",
                   &small);
}

TEST(SpecCheck, SizeRulesAreStatedWhereTheyAreChecked) {
  // What `concord kernels` prints and what the check says come from one rule.
  for (const auto& [kernel, size, rule] : std::vector<std::tuple<std::string, int, std::string>>{
           {"matmul", 1000, "a multiple of 32"}, {"tc_gemm", 1000, "a multiple of 32"},
           {"sgemm", 1024 + 32, "a multiple of 128"}, {"fft_stage", 3000, "a power of two"}}) {
    const SuiteEntry* entry = nullptr;
    for (const auto& e : suite_catalog()) {
      if (e.name == kernel) entry = &e;
    }
    ASSERT_NE(entry, nullptr);
    const auto stated = entry->description.find("(sizes: " + rule);
    ASSERT_NE(stated, std::string::npos) << entry->description;
    const std::string statement = entry->description.substr(stated);
    auto k = make_suite_kernel(kernel, size);
    ASSERT_FALSE(k.is_ok()) << kernel;
    EXPECT_NE(k.status().message().find(statement), std::string::npos) << k.status().message() << " vs " << statement;
    expect_one_error(one_tenant("", "[{kernel: " + kernel + ", size: " + std::to_string(size) + "}]"), 3,
                     "tenants[0].kernels[0].size", "is not " + rule);
  }
  // Every kernel states its minimum, and its default size meets its own rule.
  for (const auto& e : suite_catalog()) {
    EXPECT_NE(e.description.find("at least " + std::to_string(e.min_size) + ")"), std::string::npos) << e.description;
    EXPECT_TRUE(make_suite_kernel(e.name, e.default_size).is_ok()) << e.name;
    EXPECT_FALSE(make_suite_kernel(e.name, e.min_size - 1).is_ok()) << e.name;
  }
}

}  // namespace
}  // namespace concord
