#include "backend/cuda/timing.h"

#include <algorithm>

#include "backend/cuda/cuda_backend.h"

namespace concord::cuda {

void ElasticControls::add(BlockRange range, const SmSet& sms, int tlp, double block_seconds) {
  add_with_chunk(range, sms, tlp, chunk_for(range.size(), static_cast<int64_t>(tlp) * sms.count(), tlp, block_seconds));
}

void ElasticControls::add_with_chunk(BlockRange range, const SmSet& sms, int tlp, int chunk) {
  device::ElasticControl c{};
  const auto w = sms.words();
  for (size_t i = 0; i < std::size(c.allowed); ++i) c.allowed[i] = w[i];
  c.tlp = tlp;
  c.chunk = std::max(1, chunk);
  c.range_begin = range.begin;
  c.range_end = range.end;
  host_.push_back(c);
}

Status ElasticControls::upload() {
  if (buffer_.size() < host_.size()) CONCORD_RETURN_IF_ERROR(buffer_.allocate(host_.size()));
  CONCORD_CUDA(cudaMemcpy(buffer_.get(), host_.data(), host_.size() * sizeof(host_[0]), cudaMemcpyHostToDevice));
  return Status::ok();
}

Result<double> time_median(const std::vector<cudaStream_t>& streams, const std::function<Status()>& before,
                           const std::function<Status()>& work, int reps, int warmups) {
  Event start;
  CONCORD_RETURN_IF_ERROR(start.create());
  std::vector<Event> ends(streams.size());
  for (auto& e : ends) CONCORD_RETURN_IF_ERROR(e.create());
  std::vector<double> times;
  for (int r = 0; r < reps + warmups; ++r) {
    CONCORD_RETURN_IF_ERROR(before());
    CONCORD_CUDA(cudaDeviceSynchronize());
    CONCORD_CUDA(cudaEventRecord(start.get(), streams[0]));
    for (size_t i = 1; i < streams.size(); ++i) CONCORD_CUDA(cudaStreamWaitEvent(streams[i], start.get()));
    CONCORD_RETURN_IF_ERROR(work());
    for (size_t i = 0; i < streams.size(); ++i) CONCORD_CUDA(cudaEventRecord(ends[i].get(), streams[i]));
    CONCORD_CUDA(cudaDeviceSynchronize());
    float worst = 0;
    for (auto& e : ends) {
      float ms = 0;
      CONCORD_CUDA(cudaEventElapsedTime(&ms, start.get(), e.get()));
      worst = std::max(worst, ms);
    }
    if (r >= warmups) times.push_back(worst * 1e-3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace concord::cuda
