// The stand-in's memory: device memory is host memory (a device pointer is a host address, so the
// catalogue's bodies read and write it), counted against the device's size, which cuMemGetInfo
// reports (both versions); pitched and managed allocations; stream-ordered and pool allocations;
// virtual memory management over memfds mapped into reserved address ranges, the physical memory
// freed once every reference is released and every mapping unmapped; copies and sets, synchronous
// (on the legacy stream) and asynchronous.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "api.h"

namespace standin {
namespace {

constexpr size_t kGranularity = 2u << 20;
constexpr size_t kPitchAlignment = 512;  // cuMemAllocPitch's rows start this aligned (a Hopper's texture pitch alignment)

Device& device_now() {
  Context* c = current();
  return *c->device;
}

// Whether [p, p + n) lies in memory the stand-in gave out (an allocation or a mapped range).
bool is_device_memory(uintptr_t p, size_t n) {
  Driver& d = driver();
  if (auto it = d.allocations.upper_bound(p); it != d.allocations.begin()) {
    --it;
    if (p >= it->first && p + n <= it->first + it->second.bytes) return true;
  }
  if (auto it = d.mappings.upper_bound(p); it != d.mappings.begin()) {
    --it;
    if (p >= it->first && p + n <= it->first + it->second.second) return true;
  }
  return false;
}

CUresult allocate(const char* call, CUdeviceptr* ptr, size_t bytes) {
  Driver& d = driver();
  if (!ptr) return fail(call, CUDA_ERROR_INVALID_VALUE);
  if (!current()) return fail(call, CUDA_ERROR_INVALID_CONTEXT, "no current context");
  if (bytes == 0) return fail(call, CUDA_ERROR_INVALID_VALUE, "0 bytes");
  Device& dev = device_now();
  if (dev.used_memory + bytes > dev.memory) {
    return fail(call, CUDA_ERROR_OUT_OF_MEMORY,
                std::to_string(bytes) + " bytes asked, " + std::to_string(dev.memory - dev.used_memory) + " free");
  }
  const size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (!p) return fail(call, CUDA_ERROR_OUT_OF_MEMORY, "host memory");
  std::memset(p, 0xa5, rounded);  // not zeroed, as device memory is not: a program that reads it unset sees a pattern
  d.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, &dev};
  dev.used_memory += bytes;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult release(const char* call, CUdeviceptr ptr) {
  Driver& d = driver();
  auto it = d.allocations.find(static_cast<uintptr_t>(ptr));
  if (it == d.allocations.end()) return fail(call, CUDA_ERROR_INVALID_VALUE, "not an allocation");
  it->second.device->used_memory -= it->second.bytes;
  std::free(reinterpret_cast<void*>(it->first));
  d.allocations.erase(it);
  return CUDA_SUCCESS;
}

// An asynchronous copy or set on `stream`. A copy from the host takes its bytes at the call, as
// the driver does for pageable memory.
CUresult queue_memory(const char* call, CUstream stream, bool per_thread, Op op, bool stage_source) {
  Stream* s = resolve_stream(stream, per_thread);
  if (!s) return fail(call, CUDA_ERROR_INVALID_HANDLE, "stream");
  if (stage_source) {
    const auto* from = static_cast<const uint8_t*>(op.src);
    op.staged = std::make_shared<std::vector<uint8_t>>(from, from + op.bytes);
    op.src = op.staged->data();
  }
  if (CUresult r = enqueue(s, std::move(op)); r != CUDA_SUCCESS) return fail(call, r);
  return CUDA_SUCCESS;
}

CUresult copy_sync(const char* call, void* dst, const void* src, size_t bytes, Lock& lock) {
  STANDIN_REQUIRE_INIT(call);
  Context* c = current();
  if (!c) return fail(call, CUDA_ERROR_INVALID_CONTEXT, "no current context");
  if (unsafe_forbidden()) return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "a synchronous copy during a capture");
  Op op;
  op.type = Op::Type::copy;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  if (CUresult r = enqueue(c->legacy, std::move(op)); r != CUDA_SUCCESS) return fail(call, r);
  wait_stream(lock, c->legacy);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace standin

using namespace standin;

STANDIN_API CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemAlloc_v2");
  if (unsafe_forbidden()) return fail("cuMemAlloc_v2", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  return allocate("cuMemAlloc_v2", ptr, bytes);
}
STANDIN_PROC(cuMemAlloc_v2, "cuMemAlloc", 3020, false);

STANDIN_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemFree_v2");
  if (ptr == 0) return CUDA_SUCCESS;
  if (unsafe_forbidden()) return fail("cuMemFree_v2", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  // The free waits for work in flight that may use it, as the driver's does.
  if (Context* c = current()) wait_context(lock, c);
  return release("cuMemFree_v2", ptr);
}
STANDIN_PROC(cuMemFree_v2, "cuMemFree", 3020, false);

STANDIN_API CUresult cuMemAllocPitch_v2(CUdeviceptr* ptr, size_t* pitch, size_t width, size_t height, unsigned element) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemAllocPitch_v2");
  if (!pitch || width == 0 || height == 0 || (element != 4 && element != 8 && element != 16)) {
    return fail("cuMemAllocPitch_v2", CUDA_ERROR_INVALID_VALUE);
  }
  if (unsafe_forbidden()) return fail("cuMemAllocPitch_v2", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  const size_t rows = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  const CUresult r = allocate("cuMemAllocPitch_v2", ptr, rows * height);
  if (r == CUDA_SUCCESS) *pitch = rows;
  return r;
}
STANDIN_PROC(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, false);

// Managed memory lives on the device here (the stand-in has no host side to migrate to).
STANDIN_API CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t bytes, unsigned flags) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemAllocManaged");
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return fail("cuMemAllocManaged", CUDA_ERROR_INVALID_VALUE, "flags");
  if (unsafe_forbidden()) return fail("cuMemAllocManaged", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  return allocate("cuMemAllocManaged", ptr, bytes);
}
STANDIN_PROC(cuMemAllocManaged, "cuMemAllocManaged", 6000, false);

// The 32-bit version, for programs built before CUDA 3.2: sizes over 4 GiB are cut to 4 GiB - 1.
STANDIN_API CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemGetInfo");
  if (!current()) return fail("cuMemGetInfo", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  const Device& d = device_now();
  constexpr size_t most = 0xffffffffu;
  if (free_bytes) *free_bytes = static_cast<unsigned int>(std::min(d.memory - d.used_memory, most));
  if (total) *total = static_cast<unsigned int>(std::min(d.memory, most));
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemGetInfo, "cuMemGetInfo", 2000, false);

STANDIN_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemGetInfo_v2");
  if (!current()) return fail("cuMemGetInfo_v2", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  const Device& d = device_now();
  if (free_bytes) *free_bytes = d.memory - d.used_memory;
  if (total) *total = d.memory;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemGetInfo_v2, "cuMemGetInfo", 3020, false);

// ---- stream-ordered and pool allocations ---------------------------------------------------

namespace {
CUresult alloc_async(const char* call, CUdeviceptr* ptr, size_t bytes, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  if (!resolve_stream(stream, per_thread)) return fail(call, CUDA_ERROR_INVALID_HANDLE, "stream");
  // The memory is usable from the stream's next operation: here, at once.
  return allocate(call, ptr, bytes);
}
CUresult free_async(const char* call, CUdeviceptr ptr, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  if (!driver().allocations.contains(static_cast<uintptr_t>(ptr))) return fail(call, CUDA_ERROR_INVALID_VALUE, "not an allocation");
  Op op;
  op.type = Op::Type::free_memory;
  op.dst = reinterpret_cast<void*>(ptr);
  return queue_memory(call, stream, per_thread, std::move(op), false);
}
CUresult alloc_from_pool(const char* call, CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream, bool per_thread) {
  {
    Lock lock(driver().mu);
    if (!as<Pool>(pool, Kind::pool)) return fail(call, CUDA_ERROR_INVALID_HANDLE, "pool");
  }
  return alloc_async(call, ptr, bytes, stream, per_thread);
}
}  // namespace

STANDIN_API CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  return alloc_async("cuMemAllocAsync", ptr, bytes, stream, false);
}
STANDIN_PROC(cuMemAllocAsync, "cuMemAllocAsync", 11020, false);
STANDIN_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  return alloc_async("cuMemAllocAsync_ptsz", ptr, bytes, stream, true);
}
STANDIN_PROC(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, true);
STANDIN_API CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) { return free_async("cuMemFreeAsync", ptr, stream, false); }
STANDIN_PROC(cuMemFreeAsync, "cuMemFreeAsync", 11020, false);
STANDIN_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream stream) {
  return free_async("cuMemFreeAsync_ptsz", ptr, stream, true);
}
STANDIN_PROC(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, true);
STANDIN_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  return alloc_from_pool("cuMemAllocFromPoolAsync", ptr, bytes, pool, stream, false);
}
STANDIN_PROC(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, false);
STANDIN_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  return alloc_from_pool("cuMemAllocFromPoolAsync_ptsz", ptr, bytes, pool, stream, true);
}
STANDIN_PROC(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, true);

