#include <gtest/gtest.h>

#include <cctype>
#include <fstream>

#include "concord/suite.h"
#include "concord/workload.h"

namespace concord {
namespace {

TEST(Workload, ParsesGoodSpec) {
  auto w = parse_workload(R"(
name: demo
tenants:
  - name: infer
    class: LC
    target_ms: 5
    requests: 20
    arrival: {poisson: 200}
    kernels:
      - {kernel: tc_gemm, size: 2048, count: 3}
      - {kernel: vector_add, size: 1048576, variant: max}
  - name: train
    raise_type: MEM
    kernels:
      - {kernel: hotspot}
)", "demo.yaml");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  ASSERT_EQ(w->tenants.size(), 2u);
  const TenantSpec& lc = w->tenants[0];
  EXPECT_EQ(lc.cls, TenantClass::latency_critical);
  EXPECT_DOUBLE_EQ(lc.latency_target, 0.005);
  EXPECT_EQ(lc.requests, 20);
  EXPECT_EQ(lc.arrival.kind, ArrivalProcess::Kind::poisson);
  EXPECT_DOUBLE_EQ(lc.arrival.rate_per_s, 200);
  EXPECT_EQ(lc.launches_per_request(), 4);
  EXPECT_EQ(lc.steps[1].kernel.variant(lc.steps[1].kernel.default_variant).name, "max");
  const TenantSpec& be = w->tenants[1];
  EXPECT_EQ(be.cls, TenantClass::best_effort);
  EXPECT_EQ(be.arrival.kind, ArrivalProcess::Kind::closed_loop);
  EXPECT_EQ(be.steps[0].kernel.size, 4096);  // the suite's default size
  EXPECT_EQ(lc.labels.count("raise_type"), 0u);  // read from the measured vector
  ASSERT_EQ(be.labels.count("raise_type"), 1u);
  EXPECT_EQ(be.labels.at("raise_type"), "MEM");
}

TEST(Workload, TimestampsInlineAndFromFile) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "arrivals.txt") << "# seconds\n0.0\n0.001\n\n0.0025 # late\n";
  std::ofstream(dir + "ts.yaml") << "tenants:\n  - name: a\n    class: LC\n    target_ms: 1\n"
                                    "    arrival: {timestamps: arrivals.txt}\n    kernels: [{kernel: vector_add}]\n"
                                    "  - name: b\n    arrival: {timestamps: [0, 0.5]}\n    kernels: [{kernel: bfs}]\n";
  auto w = load_workload_file(dir + "ts.yaml");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->tenants[0].arrival.timestamps, (std::vector<Seconds>{0.0, 0.001, 0.0025}));
  EXPECT_EQ(w->tenants[0].requests, 3);
  EXPECT_EQ(w->tenants[1].requests, 2);
}

struct BadCase {
  const char* what;
  const char* yaml;
  const char* expect_field;
  int expect_line;
};

