// GPU benchmarks of the device code, in one program (one device call):
//  (a) overhead: each kernel's elastic form (all SMs, full TLP) against its plain form;
//  (b) the compute + memory pair (docs/hardware.md): serial, streams, elastic sharing, static splits by
//      %smid and by green contexts, fused, and the ideal.
// Writes JSON to the path given as the first argument and prints Markdown tables.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "cuda/check.h"
#include "backend/cuda/green_contexts.h"
#include "cuda/handles.h"
#include "backend/cuda/timing.h"
#include "concord/build_info.h"
#include "concord/report.h"
#include "concord/suite.h"
#include "kernels/device/device_kernel.h"

using namespace concord;
using nlohmann::json;

namespace {

#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    const ::concord::Status s_ = (expr);                                      \
    if (!s_.is_ok()) {                                                        \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.to_string().c_str()); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

int g_sms = 0;
DeviceSpec g_device;  // the built-in spec of the model (peaks for the chunk rule), SM count measured

using Controls = cuda::ElasticControls;

// The shared timer with the bench's conventions: fatal on error, void callbacks.
double time_median(const std::vector<cudaStream_t>& streams, const std::function<void()>& before,
                   const std::function<void()>& work, int reps = 7) {
  auto t = cuda::time_median(
      streams, [&] { before(); return Status::ok(); }, [&] { work(); return Status::ok(); }, reps);
  CHECK_OK(t.status());
  return *t;
}

std::unique_ptr<kernels::DeviceKernel> make(const std::string& name, int64_t size) {
  auto spec = make_suite_kernel(name, size);
  CHECK_OK(spec.status());
  auto k = kernels::make_device_kernel(*spec);
  CHECK_OK(k.status());
  CHECK_OK((*k)->prepare(1));
  return std::move(*k);
}

// A kernel's default variant on all SMs: its range and elastic occupancy.
struct Baseline {
  int variant;
  BlockRange all;
  int occupancy;
};
Baseline baseline(const kernels::DeviceKernel& k) {
  const int v = k.spec().default_variant;
  const BlockRange all{0, k.spec().variant(v).logical_blocks};
  auto occ = k.elastic_occupancy(v);
  CHECK_OK(occ.status());
  return {v, all, *occ};
}

// The chunk rule's block time of the kernel (as the backend computes it).
double block_seconds(const kernels::DeviceKernel& k, const Baseline& b) {
  return cuda::slot_block_seconds(k.spec(), b.variant, g_device, b.occupancy);
}

// Median seconds of the plain launch (one CUDA block per logical block, all SMs).
double plain_time(kernels::DeviceKernel& k, const Baseline& b, cudaStream_t s, int reps = 7) {
  return time_median({s}, [] {}, [&] { CHECK_OK(k.launch_standalone(b.variant, b.all, CachePolicy::normal, s)); }, reps);
}

// Median seconds of the elastic form on all SMs at full TLP with the given chunk (0: the rule's).
double elastic_time(kernels::DeviceKernel& k, const Baseline& b, int chunk, cudaStream_t s, int reps = 7) {
  Controls ctl;
  if (chunk > 0) {
    ctl.add_with_chunk(b.all, SmSet::all(g_sms), b.occupancy, chunk);
  } else {
    ctl.add(b.all, SmSet::all(g_sms), b.occupancy, block_seconds(k, b));
  }
  return time_median({s}, [&] { CHECK_OK(ctl.upload()); },
                     [&] { CHECK_OK(k.launch_elastic(b.variant, CachePolicy::normal, ctl.at(0), b.occupancy * g_sms, s)); },
                     reps);
}

json overhead(cudaStream_t s) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"fma_loop", 60 << 20}, {"stream_triad", 400 << 20}, {"vector_add", 256 << 20}, {"hotspot", 8192},
      {"matmul", 4096},       {"kmeans", 64 << 20},         {"tc_gemm", 8192},
      {"srad", 8192},         {"cfd_flux", 4 << 20},        {"gaussian", 8192},
      {"hotspot3d", 2048},    {"bfs", 64 << 20},            {"fft_stage", 256 << 20},
      {"pathfinder", 16 << 20}, {"backprop", 16 << 20},     {"sgemm", 4096},
      {"stencil", 512},       {"lbm", 32 << 20},            {"mri_q", 1 << 20}};
  json rows = json::array();
  std::printf("\n(a) elastic overhead (all SMs, full TLP) vs plain launch\n| kernel | size | plain ms | elastic ms | overhead | blocks/SM plain, elastic |\n|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [name, size] : cases) {
    auto k = make(name, size);
    const Baseline b = baseline(*k);
    const int v = b.variant;
    // Plain and elastic runs alternate, one timed run of each per round after the warm-ups, and
    // each form's time is the median of its rounds: drift over the seconds a kernel's
    // measurement takes (clocks, memory state) then falls on both forms alike. (kmeans' plain
    // launch was seen to move by 5% between two back-to-back blocks of runs.)
    std::vector<double> plains, elastics;
    for (int round = 0; round < 9; ++round) {
      plains.push_back(plain_time(*k, b, s, 1));
      elastics.push_back(elastic_time(*k, b, 0, s, 1));
    }
    std::sort(plains.begin(), plains.end());
    std::sort(elastics.begin(), elastics.end());
    const double plain = plains[plains.size() / 2];
    const double elastic = elastics[elastics.size() / 2];
    const double over = elastic / plain - 1;
    const int plain_occ = *k->standalone_occupancy(v);
    std::printf("| %s | %lld | %.3f | %.3f | %+.1f%% | %d, %d |\n", name.c_str(), static_cast<long long>(size), plain * 1e3,
                elastic * 1e3, over * 100, plain_occ, b.occupancy);
    rows.push_back({{"kernel", name}, {"size", size}, {"plain_s", plain}, {"elastic_s", elastic}, {"overhead", over},
                    {"occupancy", b.occupancy}, {"standalone_occupancy", plain_occ}});
  }
  std::vector<double> overheads;
  for (const auto& r : rows) overheads.push_back(r["overhead"].get<double>());
  std::sort(overheads.begin(), overheads.end());
  std::printf("median overhead %+.1f%%, worst %+.1f%%\n", overheads[overheads.size() / 2] * 100, overheads.back() * 100);
  return rows;
}

