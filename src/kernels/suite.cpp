// The suite's kernel specs. Per-item costs are analytic estimates of each algorithm (FLOPs and
// compulsory DRAM bytes per work item); the profiler replaces durations with measured curves.
#include "concord/suite.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

namespace concord {
namespace {

struct Shape {
  const char* variant;
  int threads;
  int regs;
  int shared_bytes;
};

// Typical Min/Mid/Max block sizes (RAISE's kernel dimensions).
constexpr Shape kShapes1d[] = {{"min", 64, 32, 0}, {"mid", 256, 32, 0}, {"max", 1024, 32, 0}};

// A constraint of a body on its problem size, stated once for `concord kernels` and the check.
struct SizeRule {
  const char* statement;
  bool (*accepts)(int64_t size);
};
constexpr SizeRule kMultipleOf32{"a multiple of 32", [](int64_t n) { return n % 32 == 0; }};
constexpr SizeRule kMultipleOf16{"a multiple of 16", [](int64_t n) { return n % 16 == 0; }};
constexpr SizeRule kMultipleOf128{"a multiple of 128", [](int64_t n) { return n % 128 == 0; }};
constexpr SizeRule kPowerOfTwo{"a power of two", [](int64_t n) { return n > 0 && (n & (n - 1)) == 0; }};

struct Recipe {
  SuiteEntry entry;
  ComputeUnit unit = ComputeUnit::fp32;
  int items_per_thread = 1;
  int regs = 32;
  int shared_bytes_per_thread = 0;  // tiles scale with the block
  double l1_sensitivity = 0;
  double l2_sensitivity = 0;
  // Work items, FLOPs per item and DRAM bytes per item for a problem size.
  double (*items)(int64_t size);
  double (*flops_per_item)(int64_t size);
  double (*bytes_per_item)(int64_t size);
  // Block sizes of the min/mid/max variants when the usual 64/256/1024 do not fit the body.
  std::array<int, 3> block_sizes = {64, 256, 1024};
  // Which other block sizes the body accepts: nullptr when `threads` is fine, else why not.
  const char* (*block_rule)(int threads) = nullptr;
  // Which sizes the body accepts beyond the entry's minimum; nullptr: any.
  const SizeRule* size_rule = nullptr;
};

std::string size_statement(const Recipe& r) {
  std::string s = r.size_rule ? std::string(r.size_rule->statement) + ", " : "";
  return s + "at least " + std::to_string(r.entry.min_size);
}

// matmul's tile is sqrt(threads) square and must divide 32 (sizes are multiples of 32).
const char* square_tile(int t) {
  for (int tile : {1, 2, 4, 8, 16, 32}) {
    if (tile * tile == t) return nullptr;
  }
  return "must be the square of a power of two (tile x tile threads, the tile dividing 32)";
}
// sgemm's tile is 32 x (threads / 8) and must divide 128.
const char* sgemm_tile(int t) {
  return t % 8 == 0 && 128 % (t / 8) == 0 ? nullptr : "must be 8 x a power of two up to 128 (a 32 x threads/8 tile)";
}
const char* tc_warps(int t) {
  return t % 32 == 0 && t <= 256 ? nullptr : "must be a multiple of 32 up to 256 (whole warps; registers for four accumulators)";
}

double linear(int64_t n) { return static_cast<double>(n); }
double square(int64_t n) { return static_cast<double>(n) * static_cast<double>(n); }

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> r = {
      // RAISE Table IV tasks
      {{"hotspot", "2D thermal stencil, size = grid side", "RAISE Table IV", true, 4096, 64},
       ComputeUnit::fp32, 1, 36, 0, 0.15, 0.05, square, [](int64_t) { return 15.0; },
       [](int64_t) { return 12.0; }},
      {{"vector_add", "c = a + b, size = elements", "RAISE Table IV", true, 1 << 26, 1024},
       ComputeUnit::fp32, 4, 16, 0, 0.0, 0.0, linear, [](int64_t) { return 1.0; },
       [](int64_t) { return 12.0; }},
      {{"matmul", "FP32 shared-memory tiled matmul, size = N", "RAISE Table IV", true, 4096, 64},
       ComputeUnit::fp32, 1, 40, 2, 0.05, 0.05, square,
       [](int64_t n) { return 2.0 * static_cast<double>(n); },
       [](int64_t n) { return 2.0 * 4.0 * static_cast<double>(n) / 16.0 + 4.0; },
       {64, 256, 1024}, square_tile, &kMultipleOf32},
      {{"srad", "speckle-reducing anisotropic diffusion, size = image side", "RAISE Table IV", true, 4096, 64},
       ComputeUnit::fp32, 1, 40, 0, 0.15, 0.05, square, [](int64_t) { return 30.0; },
       [](int64_t) { return 24.0; }},
      {{"cfd_flux", "CFD Euler flux, size = cells", "RAISE Table IV", true, 1 << 21, 1024},
       ComputeUnit::fp32, 1, 64, 0, 0.10, 0.10, linear, [](int64_t) { return 220.0; },
       [](int64_t) { return 124.0; }},
      {{"gaussian", "gaussian elimination fan step, size = matrix side", "RAISE Table IV", true, 8192, 64},
       ComputeUnit::fp32, 1, 24, 0, 0.05, 0.20, square, [](int64_t) { return 2.0; },
       [](int64_t) { return 12.0; }},
      {{"hotspot3d", "3D thermal stencil, size = layer side (8 layers)", "RAISE Table IV", true, 2048, 64},
       ComputeUnit::fp32, 1, 40, 0, 0.15, 0.10, [](int64_t n) { return 8.0 * square(n); },
       [](int64_t) { return 20.0; }, [](int64_t) { return 16.0; }},
      {{"kmeans", "k-means assignment (34 features, 5 clusters), size = points", "RAISE Table IV", true,
        1 << 20, 1024},
       ComputeUnit::fp32, 1, 32, 0, 0.20, 0.10, linear, [](int64_t) { return 510.0; },
       [](int64_t) { return 140.0; }},
      {{"bfs", "breadth-first search frontier step, size = nodes", "RAISE Table IV", true, 1 << 22, 1024},
       ComputeUnit::fp32, 1, 24, 0, 0.10, 0.30, linear, [](int64_t) { return 2.0; },
       [](int64_t) { return 64.0; }},
      {{"fft_stage", "radix-2 FFT stage, size = complex points", "RAISE Table IV", true, 1 << 24,
        1024},
       ComputeUnit::fp32, 2, 32, 0, 0.05, 0.10, linear, [](int64_t) { return 5.0; },
       [](int64_t) { return 16.0; }, {64, 256, 1024}, nullptr, &kPowerOfTwo},
      {{"pathfinder", "dynamic-programming pyramid (20 rows), size = columns", "RAISE Table IV", true,
        1 << 22, 1024},
       ComputeUnit::fp32, 1, 24, 2, 0.10, 0.0, linear, [](int64_t) { return 40.0; },
       [](int64_t) { return 84.0; }},
      {{"backprop", "back-propagation layer (16 hidden), size = input units", "RAISE Table IV", true,
        1 << 22, 1024},
       ComputeUnit::fp32, 1, 32, 0, 0.10, 0.05, linear, [](int64_t) { return 96.0; },
       [](int64_t) { return 72.0; }},
      // Aker's benchmark kernels
      {{"sgemm", "FP32 register-tiled GEMM, size = N", "Aker", true, 4096, 128}, ComputeUnit::fp32, 4,
       64, 2, 0.05, 0.05, square, [](int64_t n) { return 2.0 * static_cast<double>(n); },
       [](int64_t n) { return 2.0 * 4.0 * static_cast<double>(n) / 64.0 + 4.0; },
       {64, 256, 1024}, sgemm_tile, &kMultipleOf128},
      {{"stencil", "3D 7-point stencil, size = cube side", "Aker", true, 512, 32}, ComputeUnit::fp32, 1, 32,
       0, 0.20, 0.10, [](int64_t n) { return square(n) * static_cast<double>(n); },
       [](int64_t) { return 8.0; }, [](int64_t) { return 8.5; }},
      {{"lbm", "lattice-Boltzmann D3Q19 step, size = cells", "Aker", true, 1 << 22, 8192},
       ComputeUnit::fp32, 1, 80, 0, 0.05, 0.05, linear, [](int64_t) { return 260.0; },
       [](int64_t) { return 152.0; }},
      {{"mri_q", "MRI Q-matrix (2048 k-samples), size = voxels", "Aker", true, 1 << 18, 1024},
       ComputeUnit::fp32, 1, 32, 0, 0.0, 0.0, linear, [](int64_t) { return 2048.0 * 12.0; },
       [](int64_t) { return 24.0; }},
      // Tensor cores
      {{"tc_gemm", "FP16 tensor-core GEMM (WMMA, FP32 accumulate), size = N", "tensor core", true, 8192, 256},
       ComputeUnit::tensor, 32, 96, 0, 0.0, 0.05, square,
       [](int64_t n) { return 2.0 * static_cast<double>(n); },
       [](int64_t n) { return 2.0 * 2.0 * static_cast<double>(n) / 32.0 + 4.0; },
       {64, 128, 256}, tc_warps, &kMultipleOf32},  // four 16x16 accumulators per warp: 1024 threads would not get the registers
      // An inference layer: 3x3 convolution, 64 -> 64 channels, as im2col + tensor-core GEMM. An item
      // is one output element (filter, pixel): 2 x 576 FLOPs; DRAM bytes: its share of the pixel's
      // 64 FP32 activations (read once, the 3x3 window's reuse hits the caches) and its output.
      {{"conv_im2col", "3x3 convolution 64->64 channels as im2col + tensor-core GEMM (WMMA), size = image side",
        "tensor core", true, 256, 32},
       ComputeUnit::tensor, 32, 64, 17, 0.05, 0.05, [](int64_t n) { return square(n) * 64.0; },
       [](int64_t) { return 2.0 * 576.0; }, [](int64_t) { return 64.0 * 4.0 / 64.0 + 4.0; },
       {64, 128, 256}, tc_warps, &kMultipleOf16},  // a part stages threads/2 pixels x 64 im2col rows in FP16 (+32 bytes of alignment slack)
      // The compute + memory pair (docs/hardware.md): 2.1 and 2.3 ms alone on an H200
      {{"fma_loop", "compute-bound FMA chain (1024 FMA per element), size = elements", "compute + memory pair",
        true, 60 * (1 << 20), 1024},
       ComputeUnit::fp32, 1, 32, 0, 0.0, 0.0, linear, [](int64_t) { return 2048.0; },
       [](int64_t) { return 8.0; }},
      {{"stream_triad", "a = b + s * c, size = elements", "compute + memory pair", true, 800 * (1 << 20), 1024},
       ComputeUnit::fp32, 4, 24, 0, 0.0, 0.0, linear, [](int64_t) { return 2.0; },
       [](int64_t) { return 12.0; }},
      // Opaque library tenants
      {{"cublas_gemm", "cuBLAS FP16 GEMM (opaque), size = N", "library", false, 8192, 256},
       ComputeUnit::tensor, 32, 128, 96, 0.0, 0.05, square,
       [](int64_t n) { return 2.0 * static_cast<double>(n); },
       [](int64_t n) { return 2.0 * 2.0 * static_cast<double>(n) / 128.0 + 2.0; }},
      {{"cufft", "cuFFT 1D C2C (opaque), size = points", "library", false, 1 << 24, 1024},
       ComputeUnit::fp32, 8, 64, 8, 0.05, 0.10, linear,
       [](int64_t n) { return 5.0 * std::log2(static_cast<double>(std::max<int64_t>(n, 2))); },
       [](int64_t) { return 48.0; }},
  };
  return r;
}

}  // namespace