STANDIN_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetDefaultMemPool");
  Device* d = device_of(dev);
  if (!d || !pool) return fail("cuDeviceGetDefaultMemPool", CUDA_ERROR_INVALID_VALUE);
  if (!d->default_pool) {
    d->default_pool = new Pool();
    d->default_pool->device = d->ordinal;
    adopt(d->default_pool);
  }
  *pool = reinterpret_cast<CUmemoryPool>(d->default_pool);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, false);

STANDIN_API CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemPoolCreate");
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !device_of(props->location.id)) {
    return fail("cuMemPoolCreate", CUDA_ERROR_INVALID_VALUE);
  }
  auto* p = new Pool();
  p->device = props->location.id;
  adopt(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemPoolCreate, "cuMemPoolCreate", 11020, false);

STANDIN_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemPoolDestroy");
  Pool* p = as<Pool>(pool, Kind::pool);
  if (!p) return fail("cuMemPoolDestroy", CUDA_ERROR_INVALID_HANDLE);
  retire(p);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, false);

// ---- virtual memory management -------------------------------------------------------------

STANDIN_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                   CUmemAllocationGranularity_flags) {
  if (!granularity || !prop) return fail("cuMemGetAllocationGranularity", CUDA_ERROR_INVALID_VALUE);
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, false);

