#include "kernels/device/fusion_compiler.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "cuda/check.h"
#include "concord/backend.h"
#include "kernels/device/fusion_sources.h"

namespace concord::kernels {
namespace {

// NVRTC's entry points, found with dlopen (nothing links libnvrtc, as nothing links libcuda).
struct Nvrtc {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcAddNameExpression) add_name = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

Result<const Nvrtc*> load_nvrtc() {
  static Nvrtc api;
  static Status status = [] {
    std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so"};
    for (const std::string& root : {env("CUDA_HOME"), env("CUDA_PATH"), std::string("/usr/local/cuda")}) {
      if (!root.empty()) names.push_back(root + "/lib64/libnvrtc.so.13");
    }
    void* lib = nullptr;
    std::string tried;
    for (const std::string& n : names) {
      lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      tried += (tried.empty() ? "" : ", ") + n;
    }
    if (!lib) return Status::unsupported("fusion compiler: cannot load NVRTC (tried " + tried + ")");
    auto bind = [&](auto& fn, const char* symbol) -> Status {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (!fn) return Status::unsupported(std::string("fusion compiler: NVRTC has no ") + symbol);
      return Status::ok();
    };
    CONCORD_RETURN_IF_ERROR(bind(api.version, "nvrtcVersion"));
    CONCORD_RETURN_IF_ERROR(bind(api.error_string, "nvrtcGetErrorString"));
    CONCORD_RETURN_IF_ERROR(bind(api.create, "nvrtcCreateProgram"));
    CONCORD_RETURN_IF_ERROR(bind(api.destroy, "nvrtcDestroyProgram"));
    CONCORD_RETURN_IF_ERROR(bind(api.add_name, "nvrtcAddNameExpression"));
    CONCORD_RETURN_IF_ERROR(bind(api.compile, "nvrtcCompileProgram"));
    CONCORD_RETURN_IF_ERROR(bind(api.log_size, "nvrtcGetProgramLogSize"));
    CONCORD_RETURN_IF_ERROR(bind(api.log, "nvrtcGetProgramLog"));
    CONCORD_RETURN_IF_ERROR(bind(api.cubin_size, "nvrtcGetCUBINSize"));
    CONCORD_RETURN_IF_ERROR(bind(api.cubin, "nvrtcGetCUBIN"));
    return Status::ok();
  }();
  if (!status) return status;
  return &api;
}

// NVRTC has no C++ standard library: the bodies need only the fixed-width integers. LP64 widths,
// as the host compiler's, so that a body's layout is the same on both sides.
constexpr const char* kCstdint = R"(#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long uint64_t; typedef unsigned long uintptr_t;
namespace std { using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t; using ::uint8_t;
using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::uintptr_t; }
)";

constexpr const char* kFusedSource = R"(#include "concord/device/launch.cuh"
#include "kernels/device/bodies.cuh"
#include "kernels/device/bodies_raise_aker.cuh"
)";

const char* cache_op_name(CachePolicy p) {
  switch (p) {
    case CachePolicy::normal: return "normal";
    case CachePolicy::l1_bypass: return "l1_bypass";
    case CachePolicy::l2_evict_first: return "l2_evict_first";
    case CachePolicy::both: return "both";
  }
  return "normal";
}

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h ^ 0xff;  // separates consecutive strings
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path);
  std::stringstream s;
  s << in.rdbuf();
  if (!in.good() && !in.eof()) return Status::io_error(path + ": read failed");
  return s.str();
}

}  // namespace

FusionCompiler& FusionCompiler::shared() {
  static FusionCompiler* compiler = new FusionCompiler();  // lives as long as the libraries it loaded
  return *compiler;
}

