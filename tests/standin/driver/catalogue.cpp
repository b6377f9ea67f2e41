// The stand-in's kernels: what a module or library loaded into the stand-in can hold. Each body is
// a host function run once per block over the stand-in's device memory (host memory), so tests can
// check what a program computed; each block holds its SM for the time its parameters state. Every
// kernel but the library's SM probe takes a tag (which launch it was, for the record) and a block
// time in ns as its last two parameters.
#include "model.h"

#include <algorithm>

namespace standin {
namespace {

template <size_t I>
uint64_t ns_param(const BlockCtx& c) {
  return c.param<uint64_t>(I);
}
template <size_t I>
uint32_t tag_param(const BlockCtx& c) {
  return c.param<uint32_t>(I);
}
template <typename T>
T* pointer(const BlockCtx& c, size_t i) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(c.param<uint64_t>(i)));
}

// standin_affine(uint32_t* x, uint32_t n, uint32_t mul, uint32_t add, uint32_t tag, uint64_t block_ns):
// x[i] = x[i] * mul + add over the block's share of a grid-stride loop. Affine maps do not
// commute, so a chain of them run out of order, or one run twice, gives another result.
void affine(const BlockCtx& c) {
  auto* x = pointer<uint32_t>(c, 0);
  const uint32_t n = c.param<uint32_t>(1), mul = c.param<uint32_t>(2), add = c.param<uint32_t>(3);
  const uint64_t threads = c.run.block.count();
  const uint64_t stride = c.run.grid.count() * threads;
  for (uint64_t base = c.linear * threads; base < n; base += stride) {
    for (uint64_t t = 0; t < threads && base + t < n; ++t) x[base + t] = x[base + t] * mul + add;
  }
}

// standin_add(uint32_t* dst, const uint32_t* src, uint32_t n, uint32_t tag, uint64_t block_ns):
// dst[i] += src[i] (a dependency between two streams' buffers shows in the result).
void add(const BlockCtx& c) {
  auto* dst = pointer<uint32_t>(c, 0);
  const auto* src = pointer<const uint32_t>(c, 1);
  const uint32_t n = c.param<uint32_t>(2);
  const uint64_t threads = c.run.block.count();
  const uint64_t stride = c.run.grid.count() * threads;
  for (uint64_t base = c.linear * threads; base < n; base += stride) {
    for (uint64_t t = 0; t < threads && base + t < n; ++t) dst[base + t] += src[base + t];
  }
}

// standin_log(uint32_t* log, uint32_t* count, uint32_t capacity, uint32_t tag, uint64_t block_ns):
// block 0 appends the tag to the log (the order kernels started in, as the program sees it).
void log(const BlockCtx& c) {
  if (c.linear != 0) return;
  auto* out = pointer<uint32_t>(c, 0);
  auto* count = pointer<uint32_t>(c, 1);
  const uint32_t slot = (*count)++;
  if (slot < c.param<uint32_t>(2)) out[slot] = c.param<uint32_t>(3);
}

// standin_residency(uint32_t* peak, uint32_t* used, uint32_t* sum, uint32_t tag, uint64_t block_ns):
// per SM, the most of this kernel's blocks resident at once and whether it ran there; the sum of
// the block indices (what no padding of its shared memory may change).
void residency(const BlockCtx& c) {
  auto* peak = pointer<uint32_t>(c, 0);
  auto* used = pointer<uint32_t>(c, 1);
  auto* sum = pointer<uint32_t>(c, 2);
  const auto sm = static_cast<size_t>(c.sm);
  peak[sm] = std::max(peak[sm], static_cast<uint32_t>(c.resident_on_sm));
  used[sm] = 1;
  *sum += static_cast<uint32_t>(c.linear);
}

// concord_smid_probe(uint32_t* seen, int64_t spin_cycles): the interception library's SM probe
// (src/intercept/probe_ptx.h): each block sets its SM's bit; it spins for that many cycles (2 GHz).
void smid_probe(const BlockCtx& c) {
  auto* seen = pointer<uint32_t>(c, 0);
  seen[c.sm / 32] |= 1u << (c.sm % 32);
}
uint64_t probe_ns(const BlockCtx& c) { return static_cast<uint64_t>(std::max<int64_t>(c.param<int64_t>(1), 0) / 2); }
uint32_t no_tag(const BlockCtx&) { return 0; }

// concord_doctor_probe(uint32_t tag): `concord doctor`'s probe (src/cli/doctor_probe.cpp): an empty
// kernel; each block holds its SM for 1 µs.
uint64_t one_us(const BlockCtx&) { return 1000; }

const std::vector<KernelSpec>& catalogue() {
  static const std::vector<KernelSpec> kernels = {
      {"standin_affine", {8, 4, 4, 4, 4, 8}, 32, 0, 1024, affine, ns_param<5>, tag_param<4>},
      {"standin_add", {8, 8, 4, 4, 8}, 32, 0, 1024, add, ns_param<4>, tag_param<3>},
      {"standin_spin", {4, 8}, 32, 0, 1024, nullptr, ns_param<1>, tag_param<0>},
      {"standin_log", {8, 8, 4, 4, 8}, 32, 0, 1024, log, ns_param<4>, tag_param<3>},
      {"standin_residency", {8, 8, 8, 4, 8}, 32, 0, 1024, residency, ns_param<4>, tag_param<3>},
      // Its registers and static shared memory hold it to 2 blocks of 256 threads per SM.
      {"standin_heavy", {4, 8}, 128, 64 * 1024, 1024, nullptr, ns_param<1>, tag_param<0>},
      {"concord_smid_probe", {8, 8}, 16, 0, 1024, smid_probe, probe_ns, no_tag},
      {"concord_doctor_probe", {4}, 16, 0, 1024, nullptr, one_us, tag_param<0>},
  };
  return kernels;
}

}  // namespace

const KernelSpec* find_kernel(const std::string& name) {
  for (const KernelSpec& k : catalogue()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace standin