STANDIN_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                 unsigned long long flags) {
  (void)flags;
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemCreate");
  Driver& d = driver();
  if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || size == 0 || size % kGranularity != 0) {
    return fail("cuMemCreate", CUDA_ERROR_INVALID_VALUE, "size must be a positive multiple of the granularity");
  }
  Device* dev = device_of(prop->location.id);
  if (!dev) return fail("cuMemCreate", CUDA_ERROR_INVALID_DEVICE);
  if (dev->used_memory + size > dev->memory) return fail("cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY);
  const int fd = memfd_create("concord-standin-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) ::close(fd);
    return fail("cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY, "memfd");
  }
  const CUmemGenericAllocationHandle h = d.next_physical++;
  d.physical[h] = PhysicalMemory{fd, size, dev->ordinal, 1, 0};
  dev->used_memory += size;
  *handle = h;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemCreate, "cuMemCreate", 10020, false);

namespace standin {
namespace {
// Frees a handle's physical memory once nothing holds it (under driver().mu).
void maybe_free_physical(std::map<CUmemGenericAllocationHandle, PhysicalMemory>::iterator it) {
  Driver& d = driver();
  if (it->second.references > 0 || it->second.mappings > 0) return;
  ::close(it->second.fd);
  d.devices[static_cast<size_t>(it->second.device)]->used_memory -= it->second.bytes;
  d.physical.erase(it);
}
}  // namespace
}  // namespace standin

STANDIN_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemRelease");
  Driver& d = driver();
  auto it = d.physical.find(handle);
  if (it == d.physical.end() || it->second.references == 0) return fail("cuMemRelease", CUDA_ERROR_INVALID_VALUE);
  // Mappings keep the memory until they go.
  --it->second.references;
  maybe_free_physical(it);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemRelease, "cuMemRelease", 10020, false);

STANDIN_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                         unsigned long long flags) {
  (void)addr;
  (void)flags;
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemAddressReserve");
  if (!ptr || size == 0 || size % kGranularity != 0) return fail("cuMemAddressReserve", CUDA_ERROR_INVALID_VALUE);
  const size_t align = std::max(alignment, kGranularity);
  void* raw = ::mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return fail("cuMemAddressReserve", CUDA_ERROR_OUT_OF_MEMORY, "address space");
  const uintptr_t base = (reinterpret_cast<uintptr_t>(raw) + align - 1) / align * align;
  // The slack before and after the aligned range goes back.
  if (base > reinterpret_cast<uintptr_t>(raw)) ::munmap(raw, base - reinterpret_cast<uintptr_t>(raw));
  const uintptr_t end = reinterpret_cast<uintptr_t>(raw) + size + align;
  if (end > base + size) ::munmap(reinterpret_cast<void*>(base + size), end - (base + size));
  driver().reservations[base] = size;
  *ptr = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemAddressReserve, "cuMemAddressReserve", 10020, false);

