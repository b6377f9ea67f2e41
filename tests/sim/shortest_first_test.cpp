// shortest-first, the worked example of docs/architecture.md: the shortest ready kernel runs first,
// by its profile facet where it has one, and the facet goes through the store's generic codec path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "concord/facet_codec.h"
#include "concord/profile.h"
#include "policy/shortest_first/shortest_first_facet.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

// The tenant whose launch ran first.
std::string first_tenant(const Workload& w, const RunRecord& r) {
  const DispatchRecord* first = nullptr;
  for (const DispatchRecord& d : r.dispatches) {
    if (!first || d.start < first->start) first = &d;
  }
  return w.tenants[static_cast<size_t>(first->tenants[0].value)].name;
}

TEST(ShortestFirst, TheShortestReadyKernelRunsFirstOneAtATime) {
  // "long" is listed first (and so ready first); a small vector_add is far shorter.
  const Workload w = workload({tenant("long", {step("stream_triad", 1 << 24)}), tenant("short", {step("vector_add", 1 << 10)})});
  auto r = run_on_sim(w, "shortest-first");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->dispatches.size(), 2u);
  EXPECT_EQ(first_tenant(w, *r), "short");
  // One at a time: the second starts when the first ends.
  const auto& a = r->dispatches[0];
  const auto& b = r->dispatches[1];
  EXPECT_GE(std::max(a.start, b.start), std::min(a.end, b.end) - 1e-12);
}

TEST(ShortestFirst, AMeasuredFacetOverridesTheEstimate) {
  Workload w = workload({tenant("long", {step("stream_triad", 1 << 24)}), tenant("short", {step("vector_add", 1 << 10)})});
  // The store measured the long kernel as the shorter one: the facet decides.
  KernelSpec& k = w.tenants[0].steps[0].kernel;
  k.variants[static_cast<size_t>(k.default_variant)].facets[policy::kShortestFirstFacetName] =
      policy::shortest_first_facet_to_json(1e-9);
  auto r = run_on_sim(w, "shortest-first");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(first_tenant(w, *r), "long");
}

TEST(ShortestFirst, TheFacetIsCheckedByItsCodecInTheStore) {
  const FacetCodec* codec = find_facet_codec(policy::kShortestFirstFacetName);
  ASSERT_NE(codec, nullptr) << "the folder's facet is registered without a line outside it";
  EXPECT_TRUE(codec->check(R"({"seconds": 0.002})").is_ok());
  const Status bad = codec->check(R"({"seconds": -1})");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("field 'seconds'"), std::string::npos) << bad.message();

  const std::string path = (std::filesystem::temp_directory_path() / ("concord-sf-" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(path);
  {
    auto store = ProfileStore::open(path, false);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    const ProfileKey key{"H200", "580", "vector_add", "b256", 1 << 10};
    const Status refused = (*store)->put_facet(key, policy::kShortestFirstFacetName, R"({"seconds": "fast"})");
    EXPECT_FALSE(refused.is_ok());
    EXPECT_NE(refused.message().find("field 'seconds'"), std::string::npos) << refused.message();
    ASSERT_TRUE((*store)->put_facet(key, policy::kShortestFirstFacetName, policy::shortest_first_facet_to_json(0.5)).is_ok());
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace concord
