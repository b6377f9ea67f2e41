// The program `concord doctor` runs under the library by default (`concord doctor --probe`): it
// opens the driver, loads an empty kernel from PTX and launches it a few times on the primary
// context of device 0, through pointers dlsym gave (so under LD_PRELOAD the library's), as the
// CUDA runtime launches through the pointers cuGetProcAddress gives. It needs no CUDA headers:
// the few driver types it passes are handles and ints.
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cli/doctor.h"

namespace concord::cli::doctor {
namespace {

// An empty kernel taking one u32 (a tag): PTX 7.0 for sm_75, which any driver since CUDA 11
// compiles for its GPU. The stand-in driver of the tests has it in its catalogue.
constexpr const char kProbeKernel[] = "concord_doctor_probe";
constexpr const char kProbePtx[] = R"ptx(
.version 7.0
.target sm_75
.address_size 64

.visible .entry concord_doctor_probe(
	.param .u32 tag_param
)
{
	ret;
}
)ptx";
constexpr int kLaunches = 8;

using Handle = void*;
using CuResult = int;

// Under the library the process is a tenant of concordd only while it lives: it stays until
// whoever runs it closes its standard input (doctor does once it saw the daemon count the
// launches), at most 5 s.
void linger() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  char buf[256];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{0, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return;
    if (::read(0, buf, sizeof buf) <= 0) return;
  }
}

}  // namespace

int run_probe(const std::string& libcuda) {
  void* lib = ::dlopen(libcuda.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    std::printf("probe: cannot open %s: %s\n", libcuda.c_str(), ::dlerror());
    return 2;
  }
  auto sym = [&](const char* name) { return ::dlsym(lib, name); };
  auto* get_error_name = reinterpret_cast<CuResult (*)(CuResult, const char**)>(sym("cuGetErrorName"));
  auto* init = reinterpret_cast<CuResult (*)(unsigned)>(sym("cuInit"));
  auto* device_get = reinterpret_cast<CuResult (*)(int*, int)>(sym("cuDeviceGet"));
  auto* retain = reinterpret_cast<CuResult (*)(Handle*, int)>(sym("cuDevicePrimaryCtxRetain"));
  auto* release = reinterpret_cast<CuResult (*)(int)>(sym("cuDevicePrimaryCtxRelease_v2"));
  auto* set_current = reinterpret_cast<CuResult (*)(Handle)>(sym("cuCtxSetCurrent"));
  auto* load = reinterpret_cast<CuResult (*)(Handle*, const void*)>(sym("cuModuleLoadData"));
  auto* unload = reinterpret_cast<CuResult (*)(Handle)>(sym("cuModuleUnload"));
  auto* get_function = reinterpret_cast<CuResult (*)(Handle*, Handle, const char*)>(sym("cuModuleGetFunction"));
  auto* launch = reinterpret_cast<CuResult (*)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle,
                                               void**, void**)>(sym("cuLaunchKernel"));
  auto* synchronize = reinterpret_cast<CuResult (*)()>(sym("cuCtxSynchronize"));
  for (const auto& [name, fn] : {std::pair<const char*, void*>{"cuInit", reinterpret_cast<void*>(init)},
                                 {"cuDeviceGet", reinterpret_cast<void*>(device_get)},
                                 {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(retain)},
                                 {"cuDevicePrimaryCtxRelease_v2", reinterpret_cast<void*>(release)},
                                 {"cuCtxSetCurrent", reinterpret_cast<void*>(set_current)},
                                 {"cuModuleLoadData", reinterpret_cast<void*>(load)},
                                 {"cuModuleUnload", reinterpret_cast<void*>(unload)},
                                 {"cuModuleGetFunction", reinterpret_cast<void*>(get_function)},
                                 {"cuLaunchKernel", reinterpret_cast<void*>(launch)},
                                 {"cuCtxSynchronize", reinterpret_cast<void*>(synchronize)}}) {
    if (fn == nullptr) {
      std::printf("probe: %s has no %s\n", libcuda.c_str(), name);
      return 2;
    }
  }
  auto failed = [&](const char* call, CuResult r) {
    const char* name = nullptr;
    if (get_error_name != nullptr) get_error_name(r, &name);
    std::printf("probe: %s failed: %s (%d)\n", call, name != nullptr ? name : "?", r);
    return 2;
  };
  int device = 0;
  Handle context = nullptr, module = nullptr, function = nullptr;
  if (CuResult r = init(0); r != 0) return failed("cuInit", r);
  if (CuResult r = device_get(&device, 0); r != 0) return failed("cuDeviceGet", r);
  if (CuResult r = retain(&context, device); r != 0) return failed("cuDevicePrimaryCtxRetain", r);
  if (CuResult r = set_current(context); r != 0) return failed("cuCtxSetCurrent", r);
  if (CuResult r = load(&module, kProbePtx); r != 0) return failed("cuModuleLoadData", r);
  if (CuResult r = get_function(&function, module, kProbeKernel); r != 0) return failed("cuModuleGetFunction", r);
  for (unsigned tag = 0; tag < kLaunches; ++tag) {
    void* params[] = {&tag};
    if (CuResult r = launch(function, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr); r != 0) return failed("cuLaunchKernel", r);
  }
  if (CuResult r = synchronize(); r != 0) return failed("cuCtxSynchronize", r);
  if (CuResult r = unload(module); r != 0) return failed("cuModuleUnload", r);
  if (CuResult r = release(device); r != 0) return failed("cuDevicePrimaryCtxRelease", r);
  std::printf("probe: %d launches on device 0\n", kLaunches);
  std::fflush(stdout);
  linger();
  return 0;
}

}  // namespace concord::cli::doctor