json pair(cuda::GreenContextPool& green) {
  auto a = make("fma_loop", 60 << 20);
  auto b = make("stream_triad", 800 << 20);
  const int va = a->spec().default_variant, vb = b->spec().default_variant;
  const BlockRange ra{0, a->spec().variant(va).logical_blocks}, rb{0, b->spec().variant(vb).logical_blocks};
  cuda::Stream s1, s2;
  CHECK_OK(s1.create());
  CHECK_OK(s2.create());
  const int occ_a = *a->elastic_occupancy(va), occ_b = *b->elastic_occupancy(vb);
  json out;
  std::vector<json> rows;
  auto row = [&](const std::string& scheme, double t, json extra = json::object()) {
    extra["scheme"] = scheme;
    extra["seconds"] = t;
    rows.push_back(extra);
  };
  const double alone_a = time_median({s1.get()}, [] {}, [&] { CHECK_OK(a->launch_standalone(va, ra, CachePolicy::normal, s1.get())); });
  const double alone_b = time_median({s1.get()}, [] {}, [&] { CHECK_OK(b->launch_standalone(vb, rb, CachePolicy::normal, s1.get())); });
  out["alone_s"] = {alone_a, alone_b};
  row("serial", time_median({s1.get()}, [] {}, [&] {
        CHECK_OK(a->launch_standalone(va, ra, CachePolicy::normal, s1.get()));
        CHECK_OK(b->launch_standalone(vb, rb, CachePolicy::normal, s1.get()));
      }));
  row("streams", time_median({s1.get(), s2.get()}, [] {}, [&] {
        CHECK_OK(a->launch_standalone(va, ra, CachePolicy::normal, s1.get()));
        CHECK_OK(b->launch_standalone(vb, rb, CachePolicy::normal, s2.get()));
      }));
  // Both persistent on every SM, sharing each SM by TLP.
  for (const auto& [ta, tb] : std::vector<std::pair<int, int>>{{occ_a, occ_b}, {occ_a / 2, occ_b / 2}, {3 * occ_a / 4, occ_b / 4}}) {
    Controls ctl;
    ctl.add(ra, SmSet::all(g_sms), std::max(1, ta));
    ctl.add(rb, SmSet::all(g_sms), std::max(1, tb));
    row("elastic share tlp " + std::to_string(ta) + "/" + std::to_string(tb),
        time_median({s1.get(), s2.get()}, [&] { CHECK_OK(ctl.upload()); }, [&] {
          CHECK_OK(a->launch_elastic(va, CachePolicy::normal, ctl.at(0), occ_a * g_sms, s1.get()));
          CHECK_OK(b->launch_elastic(vb, CachePolicy::normal, ctl.at(1), occ_b * g_sms, s2.get()));
        }),
        {{"tlp_a", ta}, {"tlp_b", tb}});
  }
  // Static splits: compute kernel on the first k SMs.
  for (int k = 66; k <= 116; k += 10) {
    Controls ctl;
    ctl.add(ra, SmSet::range(0, k), occ_a);
    ctl.add(rb, SmSet::range(k, g_sms - k), occ_b);
    row("smid split " + std::to_string(k) + "/" + std::to_string(g_sms - k),
        time_median({s1.get(), s2.get()}, [&] { CHECK_OK(ctl.upload()); }, [&] {
          CHECK_OK(a->launch_elastic(va, CachePolicy::normal, ctl.at(0), occ_a * g_sms, s1.get()));
          CHECK_OK(b->launch_elastic(vb, CachePolicy::normal, ctl.at(1), occ_b * g_sms, s2.get()));
        }),
        {{"compute_sms", k}});
    auto ga = green.stream_for(SmSet::range(0, k), 1000 + k, 0);
    auto gb = green.stream_for(SmSet::range(k, g_sms - k), 2000 + k, 0);
    CHECK_OK(ga.status());
    CHECK_OK(gb.status());
    const int ka = green.cover(SmSet::range(0, k)).count();
    row("green split " + std::to_string(ka) + "/" + std::to_string(green.cover(SmSet::range(k, g_sms - k)).count()),
        time_median({*ga, *gb}, [] {}, [&] {
          CHECK_OK(a->launch_standalone(va, ra, CachePolicy::normal, *ga));
          CHECK_OK(b->launch_standalone(vb, rb, CachePolicy::normal, *gb));
        }),
        {{"compute_sms", ka}});
  }
  for (const auto& [pa, pb] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}}) {
    auto occ = kernels::fused_occupancy(*a, va, pa, *b, vb, pb);
    if (!occ.is_ok() || *occ == 0) continue;
    Controls ctl;
    ctl.add(ra, SmSet::all(g_sms), *occ);
    ctl.add(rb, SmSet::all(g_sms), *occ);
    row("fused " + std::to_string(pa) + ":" + std::to_string(pb), time_median({s1.get()}, [&] { CHECK_OK(ctl.upload()); }, [&] {
          CHECK_OK(kernels::launch_fused(*a, va, pa, ctl.at(0), *b, vb, pb, ctl.at(1), CachePolicy::normal, *occ * g_sms, s1.get()));
        }));
  }
  const double serial = rows.front()["seconds"].get<double>();
  std::printf("\n(b) compute-plus-memory pair: fma_loop %.3f ms, stream_triad %.3f ms alone\n| scheme | ms | speedup over serial |\n|---|---:|---:|\n",
              alone_a * 1e3, alone_b * 1e3);
  for (auto& r : rows) {
    r["speedup_over_serial"] = serial / r["seconds"].get<double>();
    std::printf("| %s | %.3f | %.3fx |\n", r["scheme"].get<std::string>().c_str(), r["seconds"].get<double>() * 1e3,
                r["speedup_over_serial"].get<double>());
  }
  std::printf("| ideal (longer alone) | %.3f | %.3fx |\n", std::max(alone_a, alone_b) * 1e3, serial / std::max(alone_a, alone_b));
  out["rows"] = rows;
  out["ideal_s"] = std::max(alone_a, alone_b);
  return out;
}

}  // namespace