class BadSpec : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadSpec, ReportsFileLineFieldReason) {
  const BadCase& c = GetParam();
  auto w = parse_workload(c.yaml, "bad.yaml");
  ASSERT_FALSE(w.is_ok()) << c.what;
  const std::string msg = w.status().message();
  EXPECT_EQ(w.status().code(), StatusCode::parse_error) << msg;
  EXPECT_NE(msg.find("bad.yaml:" + std::to_string(c.expect_line) + ":"), std::string::npos) << c.what << ": " << msg;
  EXPECT_NE(msg.find(c.expect_field), std::string::npos) << c.what << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Workload, BadSpec,
    ::testing::Values(
        BadCase{"unknown kernel", "tenants:\n  - name: a\n    kernels:\n      - {kernel: nosuch}\n",
                "tenants[0].kernels[0].kernel", 4},
        BadCase{"negative size", "tenants:\n  - name: a\n    kernels:\n      - {kernel: bfs, size: -5}\n",
                "tenants[0].kernels[0].size", 4},
        BadCase{"zero size", "tenants:\n  - name: a\n    kernels:\n      - {kernel: bfs, size: 0}\n",
                "tenants[0].kernels[0].size", 4},
        BadCase{"LC without target", "tenants:\n  - name: a\n    class: LC\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].target_ms", 2},
        BadCase{"bad YAML", "tenants:\n  - name: a\n    kernels: [{kernel: bfs}\n", "bad YAML", 4},
        BadCase{"unknown field", "tenants:\n  - name: a\n    kernals: [{kernel: bfs}]\n", "tenants[0].kernals", 3},
        BadCase{"bad class", "tenants:\n  - name: a\n    class: XX\n    kernels: [{kernel: bfs}]\n", "tenants[0].class", 3},
        BadCase{"size not a number", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, size: big}]\n",
                "tenants[0].kernels[0].size", 3},
        BadCase{"no tenants", "name: x\n", "tenants", 1},
        BadCase{"empty kernels", "tenants:\n  - name: a\n    kernels: []\n", "tenants[0].kernels", 3},
        BadCase{"duplicate tenant", "tenants:\n  - {name: a, kernels: [{kernel: bfs}]}\n  - {name: a, kernels: [{kernel: bfs}]}\n",
                "duplicate tenant name", 3},
        BadCase{"negative poisson rate", "tenants:\n  - name: a\n    arrival: {poisson: -3}\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].arrival.poisson", 3},
        BadCase{"unordered timestamps", "tenants:\n  - name: a\n    arrival: {timestamps: [0.2, 0.1]}\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].arrival.timestamps", 3},
        BadCase{"unknown variant", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, variant: huge}]\n",
                "tenants[0].kernels[0].variant", 3},
        BadCase{"dims not three", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, dims: [32, 64]}]\n",
                "tenants[0].kernels[0].dims", 3},
        BadCase{"dims descending", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, dims: [128, 64, 32]}]\n",
                "tenants[0].kernels[0].dims", 3},
        BadCase{"dims a body cannot run", "tenants:\n  - name: a\n    kernels: [{kernel: matmul, size: 1024, dims: [16, 64, 144]}]\n",
                "tenants[0].kernels[0].dims", 3},
        BadCase{"dims of a library kernel", "tenants:\n  - name: a\n    kernels: [{kernel: cublas_gemm, size: 1024, dims: [64, 128, 256]}]\n",
                "tenants[0].kernels[0].dims", 3},
        BadCase{"dims not numbers", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, dims: [8, x, 32]}]\n",
                "tenants[0].kernels[0].dims[1]", 3},
        BadCase{"bad raise_type", "tenants:\n  - name: a\n    raise_type: GPU\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].raise_type", 3},
        BadCase{"zero requests", "tenants:\n  - name: a\n    requests: 0\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].requests", 3},
        BadCase{"a quoted count", "tenants:\n  - name: a\n    kernels: [{kernel: bfs, count: \"12\"}]\n",
                "tenants[0].kernels[0].count': must be a positive integer, got the string", 3},
        BadCase{"a quoted target", "tenants:\n  - name: a\n    class: LC\n    target_ms: '5'\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].target_ms': must be a number, got the string", 4},
        BadCase{"requests disagree with timestamps",
                "tenants:\n  - name: a\n    requests: 3\n    arrival: {timestamps: [0, 1]}\n    kernels: [{kernel: bfs}]\n",
                "tenants[0].requests", 3}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.what;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// Nesting past the spec limit is named as such, in blocks or in brackets, where yaml-cpp alone says
