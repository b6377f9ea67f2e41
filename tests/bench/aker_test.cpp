// bench/aker's mixes parse as LC/BE mixes of the kinds the bench needs: an LC tenant of inference-
// like request chains (tensor-core GEMM and convolution bodies, or cuBLAS) and BE tenants of
// suite kernels, at least eight combinations, one LC on cuBLAS.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "lsbe_mix.h"

namespace concord::lsbe {
namespace {

TEST(AkerMixes, EveryMixParsesWithAnInferenceLcAndSuiteBe) {
  int mixes = 0, on_cublas = 0, with_conv = 0;
  std::set<std::string> combinations;
  for (const auto& entry : std::filesystem::directory_iterator(CONCORD_AKER_MIXES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    auto mix = load_mix(entry.path().string());
    ASSERT_TRUE(mix.is_ok()) << mix.status().to_string();
    ++mixes;
    const TenantSpec& lc = mix->lc();
    EXPECT_EQ(lc.arrival.kind, ArrivalProcess::Kind::poisson) << "the bench replaces the rate, but the LC arrives as Poisson";
    bool tensor = false, cublas = false, conv = false;
    for (const KernelStep& s : lc.steps) {
      tensor = tensor || s.kernel.unit == ComputeUnit::tensor;
      cublas = cublas || s.kernel.name == "cublas_gemm";
      conv = conv || s.kernel.name == "conv_im2col";
    }
    EXPECT_TRUE(tensor) << "LC '" << lc.name << "' has no tensor-core GEMM or convolution";
    on_cublas += cublas;
    with_conv += conv;
    std::string be_names;
    for (size_t i = 0; i < mix->be_count(); ++i) {
      for (const KernelStep& s : mix->be(i).steps) {
        EXPECT_TRUE(s.kernel.elastic) << "BE '" << mix->be(i).name << "': " << s.kernel.name << " is not a suite body";
      }
      be_names += mix->be(i).name + ",";
    }
    combinations.insert(lc.name + "/" + be_names);
  }
  EXPECT_GE(mixes, 8);
  EXPECT_EQ(static_cast<int>(combinations.size()), mixes) << "two mixes are the same LC x BE combination";
  EXPECT_GE(on_cublas, 1);
  EXPECT_GE(with_conv, 1);
}

TEST(AkerMixes, AMixWithoutBeOrWithTwoLcIsRefusedWithTheFileNamed) {
  const std::string dir = ::testing::TempDir();
  const std::string lc_only = dir + "/aker_lc_only.yaml";
  std::FILE* f = std::fopen(lc_only.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("name: x\ntenants:\n  - name: lc\n    class: LC\n    target_ms: 2\n    requests: 5\n    arrival: {poisson: 100}\n"
             "    kernels:\n      - {kernel: conv_im2col, size: 64}\n",
             f);
  std::fclose(f);
  auto m = load_mix(lc_only);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(lc_only), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("BE"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace concord::lsbe