const std::vector<SuiteEntry>& suite_catalog() {
  static const std::vector<SuiteEntry> entries = [] {
    std::vector<SuiteEntry> e;
    for (const Recipe& r : recipes()) {
      e.push_back(r.entry);
      e.back().description += " (sizes: " + size_statement(r) + ")";
    }
    return e;
  }();
  return entries;
}

Result<KernelSpec> make_suite_kernel(const std::string& name, int64_t size) {
  return make_suite_kernel(name, size, std::nullopt);
}

Result<KernelSpec> make_suite_kernel_with_variant(const std::string& name, int64_t size, const std::string& variant) {
  const auto parsed = parse_variant_name(variant);
  if (parsed && !parsed->threads) return make_suite_kernel(name, size);
  const auto& names = kShapes1d;
  auto it = parsed ? std::find_if(std::begin(names), std::end(names), [&](const Shape& s) { return parsed->slot == s.variant; })
                   : std::end(names);
  if (it == std::end(names)) {
    return Status::invalid_argument("kernel '" + name + "': variant '" + variant + "' is not min|mid|max[@threads]");
  }
  auto usual = make_suite_kernel(name, size);
  if (!usual) return usual.status();
  if (!usual->elastic) return Status::invalid_argument("kernel '" + name + "' is a library kernel: it has no variant '" + variant + "'");
  BlockSizes blocks;
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = usual->variants[i].threads_per_block;
  blocks[static_cast<size_t>(it - std::begin(names))] = *parsed->threads;
  return make_suite_kernel(name, size, blocks);
}

