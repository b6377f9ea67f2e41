// shortest-first: among the ready launches, the one whose kernel is shortest runs next, one at a
// time on the whole GPU. Shortest by the kernel's shortest_first facet where the profile store
// has one, else by the estimator. The worked example of docs/architecture.md ("Adding a policy").
#pragma once

#include <memory>

#include "concord/policy.h"

namespace concord::policy {

Result<std::unique_ptr<Policy>> make_shortest_first(const PolicyParams& params);

}  // namespace concord::policy
