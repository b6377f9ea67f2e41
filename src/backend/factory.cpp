#include "backend/sim/sim_backend.h"
#include "concord/backend.h"

namespace concord {

#ifdef CONCORD_HAVE_CUDA_BACKEND
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendConfig& config);
#endif

Result<std::unique_ptr<Backend>> make_backend(const BackendConfig& config) {
  if (config.kind == "sim") {
    CONCORD_RETURN_IF_ERROR(config.device.validate());
    return std::unique_ptr<Backend>(std::make_unique<sim::SimBackend>(config.device));
  }
  if (config.kind == "cuda") {
#ifdef CONCORD_HAVE_CUDA_BACKEND
    return make_cuda_backend(config);
#else
    return Status::unsupported("backend 'cuda' is not built into this binary (no CUDA backend yet; see issue 3)");
#endif
  }
  return Status::not_found("unknown backend '" + config.kind + "' (known: sim, cuda)");
}

std::vector<std::string> available_backends() {
#ifdef CONCORD_HAVE_CUDA_BACKEND
  return {"sim", "cuda"};
#else
  return {"sim"};
#endif
}

}  // namespace concord
