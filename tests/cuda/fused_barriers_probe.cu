// One fused kernel of the suite at the part count FUSED_PARTS, for tests/cuda/fused_barriers.cmake,
// which compiles it with ptxas's resource report (no GPU needed) and checks the named barriers it
// reserves: FUSED_PARTS + 1 (barrier 0 and one per part).
#include "concord/device/launch.cuh"
#include "kernels/device/bodies.cuh"
#include "kernels/device/bodies_raise_aker.cuh"

template __global__ void concord::device::fused_kernel<concord::kernels::SradBody, concord::kernels::GaussianBody,
                                                       concord::device::CacheOp::normal, FUSED_PARTS>(
    concord::kernels::SradBody, concord::kernels::GaussianBody, concord::device::ElasticControl*,
    concord::device::ElasticControl*, int, int, int, int, int, int, concord::device::BlockAudit, concord::device::BlockAudit);
