#include "backend/sim/sim_backend.h"
#include "concord/backend.h"
#include "concord/backend_factory.h"

namespace concord {
namespace {

Result<std::unique_ptr<Backend>> (*cuda_factory)(const BackendConfig&) = nullptr;
NcuWorker ncu_worker = nullptr;

}  // namespace

void register_cuda_backend_factory(Result<std::unique_ptr<Backend>> (*factory)(const BackendConfig&)) {
  cuda_factory = factory;
}

Result<std::unique_ptr<Backend>> make_backend(const BackendConfig& config) {
  if (config.kind == "sim") {
    CONCORD_RETURN_IF_ERROR(config.device.validate());
    return std::unique_ptr<Backend>(std::make_unique<sim::SimBackend>(config.device));
  }
  if (config.kind == "cuda") {
    if (!cuda_factory) return Status::unsupported("backend 'cuda' is not built into this binary (configure with CUDA)");
    return cuda_factory(config);
  }
  return Status::not_found("unknown backend '" + config.kind + "' (known: sim, cuda)");
}

std::vector<std::string> available_backends() {
  if (cuda_factory) return {"sim", "cuda"};
  return {"sim"};
}

void register_ncu_worker(NcuWorker worker) { ncu_worker = worker; }

Status run_ncu_worker(const std::string& jobs_file) {
  if (!ncu_worker) {
    return Status::unsupported("`concord profile raise-worker` needs a CUDA build (configure with CONCORD_CUDA=ON)");
  }
  return ncu_worker(jobs_file);
}

}  // namespace concord
