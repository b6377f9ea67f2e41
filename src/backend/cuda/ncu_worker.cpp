// The worker Nsight Compute profiles: each job's kernel launched once in its plain form after a
// marker kernel; set-up launches follow a skip marker (`concord profile raise` splits ncu's report there).
#include "backend/cuda/ncu_worker.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cuda/check.h"
#include "cuda/handles.h"
#include "concord/suite.h"
#include "kernels/device/device_kernel.h"
#include "backend/cuda/ncu_marker.h"

namespace concord::cuda {

Status ncu_worker(const std::string& jobs_file) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  std::ifstream in(jobs_file);
  if (!in) return Status::io_error(jobs_file + ": cannot open the job list");
  std::ostringstream text;
  text << in.rdbuf();
  auto jobs = suite_jobs_from_text(text.str(), jobs_file);
  if (!jobs) return jobs.status();
  cuda::Stream stream;
  CONCORD_RETURN_IF_ERROR(stream.create());
  for (size_t i = 0; i < jobs->size(); ++i) {
    const SuiteJob& job = (*jobs)[i];
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

}  // namespace concord::cuda
