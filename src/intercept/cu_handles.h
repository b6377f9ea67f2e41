// RAII owners of the driver handles the library makes (events, streams, green contexts, a
// module library, device memory), each destroyed through the real driver. Destructors never fail
// loudly: a destroy error at teardown has nowhere to go.
#pragma once

#include <cuda.h>

#include <utility>

#include "intercept/real_driver.h"

namespace concord::intercept {

template <typename Handle, typename Traits>
class Owned {
 public:
  Owned() = default;
  Owned(const RealDriver* driver, Handle h) : driver_(driver), h_(h) {}
  ~Owned() { reset(); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&& o) noexcept : driver_(o.driver_), h_(std::exchange(o.h_, Handle{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      driver_ = o.driver_;
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  void reset() {
    if (h_ != Handle{} && driver_) Traits::destroy(*driver_, h_);
    h_ = Handle{};
  }

 private:
  const RealDriver* driver_ = nullptr;
  Handle h_{};
};

struct EventTraits {
  static void destroy(const RealDriver& d, CUevent e) { d.event_destroy(e); }
};
struct StreamTraits {
  static void destroy(const RealDriver& d, CUstream s) {
    d.get<PFN_cuStreamDestroy_v4000>(Entry::StreamDestroy_v2)(s);
  }
};
struct GreenCtxTraits {
  static void destroy(const RealDriver& d, CUgreenCtx g) { d.green_ctx_destroy(g); }
};
struct LibraryTraits {
  static void destroy(const RealDriver& d, CUlibrary l) { d.library_unload(l); }
};
struct DeviceMemoryTraits {
  static void destroy(const RealDriver& d, CUdeviceptr p) { d.get<PFN_cuMemFree_v3020>(Entry::MemFree_v2)(p); }
};

using OwnedEvent = Owned<CUevent, EventTraits>;
using OwnedStream = Owned<CUstream, StreamTraits>;
using OwnedGreenCtx = Owned<CUgreenCtx, GreenCtxTraits>;
using OwnedLibrary = Owned<CUlibrary, LibraryTraits>;
using OwnedDeviceMemory = Owned<CUdeviceptr, DeviceMemoryTraits>;

}  // namespace concord::intercept
