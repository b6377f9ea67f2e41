// What the stand-in's entry points share: the export macro, the table cuGetProcAddress answers
// from (each entry point registers itself beside its definition), and the error path (every
// failing call is a line in the record).
#pragma once

#include "model.h"

#include <string>
#include <vector>

#define STANDIN_API extern "C" __attribute__((visibility("default")))

namespace standin {

struct Proc {
  const char* exported;  // the symbol, e.g. "cuLaunchKernel_ptsz"
  const char* base;      // what cuGetProcAddress is asked for, e.g. "cuLaunchKernel"
  int version;           // the first CUDA version whose lookup of `base` yields it
  bool per_thread;       // the per-thread-default-stream flavour
  void* fn;
};
std::vector<Proc>& procs();
struct ProcRegistrar {
  ProcRegistrar(const char* exported, const char* base, int version, bool per_thread, void* fn) {
    procs().push_back(Proc{exported, base, version, per_thread, fn});
  }
};

// Records the failure of `call` and returns `r`.
CUresult fail(const char* call, CUresult r, const std::string& detail = "");

using Lock = std::unique_lock<std::mutex>;

// The device a CUdevice names (null when it names none).
Device* device_of(CUdevice d);
// Fills in the device's primary context (made on first use).
Context* primary_of(Device& d);

}  // namespace standin

#define STANDIN_PROC(fn, base, version, per_thread) \
  static const ::standin::ProcRegistrar proc_##fn(#fn, base, version, per_thread, reinterpret_cast<void*>(&::fn))

// Every entry point but cuInit, the version, error-name and lookup calls answers "not initialised"
// before cuInit, as the driver does.
#define STANDIN_REQUIRE_INIT(call)                                         \
  do {                                                                     \
    if (!::standin::driver().initialized) return ::standin::fail(call, CUDA_ERROR_NOT_INITIALIZED); \
  } while (0)