// The elastic form of each kernel named in CONCORD_CHUNK_SWEEP ("name:size,name:size") at fixed
// chunk sizes, against its plain launch: where between one fetch per block and the count rule's
// chunk the elastic form does best.
json chunk_sweep(cudaStream_t s, const std::string& spec) {
  json rows = json::array();
  std::printf("\n(c) chunk sweep: elastic overhead against the chunk size\n| kernel | size | chunk | plain ms | elastic ms | overhead |\n|---|---:|---:|---:|---:|---:|\n");
  size_t at = 0;
  while (at < spec.size()) {
    const size_t comma = spec.find(',', at);
    const std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? spec.size() : comma + 1;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = item.substr(0, colon);
    const int64_t size = std::stoll(item.substr(colon + 1));
    auto k = make(name, size);
    const Baseline b = baseline(*k);
    const double plain = plain_time(*k, b, s);
    const int rule = cuda::chunk_for(b.all.size(), static_cast<int64_t>(b.occupancy) * g_sms, b.occupancy, block_seconds(*k, b));
    for (int chunk : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, rule}) {
      const double elastic = elastic_time(*k, b, chunk, s);
      std::printf("| %s | %lld | %d%s | %.3f | %.3f | %+.1f%% |\n", name.c_str(), static_cast<long long>(size), chunk,
                  chunk == rule ? " (rule)" : "", plain * 1e3, elastic * 1e3, (elastic / plain - 1) * 100);
      rows.push_back({{"kernel", name}, {"size", size}, {"chunk", chunk}, {"rule", chunk == rule}, {"plain_s", plain},
                      {"elastic_s", elastic}, {"overhead", elastic / plain - 1}});
    }
  }
  return rows;
}

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "gpu_bench.json";
  auto green = cuda::GreenContextPool::create(0);
  CHECK_OK(green.status());
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  g_sms = prop.multiProcessorCount;
  g_device = std::string(prop.name).find("H200") != std::string::npos ? h200_spec() : h100_sxm_spec();
  g_device.sm_count = g_sms;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device %s, %d SMs, driver API %d, runtime %d\n", prop.name, g_sms, driver, runtime);
  cuda::Stream s;
  CHECK_OK(s.create());
  auto spec = cuda::probe_device_spec(0);
  CHECK_OK(spec.status());
  json out = json::parse(provenance_json(*spec, "cuda", concord::build_version(), concord::build_commit()));
  out["device"] = prop.name;
  out["sm_count"] = g_sms;
  out["cuda_driver_api"] = driver;
  out["cuda_runtime"] = runtime;
  out["overhead"] = overhead(s.get());
  out["pair"] = pair(**green);
  if (const char* sweep = std::getenv("CONCORD_CHUNK_SWEEP")) out["chunk_sweep"] = chunk_sweep(s.get(), sweep);
  std::ofstream(path) << out.dump(1) << "\n";
  return 0;
}