// "bad file"; a spec's ordinary depth passes.
TEST(Workload, DeepNestingNamesTheLimit) {
  for (const std::string& text :
       {"tenants: " + std::string(1000, '[') + std::string(1000, ']') + "\n",
        [] {
          std::string t = "tenants:\n";
          for (int i = 1; i < 200; ++i) t += std::string(static_cast<size_t>(i), ' ') + "-\n";
          return t;
        }()}) {
    auto w = parse_workload(text, "deep.yaml");
    ASSERT_FALSE(w.is_ok());
    EXPECT_NE(w.status().message().find("nesting deeper than 64 levels (the spec limit)"), std::string::npos)
        << w.status().message();
  }
  auto ok = parse_workload("tenants:\n  - name: a\n    kernels:\n      - {kernel: bfs}\n", "ok.yaml");
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
  // Brackets inside a double-quoted string, after an escaped quote, are the string's: no nesting.
  auto quoted = parse_workload("tenants:\n  - name: \"a\\\" " + std::string(100, '[') + "\"\n    kernels:\n      - {kernel: bfs}\n",
                               "quoted.yaml");
  if (!quoted.is_ok()) {
    EXPECT_EQ(quoted.status().message().find("nesting deeper"), std::string::npos) << quoted.status().message();
  }
}

TEST(Workload, MissingFileAndMissingTimestampsFile) {
  EXPECT_EQ(load_workload_file("/nonexistent/spec.yaml").status().code(), StatusCode::not_found);
  auto w = parse_workload("tenants:\n  - name: a\n    arrival: {timestamps: /nonexistent.txt}\n    kernels: [{kernel: bfs}]\n",
                          "x.yaml");
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("cannot open timestamps file"), std::string::npos);
}

TEST(Suite, EveryKernelBuildsWithConsistentVariants) {
  ASSERT_GE(suite_catalog().size(), 20u);
  for (const SuiteEntry& e : suite_catalog()) {
    auto k = make_suite_kernel(e.name, e.default_size);
    ASSERT_TRUE(k.is_ok()) << e.name;
    EXPECT_EQ(k->elastic, e.elastic);
    ASSERT_GE(k->variant_count(), 1) << e.name;
    double work = -1;
    for (const KernelVariant& v : k->variants) {
      EXPECT_GT(v.logical_blocks, 0) << e.name;
      EXPECT_GT(v.flops_per_block + v.bytes_per_block, 0) << e.name;
      // Every variant covers the same total work (up to the last partial block).
      const double total = v.flops_per_block * static_cast<double>(v.logical_blocks);
      if (work < 0) work = total;
      EXPECT_NEAR(total / work, 1.0, 0.05) << e.name << " " << v.name;
    }
  }
  EXPECT_EQ(make_suite_kernel("nosuch", 1).status().code(), StatusCode::not_found);
  EXPECT_EQ(make_suite_kernel("bfs", 0).status().code(), StatusCode::invalid_argument);
}

