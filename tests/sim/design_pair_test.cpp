// the compute + memory pair (docs/hardware.md): the simulator must reproduce the ordering measured on the
// H200 (streams within a few percent of serial; a static SM split clearly better; the ideal bound).
#include <gtest/gtest.h>

#include "concord/experiment.h"
#include "concord/backend_factory.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::step;
using testing::tenant;
using testing::workload;

Workload pair() { return workload({tenant("compute", {step("fma_loop", 60 << 20)}), tenant("memory", {step("stream_triad", 800 << 20)})}); }

double speedup(const std::string& policy, const PolicyParams& params, ReferenceCache& cache) {
  ExperimentConfig c;
  c.backend = BackendConfig{"sim", h200_spec(), 1};
  c.policy = policy;
  c.params = params;
  auto r = run_experiment(pair(), c, cache);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r->metrics.speedup_over_serial : 0;
}

TEST(DesignPair, AloneTimesMatchTheMeasuredScale) {
  ReferenceCache cache;
  ExperimentConfig c;
  c.backend = BackendConfig{"sim", h200_spec(), 1};
  c.policy = "serial";
  auto r = run_experiment(pair(), c, cache);
  ASSERT_TRUE(r.is_ok());
  // Measured on the H200: 2.1 and 2.3 ms.
  EXPECT_NEAR(r->alone[0] * 1e3, 2.1, 0.2);
  EXPECT_NEAR(r->alone[1] * 1e3, 2.3, 0.2);
}

TEST(DesignPair, StreamsIsNearSerialAndAStaticSplitIsClearlyBetter) {
  ReferenceCache cache;
  const double streams = speedup("streams", {}, cache);
  EXPECT_NEAR(streams, 1.0, 0.05);  // measured 1.03x
  double best_split = 0;
  for (const char* w : {"1,1", "3,2", "2,1", "7,3", "3,1", "4,1"}) {
    best_split = std::max(best_split, speedup("static-partition", {{"weights", w}}, cache));
  }
  EXPECT_GT(best_split, 1.25);            // measured 1.40x
  EXPECT_LT(best_split, 1.94);            // never beyond the ideal (the longer alone time)
  EXPECT_GT(best_split, streams + 0.2);
}

}  // namespace
}  // namespace concord