STANDIN_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemAddressFree");
  auto it = driver().reservations.find(static_cast<uintptr_t>(ptr));
  if (it == driver().reservations.end() || it->second != size) return fail("cuMemAddressFree", CUDA_ERROR_INVALID_VALUE);
  ::munmap(reinterpret_cast<void*>(ptr), size);
  driver().reservations.erase(it);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemAddressFree, "cuMemAddressFree", 10020, false);

STANDIN_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags) {
  (void)flags;
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemMap");
  Driver& d = driver();
  auto h = d.physical.find(handle);
  if (h == d.physical.end() || h->second.references == 0 || offset + size > h->second.bytes) {
    return fail("cuMemMap", CUDA_ERROR_INVALID_VALUE, "handle");
  }
  bool reserved = false;
  for (const auto& [base, len] : d.reservations) reserved |= ptr >= base && ptr + size <= base + len;
  if (!reserved) return fail("cuMemMap", CUDA_ERROR_INVALID_VALUE, "not in a reserved range");
  void* p = ::mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return fail("cuMemMap", CUDA_ERROR_OUT_OF_MEMORY, "mmap");
  d.mappings[static_cast<uintptr_t>(ptr)] = {handle, size};
  ++h->second.mappings;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemMap, "cuMemMap", 10020, false);

// The handle of the memory mapped at `addr`, with one more reference to release.
STANDIN_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemRetainAllocationHandle");
  Driver& d = driver();
  const auto p = reinterpret_cast<uintptr_t>(addr);
  auto m = d.mappings.upper_bound(p);
  if (!handle || m == d.mappings.begin()) return fail("cuMemRetainAllocationHandle", CUDA_ERROR_INVALID_VALUE, "not mapped");
  --m;
  if (p >= m->first + m->second.second) return fail("cuMemRetainAllocationHandle", CUDA_ERROR_INVALID_VALUE, "not mapped");
  ++d.physical.at(m->second.first).references;
  *handle = m->second.first;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, false);

STANDIN_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemSetAccess");
  if (!desc || count == 0 || !is_device_memory(static_cast<uintptr_t>(ptr), size)) {
    return fail("cuMemSetAccess", CUDA_ERROR_INVALID_VALUE, "not a mapped range");
  }
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  if (::mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return fail("cuMemSetAccess", CUDA_ERROR_INVALID_VALUE, "mprotect");
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemSetAccess, "cuMemSetAccess", 10020, false);

STANDIN_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuMemUnmap");
  Driver& d = driver();
  auto it = d.mappings.find(static_cast<uintptr_t>(ptr));
  if (it == d.mappings.end() || it->second.second != size) return fail("cuMemUnmap", CUDA_ERROR_INVALID_VALUE);
  // Back to a reserved, inaccessible range.
  ::mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  const CUmemGenericAllocationHandle handle = it->second.first;
  d.mappings.erase(it);
  if (auto h = d.physical.find(handle); h != d.physical.end()) {
    --h->second.mappings;
    maybe_free_physical(h);
  }
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuMemUnmap, "cuMemUnmap", 10020, false);

// ---- copies and sets -----------------------------------------------------------------------

STANDIN_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  Lock lock(driver().mu);
  if (!is_device_memory(dst, bytes)) return fail("cuMemcpyHtoD_v2", CUDA_ERROR_INVALID_VALUE, "destination");
  return copy_sync("cuMemcpyHtoD_v2", reinterpret_cast<void*>(dst), src, bytes, lock);
}
STANDIN_PROC(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 3020, false);

STANDIN_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  Lock lock(driver().mu);
  if (!is_device_memory(src, bytes)) return fail("cuMemcpyDtoH_v2", CUDA_ERROR_INVALID_VALUE, "source");
  return copy_sync("cuMemcpyDtoH_v2", dst, reinterpret_cast<const void*>(src), bytes, lock);
}
STANDIN_PROC(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 3020, false);

STANDIN_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  Lock lock(driver().mu);
  if (!is_device_memory(dst, bytes) || !is_device_memory(src, bytes)) return fail("cuMemcpyDtoD_v2", CUDA_ERROR_INVALID_VALUE);
  return copy_sync("cuMemcpyDtoD_v2", reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, lock);
}
STANDIN_PROC(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 3020, false);

