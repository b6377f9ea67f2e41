#include "backend/cuda/gpc_probe.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

#include "cuda/check.h"
#include "cuda/handles.h"

namespace concord::cuda {

namespace {

// One block per SM (its dynamic shared memory fills the SM): records the SM it ran on after a
// short spin, so that the clusters of one launch are resident together and spread over the GPU.
__global__ void record_cluster_sm(int* smid_of_block, long long spin_cycles) {
  extern __shared__ unsigned char fill[];
  unsigned smid = 0;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  if (threadIdx.x == 0) {
    fill[0] = static_cast<unsigned char>(smid);  // touches the allocation: it is what keeps one block per SM
    smid_of_block[blockIdx.x] = static_cast<int>(smid);
  }
}

// Connected groups of SMs (union by the smaller root, so a group's root is its lowest SM).
struct Groups {
  explicit Groups(int n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int root(int x) {
    while (parent[static_cast<size_t>(x)] != x) {
      parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
      x = parent[static_cast<size_t>(x)];
    }
    return x;
  }
  void join(int a, int b) {
    a = root(a);
    b = root(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
  std::vector<int> parent;
};

// Launches of each cluster size, and how long each block holds its SM.
constexpr int kRepeats = 3;
constexpr int kWavesPerLaunch = 4;
constexpr double kSpinSeconds = 20e-6;

Result<GpcProbe> measure(int device, int sm_count) {
  int cluster_launch = 0;
  CONCORD_CUDA(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  if (!cluster_launch) return Status::unsupported("GPC probe: the device cannot launch thread-block clusters");
  int smem = 0, clock_khz = 0;
  CONCORD_CUDA(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  const void* kernel = reinterpret_cast<const void*>(&record_cluster_sm);
  CONCORD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CONCORD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));

  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(sm_count));
  config.blockDim = dim3(32);
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  int largest = 0;
  CONCORD_CUDA(cudaOccupancyMaxPotentialClusterSize(&largest, kernel, &config));
  if (largest < 2) {
    return Status::unsupported("GPC probe: clusters of one SM-filling block only (largest cluster " +
                               std::to_string(largest) + ")");
  }

  GpcProbe out;
  out.largest_cluster = largest;
  Groups groups(sm_count);
  std::vector<bool> reached(static_cast<size_t>(sm_count), false);
  Stream stream;
  CONCORD_RETURN_IF_ERROR(stream.create());
  const long long spin = static_cast<long long>(clock_khz * 1e3 * kSpinSeconds);
  // The largest size bridges most SMs of a GPC at once; every smaller size too, since a GPC whose
  // free SMs a size does not tile leaves some of them to clusters of other sizes only (halving
  // the size, an H100 gave 12 groups: a GPC of 16 SMs came out as 8 + 2 + 2 + 2 + 2).
  for (int size = largest; size >= 2; --size) {
    const int clusters = std::max(1, kWavesPerLaunch * sm_count / size);
    const int blocks = clusters * size;
    DeviceBuffer<int> smids;
    CONCORD_RETURN_IF_ERROR(smids.allocate(static_cast<size_t>(blocks)));
    std::vector<int> host(static_cast<size_t>(blocks));
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = static_cast<unsigned>(size);
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.stream = stream.get();
    config.attrs = &cluster;
    config.numAttrs = 1;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      CONCORD_CUDA(cudaLaunchKernelEx(&config, record_cluster_sm, smids.get(), spin));
      CONCORD_CUDA(cudaMemcpyAsync(host.data(), smids.get(), host.size() * sizeof(int), cudaMemcpyDeviceToHost, stream.get()));
      CONCORD_CUDA(cudaStreamSynchronize(stream.get()));
      out.clusters += clusters;
      for (int c = 0; c < clusters; ++c) {
        // A 1-D cluster is `size` consecutive blocks.
        const int first = host[static_cast<size_t>(c * size)];
        for (int k = 0; k < size; ++k) {
          const int sm = host[static_cast<size_t>(c * size + k)];
          if (sm < 0 || sm >= sm_count) {
            return Status::device_error("GPC probe: a block ran on SM " + std::to_string(sm) + ", outside 0.." +
                                        std::to_string(sm_count - 1));
          }
          reached[static_cast<size_t>(sm)] = true;
          groups.join(first, sm);
        }
      }
    }
  }
  for (int sm = 0; sm < sm_count; ++sm) {
    if (!reached[static_cast<size_t>(sm)]) {
      return Status::device_error("GPC probe: SM " + std::to_string(sm) + " ran no cluster block (" +
                                  std::to_string(out.clusters) + " clusters launched; MPS or another process?)");
    }
  }
  std::map<int, int> number_of_root;
  out.gpc_of_sm.resize(static_cast<size_t>(sm_count));
  for (int sm = 0; sm < sm_count; ++sm) {
    const int r = groups.root(sm);
    const auto it = number_of_root.emplace(r, static_cast<int>(number_of_root.size())).first;
    out.gpc_of_sm[static_cast<size_t>(sm)] = it->second;
  }
  return out;
}

}  // namespace

Result<GpcProbe> probe_gpcs(int device, int sm_count) {
  static std::mutex mu;
  static std::map<int, Result<GpcProbe>> measured;  // by device; a failure is not retried
  std::lock_guard<std::mutex> lock(mu);
  auto it = measured.find(device);
  if (it == measured.end()) it = measured.emplace(device, measure(device, sm_count)).first;
  return it->second;
}

}  // namespace concord::cuda