TEST(Suite, BlockSizesOverrideVariantsUnderTheirOwnNames) {
  // RAISE Table IV's Gaussian elimination: 8, 16 and 32 threads per block.
  auto ge = make_suite_kernel("gaussian", 2048, BlockSizes{8, 16, 32});
  ASSERT_TRUE(ge.is_ok()) << ge.status().to_string();
  auto usual = make_suite_kernel("gaussian", 2048);
  ASSERT_TRUE(usual.is_ok());
  ASSERT_EQ(ge->variant_count(), 3);
  EXPECT_EQ(ge->variant(0).name, "min@8");
  EXPECT_EQ(ge->variant(2).name, "max@32");
  EXPECT_EQ(ge->variant(0).threads_per_block, 8);
  // Same total work, in more and smaller blocks.
  EXPECT_EQ(ge->variant(0).logical_blocks, usual->variant(0).logical_blocks * 8);
  EXPECT_NEAR(ge->variant(0).flops_per_block * static_cast<double>(ge->variant(0).logical_blocks),
              usual->variant(0).flops_per_block * static_cast<double>(usual->variant(0).logical_blocks), 1.0);
  // A slot at its usual size keeps its usual name.
  auto mixed = make_suite_kernel("bfs", 4096, BlockSizes{32, 256, 1024});
  ASSERT_TRUE(mixed.is_ok());
  EXPECT_EQ(mixed->variant(0).name, "min@32");
  EXPECT_EQ(mixed->variant(1).name, "mid");
  // find_variant: the slot by its plain name, or by name and block size.
  EXPECT_EQ(ge->find_variant("min"), 0);
  EXPECT_EQ(ge->find_variant("min@8"), 0);
  EXPECT_EQ(ge->find_variant("max"), 2);
  EXPECT_FALSE(ge->find_variant("min@16").has_value());
  EXPECT_EQ(usual->find_variant("mid@256"), 1);
  // Rebuilt from a variant name, as the profiler's worker does.
  auto back = make_suite_kernel_with_variant("gaussian", 2048, "min@8");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->variant(*back->find_variant("min@8")).threads_per_block, 8);
  EXPECT_EQ(back->variant(1).name, "mid");
  EXPECT_TRUE(make_suite_kernel_with_variant("gaussian", 2048, "mid").is_ok());
  EXPECT_FALSE(make_suite_kernel_with_variant("gaussian", 2048, "tiny@8").is_ok());
  EXPECT_FALSE(make_suite_kernel_with_variant("gaussian", 2048, "min@x").is_ok());
  EXPECT_FALSE(make_suite_kernel_with_variant("cublas_gemm", 1024, "min@64").is_ok());
  // Bodies refuse what they cannot run, with the reason.
  auto mm = make_suite_kernel("matmul", 1024, BlockSizes{64, 144, 1024});
  ASSERT_FALSE(mm.is_ok());
  EXPECT_NE(mm.status().message().find("144"), std::string::npos);
  EXPECT_FALSE(make_suite_kernel("tc_gemm", 1024, BlockSizes{32, 64, 512}).is_ok());
  EXPECT_FALSE(make_suite_kernel("sgemm", 1024, BlockSizes{12, 256, 1024}).is_ok());
  EXPECT_FALSE(make_suite_kernel("bfs", 4096, BlockSizes{0, 64, 128}).is_ok());
  EXPECT_FALSE(make_suite_kernel("bfs", 4096, BlockSizes{32, 64, 2048}).is_ok());
  EXPECT_TRUE(make_suite_kernel("fft_stage", 4096, BlockSizes{64, 128, 156}).is_ok());  // Table IV's CU
}

TEST(Workload, DimsGiveTheStepsVariantsTheirBlockSizes) {
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: srad, size: 1024, dims: [16, 64, 256], variant: min}]}\n"
                          "  - {name: b, kernels: [{kernel: srad, size: 1024}]}\n",
                          "d.yaml");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  const KernelSpec& k = w->tenants[0].steps[0].kernel;
  EXPECT_EQ(k.variant(0).threads_per_block, 16);
  EXPECT_EQ(k.variant(1).threads_per_block, 64);
  EXPECT_EQ(k.variant(1).name, "mid@64");
  EXPECT_EQ(k.default_variant, 0);
  // Different block sizes are different tenants to the alone-time cache.
  auto w2 = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: srad, size: 1024, dims: [16, 64, 256]}]}\n"
                           "  - {name: b, kernels: [{kernel: srad, size: 1024}]}\n",
                           "d.yaml");
  ASSERT_TRUE(w2.is_ok());
  EXPECT_NE(tenant_fingerprint(w2->tenants[0]), tenant_fingerprint(w2->tenants[1]));
}

TEST(Workload, FingerprintSeparatesDifferentTenants) {
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: bfs, size: 4096}]}\n"
                          "  - {name: b, kernels: [{kernel: bfs, size: 8192}]}\n  - {name: c, kernels: [{kernel: bfs, size: 4096}]}\n",
                          "f.yaml");
  ASSERT_TRUE(w.is_ok());
  EXPECT_NE(tenant_fingerprint(w->tenants[0]), tenant_fingerprint(w->tenants[1]));
  EXPECT_EQ(tenant_fingerprint(w->tenants[0]), tenant_fingerprint(w->tenants[2]));
}

}  // namespace
}  // namespace concord
