// The worker Nsight Compute profiles: each job's kernel launched once in its plain form after a
// marker kernel; set-up launches follow a skip marker (src/profile/ncu.h, split_at_markers).
#include "backend/cuda/ncu_worker.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cuda/check.h"
#include "cuda/handles.h"
#include "concord/suite.h"
#include "kernels/device/device_kernel.h"
#include "profile/ncu.h"
#include "backend/cuda/ncu_marker.h"

namespace concord::profile {

Status run_ncu_worker(const std::string& jobs_file) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  auto text = read_text_file(jobs_file);
  if (!text) return text.status();
  auto jobs = ncu_jobs_from_text(*text, jobs_file);
  if (!jobs) return jobs.status();
  cuda::Stream stream;
  CONCORD_RETURN_IF_ERROR(stream.create());
  for (size_t i = 0; i < jobs->size(); ++i) {
    const NcuJob& job = (*jobs)[i];
    const std::string where = jobs_file + ": job " + std::to_string(i) + " (" + job.kernel + " " + job.variant + ")";
    auto spec = make_suite_kernel_with_variant(job.kernel, job.size, job.variant);
    if (!spec) return Status(spec.status().code(), where + ": " + spec.status().message());
    auto v = spec->find_variant(job.variant);
    if (!v) return Status::not_found(where + ": no such variant");
    CONCORD_CUDA(launch_ncu_marker(true, static_cast<int>(i), stream.get()));
    auto kernel = kernels::make_device_kernel(*spec);
    if (!kernel) return Status(kernel.status().code(), where + ": " + kernel.status().message());
    CONCORD_RETURN_IF_ERROR((*kernel)->prepare(7));
    const BlockRange all{0, spec->variant(*v).logical_blocks};
    // A library's first call sets itself up (handles, plans): warm it up outside the measurement.
    if (!spec->elastic) CONCORD_RETURN_IF_ERROR((*kernel)->launch_standalone(*v, all, CachePolicy::normal, stream.get()));
    CONCORD_CUDA(cudaStreamSynchronize(stream.get()));
    CONCORD_CUDA(cudaDeviceSynchronize());
    CONCORD_CUDA(launch_ncu_marker(false, static_cast<int>(i), stream.get()));
    CONCORD_RETURN_IF_ERROR((*kernel)->launch_standalone(*v, all, CachePolicy::normal, stream.get()));
    CONCORD_CUDA(cudaStreamSynchronize(stream.get()));
  }
  return Status::ok();
}

}  // namespace concord::profile