Result<KernelSpec> make_suite_kernel(const std::string& name, int64_t size, const std::optional<BlockSizes>& blocks) {
  const auto& all = recipes();
  auto it = std::find_if(all.begin(), all.end(), [&](const Recipe& r) { return r.entry.name == name; });
  if (it == all.end()) return Status::not_found("unknown kernel '" + name + "'");
  const Recipe& r = *it;
  if (size < r.entry.min_size) {
    return Status::invalid_argument("kernel '" + name + "': size " + std::to_string(size) +
                                    " is below its minimum " + std::to_string(r.entry.min_size) + " (sizes: " +
                                    size_statement(r) + ")");
  }
  if (r.size_rule && !r.size_rule->accepts(size)) {
    return Status::invalid_argument("kernel '" + name + "': size " + std::to_string(size) + " is not " +
                                    r.size_rule->statement + " (sizes: " + size_statement(r) + ")");
  }
  if (blocks) {
    if (!r.entry.elastic) return Status::invalid_argument("kernel '" + name + "' is a library kernel: its block size is the library's");
    for (int t : *blocks) {
      const char* why = t < 1 || t > 1024 ? "must be 1..1024" : r.block_rule ? r.block_rule(t) : nullptr;
      if (why) return Status::invalid_argument("kernel '" + name + "': block size " + std::to_string(t) + " " + why);
    }
  }
  KernelSpec k;
  k.name = name;
  k.size = size;
  k.elastic = r.entry.elastic;
  k.unit = r.unit;
  k.l1_sensitivity = r.l1_sensitivity;
  k.l2_sensitivity = r.l2_sensitivity;
  const double items = r.items(size);
  const double flops = r.flops_per_item(size);
  const double bytes = r.bytes_per_item(size);
  // Library kernels come with the library's own launch shape: one variant.
  const size_t shapes = k.elastic ? std::size(kShapes1d) : 1;
  for (size_t s = 0; s < shapes; ++s) {
    Shape shape = k.elastic ? kShapes1d[s] : Shape{"library", 256, r.regs, 0};
    KernelVariant v;
    v.name = shape.variant;
    if (k.elastic) {
      shape.threads = blocks ? (*blocks)[s] : r.block_sizes[s];
      // Named apart from the usual variant, so their profiles never mix.
      if (shape.threads != r.block_sizes[s]) {
        v.name = std::string(shape.variant) + "@" + std::to_string(shape.threads);
      }
    }
    v.threads_per_block = shape.threads;
    v.registers_per_thread = r.regs;
    v.shared_bytes_per_block = r.shared_bytes_per_thread * shape.threads * 4;
    const double items_per_block = static_cast<double>(shape.threads) * r.items_per_thread;
    v.items_per_block = static_cast<int>(items_per_block);
    const double logical_blocks = std::ceil(items / items_per_block);
    if (!(logical_blocks <= static_cast<double>(kMaxLogicalBlocks))) {
      return Status::invalid_argument("kernel '" + name + "': size " + std::to_string(size) + " gives variant '" +
                                      v.name + "' " + fmt::format("{:.0f}", logical_blocks) + " logical blocks, over the " +
                                      std::to_string(kMaxLogicalBlocks) + " a launch's grid can hold");
    }
    v.logical_blocks = std::max<int64_t>(1, static_cast<int64_t>(logical_blocks));
    v.flops_per_block = flops * items_per_block;
    v.bytes_per_block = bytes * items_per_block;
    k.variants.push_back(v);
  }
  k.default_variant = k.elastic ? 1 : 0;  // "mid"
  return k;
}

std::vector<SuiteJob> suite_jobs(const std::vector<KernelSpec>& kernels) {
  std::vector<SuiteJob> out;
  std::set<std::tuple<std::string, int64_t, std::string>> seen;  // a variant's name carries its block size
  for (const KernelSpec& k : kernels) {
    for (const KernelVariant& v : k.variants) {
      if (seen.insert({k.name, k.size, v.name}).second) out.push_back({k.name, k.size, v.name});
    }
  }
  return out;
}

std::string suite_jobs_to_text(const std::vector<SuiteJob>& jobs) {
  std::string out;
  for (const SuiteJob& j : jobs) out += j.kernel + " " + std::to_string(j.size) + " " + j.variant + "\n";
  return out;
}

Result<std::vector<SuiteJob>> suite_jobs_from_text(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  std::vector<SuiteJob> out;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::istringstream words(line);
    SuiteJob j;
    std::string extra;
    if (!(words >> j.kernel >> j.size >> j.variant) || (words >> extra) || j.size <= 0) {
      return Status::parse_error(source + ":" + std::to_string(n) + ": expected 'kernel size variant', found '" + line + "'");
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace concord
