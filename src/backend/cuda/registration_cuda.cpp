#include "backend/registration.h"

#include "backend/cuda/cuda_backend.h"
#include "concord/backend_factory.h"
#include "backend/cuda/ncu_worker.h"

namespace concord {

// A CUDA build: the CUDA backend, and the Nsight Compute worker `concord profile raise` runs.
void register_builtin_backends() {
  cuda::register_backend();
  register_ncu_worker(&cuda::ncu_worker);
}

}  // namespace concord