Result<std::string> FusionCompiler::cache_directory() {
  std::string dir = env("CONCORD_CACHE_DIR");
  std::string from = "CONCORD_CACHE_DIR";
  if (dir.empty() && !env("XDG_CACHE_HOME").empty()) {
    dir = env("XDG_CACHE_HOME") + "/concord";
    from = "XDG_CACHE_HOME";
  }
  if (dir.empty() && !env("HOME").empty()) {
    dir = env("HOME") + "/.cache/concord";
    from = "HOME";
  }
  if (dir.empty()) {
    return Status::failed_precondition("fusion compiler: no cache directory: set CONCORD_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  }
  dir += "/fused";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::io_error("fusion compiler: cache directory " + dir + " (from " + from + ") cannot be created: " +
                            ec.message() + "; set CONCORD_CACHE_DIR to a writable directory");
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return Status::io_error("fusion compiler: cache directory " + dir + " (from " + from +
                            ") is not writable; set CONCORD_CACHE_DIR to a writable directory");
  }
  return dir;
}

Status FusionCompiler::init() {
  auto api = load_nvrtc();
  if (!api) return api.status();
  CONCORD_RETURN_IF_ERROR(
      Status((*api)->version(&nvrtc_major_, &nvrtc_minor_) == NVRTC_SUCCESS ? StatusCode::ok : StatusCode::unsupported,
             "fusion compiler: nvrtcVersion failed"));
  int device = 0, major = 0, minor = 0;
  CONCORD_CUDA(cudaGetDevice(&device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CONCORD_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
  // mma.h and cuda_fp16.h (tc_gemm's body) come from the toolkit's include directory.
  std::string tried;
  for (const std::string& root : {env("CUDA_HOME"), env("CUDA_PATH"), std::string(CONCORD_CUDA_INCLUDE_DIR) + "/..",
                                  std::string("/usr/local/cuda")}) {
    if (root.empty() || root == "/..") continue;
    const std::string inc = root + "/include";
    if (std::filesystem::exists(inc + "/mma.h") && std::filesystem::exists(inc + "/cuda_fp16.h")) {
      cuda_include_ = inc;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + inc;
  }
  if (cuda_include_.empty()) {
    return Status::unsupported("fusion compiler: CUDA's headers (mma.h, cuda_fp16.h) are in none of " + tried +
                               "; set CUDA_HOME");
  }
  auto dir = cache_directory();
  if (!dir) return dir.status();
  cache_dir_ = *dir;
  return Status::ok();
}

Status FusionCompiler::available() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised_) {
    init_status_ = init();
    initialised_ = true;
  }
  return init_status_;
}

FusionStats FusionCompiler::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<std::string> FusionCompiler::compile(const FusedKernelKey& key, const std::string& name_expression) {
  auto api = load_nvrtc();
  if (!api) return api.status();
  const Nvrtc& nv = **api;
  std::vector<const char*> texts, names;
  for (int i = 0; i < kFusionSourceCount; ++i) {
    texts.push_back(kFusionSources[i].text);
    names.push_back(kFusionSources[i].name);
  }
  texts.push_back(kCstdint);
  names.push_back("cstdint");
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = nv.create(&prog, kFusedSource, "concord_fused.cu", static_cast<int>(texts.size()), texts.data(),
                                names.data());
      r != NVRTC_SUCCESS) {
    return Status::internal(std::string("fusion compiler: nvrtcCreateProgram: ") + nv.error_string(r));
  }
  struct Destroy {
    const Nvrtc& nv;
    nvrtcProgram* p;
    ~Destroy() { nv.destroy(p); }
  } destroy{nv, &prog};
  if (nvrtcResult r = nv.add_name(prog, name_expression.c_str()); r != NVRTC_SUCCESS) {
    return Status::internal(std::string("fusion compiler: nvrtcAddNameExpression: ") + nv.error_string(r));
  }
  const std::string arch = "-arch=" + arch_;
  const std::string include = "-I" + cuda_include_;
  const std::string regs = "--maxrregcount=" + std::to_string(key.register_cap);
  const char* options[] = {arch.c_str(), "-std=c++20", "-lineinfo", "-default-device", regs.c_str(), include.c_str()};
  const nvrtcResult r = nv.compile(prog, static_cast<int>(std::size(options)), options);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nv.log_size(prog, &n);
    std::string log(n, '\0');
    if (n > 0) nv.log(prog, log.data());
    return Status::internal("fusion compiler: " + key.body_a + " + " + key.body_b + " (" + cache_op_name(key.cache) +
                            "): " + nv.error_string(r) + ":\n" + log);
  }
  size_t size = 0;
  if (nv.cubin_size(prog, &size) != NVRTC_SUCCESS || size == 0) {
    return Status::internal("fusion compiler: NVRTC produced no cubin for " + name_expression);
  }
  std::string cubin(size, '\0');
  if (nv.cubin(prog, cubin.data()) != NVRTC_SUCCESS) {
    return Status::internal("fusion compiler: nvrtcGetCUBIN failed for " + name_expression);
  }
  return cubin;
}

Result<const void*> FusionCompiler::kernel(const FusedKernelKey& key) {
  CONCORD_RETURN_IF_ERROR(available());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  }
  // Compiled without the lock, so several threads compile different pairs at once; two threads
  // asking for the same pair both compile it and the first one's library is kept.
  if (key.parts < 2 || key.parts > kMaxFusedParts) {
    return Status::invalid_argument("fusion compiler: " + std::to_string(key.parts) + " parts per block (2.." +
                                    std::to_string(kMaxFusedParts) + ")");
  }
  const std::string name_expression = "&concord::device::fused_kernel<" + key.body_a + ", " + key.body_b +
                                      ", concord::device::CacheOp::" + cache_op_name(key.cache) + ", " +
                                      std::to_string(key.parts) + ">";
  // The key of the disk cache: everything that decides the cubin.
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fnv1a(h, kFusedSource);
  for (int i = 0; i < kFusionSourceCount; ++i) {
    h = fnv1a(h, kFusionSources[i].name);
    h = fnv1a(h, kFusionSources[i].text);
  }
  h = fnv1a(h, kCstdint);
  h = fnv1a(h, name_expression);
  h = fnv1a(h, arch_ + " maxrreg " + std::to_string(key.register_cap) + " nvrtc " + std::to_string(nvrtc_major_) + "." +
                   std::to_string(nvrtc_minor_));
  const std::string path = cache_dir_ + "/fused-" + hex(h) + ".cubin";
  std::string cubin;
  if (auto cached = read_file(path); cached && !cached->empty()) {
    cubin = std::move(*cached);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.from_disk;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto compiled = compile(key, name_expression);
    if (!compiled) return compiled.status();
    cubin = std::move(*compiled);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++stats_.compiled;
    }
    // Written under a private name, then renamed: a reader never sees half a file, and two
    // processes compiling the same kernel both leave a whole one.
    static std::atomic<int> serial{0};
    const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
      out.close();
      if (!out) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        return Status::io_error("fusion compiler: cannot write " + tmp + " (set CONCORD_CACHE_DIR to a writable directory)");
      }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) return Status::io_error("fusion compiler: cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  cudaLibrary_t library = nullptr;
  CONCORD_CUDA(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  unsigned count = 0;
  CONCORD_CUDA(cudaLibraryGetKernelCount(&count, library));
  if (count != 1) {
    return Status::internal("fusion compiler: " + path + " holds " + std::to_string(count) + " kernels (expected 1)");
  }
  cudaKernel_t k = nullptr;
  CONCORD_CUDA(cudaLibraryEnumerateKernels(&k, 1, library));
  // The library stays loaded for the process's life: launches may use it until the end.
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_.emplace(key, reinterpret_cast<const void*>(k)).first->second;
}

}  // namespace concord::kernels