namespace {
CUresult copy_async(const char* call, void* dst, const void* src, size_t bytes, CUstream stream, bool per_thread, bool dst_device,
                    bool src_device) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  if ((dst_device && !is_device_memory(reinterpret_cast<uintptr_t>(dst), bytes)) ||
      (src_device && !is_device_memory(reinterpret_cast<uintptr_t>(src), bytes))) {
    return fail(call, CUDA_ERROR_INVALID_VALUE, "not device memory");
  }
  Op op;
  op.type = Op::Type::copy;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  return queue_memory(call, stream, per_thread, std::move(op), !src_device);
}
CUresult set_async(const char* call, CUdeviceptr dst, uint32_t value, int width, size_t count, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  if (!is_device_memory(dst, count * static_cast<size_t>(width))) return fail(call, CUDA_ERROR_INVALID_VALUE, "not device memory");
  Op op;
  op.type = Op::Type::set;
  op.dst = reinterpret_cast<void*>(dst);
  op.bytes = count;
  op.value = value;
  op.width = width;
  return queue_memory(call, stream, per_thread, std::move(op), false);
}
CUresult set_sync(const char* call, CUdeviceptr dst, uint32_t value, int width, size_t count) {
  {
    Lock lock(driver().mu);
    STANDIN_REQUIRE_INIT(call);
    if (!current()) return fail(call, CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (unsafe_forbidden()) return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  }
  if (CUresult r = set_async(call, dst, value, width, count, CU_STREAM_LEGACY, false); r != CUDA_SUCCESS) return r;
  Lock lock(driver().mu);
  wait_stream(lock, current()->legacy);
  return CUDA_SUCCESS;
}
}  // namespace

STANDIN_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyHtoDAsync_v2", reinterpret_cast<void*>(dst), src, bytes, stream, false, true, false);
}
STANDIN_PROC(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", 3020, false);
STANDIN_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyHtoDAsync_v2_ptsz", reinterpret_cast<void*>(dst), src, bytes, stream, true, true, false);
}
STANDIN_PROC(cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync", 7000, true);
STANDIN_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyDtoHAsync_v2", dst, reinterpret_cast<const void*>(src), bytes, stream, false, false, true);
}
STANDIN_PROC(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 3020, false);
STANDIN_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyDtoHAsync_v2_ptsz", dst, reinterpret_cast<const void*>(src), bytes, stream, true, false, true);
}
STANDIN_PROC(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync", 7000, true);
STANDIN_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyAsync", reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream, false, true, true);
}
STANDIN_PROC(cuMemcpyAsync, "cuMemcpyAsync", 4000, false);
STANDIN_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_async("cuMemcpyAsync_ptsz", reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream, true, true,
                    true);
}
STANDIN_PROC(cuMemcpyAsync_ptsz, "cuMemcpyAsync", 7000, true);

STANDIN_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count, CUstream stream) {
  return set_async("cuMemsetD32Async", dst, value, 4, count, stream, false);
}
STANDIN_PROC(cuMemsetD32Async, "cuMemsetD32Async", 3020, false);
STANDIN_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned value, size_t count, CUstream stream) {
  return set_async("cuMemsetD32Async_ptsz", dst, value, 4, count, stream, true);
}
STANDIN_PROC(cuMemsetD32Async_ptsz, "cuMemsetD32Async", 7000, true);
STANDIN_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
  return set_async("cuMemsetD8Async", dst, value, 1, count, stream, false);
}
STANDIN_PROC(cuMemsetD8Async, "cuMemsetD8Async", 3020, false);
STANDIN_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
  return set_async("cuMemsetD8Async_ptsz", dst, value, 1, count, stream, true);
}
STANDIN_PROC(cuMemsetD8Async_ptsz, "cuMemsetD8Async", 7000, true);
STANDIN_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned value, size_t count) {
  return set_sync("cuMemsetD32_v2", dst, value, 4, count);
}
STANDIN_PROC(cuMemsetD32_v2, "cuMemsetD32", 3020, false);
STANDIN_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  return set_sync("cuMemsetD8_v2", dst, value, 1, count);
}
STANDIN_PROC(cuMemsetD8_v2, "cuMemsetD8", 3020, false);
