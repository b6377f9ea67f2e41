// Does a named barrier whose ID is held in a register cap resident blocks per SM? Occupancy of
// 128-thread kernels that sync with __syncthreads, bar.sync on a constant ID and bar.sync on a
// register ID (as the fused kernels' parts do, include/concord/device/context.cuh).
//   nvcc -arch=sm_90 -O2 -Xptxas -v -o barrier_occupancy barrier_occupancy.cu && ./barrier_occupancy
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CHECK(call)                                                                        \
  do {                                                                                     \
    const cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));                      \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)
__global__ void k_sync(float* o) { o[threadIdx.x] += 1; __syncthreads(); o[threadIdx.x] *= 2; }
__global__ void k_const(float* o) { o[threadIdx.x] += 1; asm volatile("bar.sync 1, 128;" ::: "memory"); o[threadIdx.x] *= 2; }
__global__ void k_const3(float* o) { o[threadIdx.x] += 1; asm volatile("bar.sync 3, 128;" ::: "memory"); o[threadIdx.x] *= 2; }
__global__ void k_reg(float* o, int id) { o[threadIdx.x] += 1; asm volatile("bar.sync %0, 128;" :: "r"(id) : "memory"); o[threadIdx.x] *= 2; }
template <typename K> void show(const char* name, K k) {
  int n = 0; cudaFuncAttributes a{};
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, 128, 0));
  CHECK(cudaFuncGetAttributes(&a, k));
  std::printf("%-10s blocks/SM %2d  regs %d  static shared %zu\n", name, n, a.numRegs, a.sharedSizeBytes);
}
int main() {
  show("syncthreads", k_sync); show("bar 1", k_const); show("bar 3", k_const3); show("bar reg", k_reg);
  return 0;
}
