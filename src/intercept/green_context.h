// The one place the library makes a green context: GreenSets' probe contexts (one group each) and
// SM-set contexts (the union of the groups a set touches), and Room's SM-count contexts (one group
// split off by count) all come from make_green_context. Driver API only (the library never loads
// the CUDA runtime).
#pragma once

#include <cuda.h>

#include <span>

#include "concord/status.h"
#include "intercept/cu_handles.h"
#include "intercept/real_driver.h"

namespace concord::intercept {

// A green context of `device` over `parts` (SM resources of that device, as
// cuDevSmResourceSplitByCount gives them), with a default stream of its own
// (CU_GREEN_CTX_DEFAULT_STREAM); destroyed through `driver` when the owner goes. The driver must
// have the green-context API (RealDriver::has_green_contexts); an empty `parts` is
// invalid_argument.
Result<OwnedGreenCtx> make_green_context(const RealDriver& driver, CUdevice device, std::span<const CUdevResource> parts);

}  // namespace concord::intercept
