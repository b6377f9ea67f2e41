// Every shipped example under every registered policy, on the simulated H200 and H100: either the
// spec check refuses it (errors that name the tenant's field and the kernel) or it runs to its end.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "backend/sim/sim_backend.h"
#include "concord/policy.h"
#include "concord/spec_source.h"
#include "concord/workload.h"

namespace concord {
namespace {

std::vector<std::filesystem::path> examples() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(CONCORD_EXAMPLES_DIR)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Examples, EveryExampleUnderEveryPolicyRunsOrIsRefusedWithAReason) {
  const auto specs = examples();
  ASSERT_FALSE(specs.empty()) << "no examples in " << CONCORD_EXAMPLES_DIR;
  int runs = 0;
  for (const DeviceSpec& device : {h200_spec(), h100_sxm_spec()}) {
    for (const auto& path : specs) {
      const WorkloadCheck check = check_workload_file(path.string(), &device);
      if (!check.ok()) {
        // Refused: every error names the step's field and the kernel.
        for (const SpecDiagnostic& d : check.diagnostics) {
          if (d.severity != SpecDiagnostic::Severity::error) continue;
          EXPECT_NE(d.field.find("tenants["), std::string::npos) << d.to_string();
          EXPECT_NE(d.reason.find("kernel '"), std::string::npos) << d.to_string();
        }
        continue;
      }
      for (const auto& entry : builtin_policies().list()) {
        SCOPED_TRACE(path.filename().string() + " under " + entry.name + " on " + device.name);
        auto policy = builtin_policies().make(entry.name, {});
        ASSERT_TRUE(policy.is_ok()) << policy.status().to_string();
        sim::SimBackend backend(device);
        const RunOutcome out = run_workload_outcome(check.workload, backend, **policy, EngineOptions{});
        EXPECT_TRUE(out.status.is_ok()) << out.status.to_string();
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0);
}

}  // namespace
}  // namespace concord
