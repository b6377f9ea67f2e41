// libconcord_intercept.so's dlsym hook and exports, without a GPU: run with the library preloaded
// (tests/CMakeLists.txt sets LD_PRELOAD) against the CUDA toolkit's stub libcuda, whose functions
// exist but only answer "stub library".
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "intercept/symbols.h"

namespace concord::intercept {
namespace {

std::string object_of(void* p) {
  Dl_info info{};
  if (!p || dladdr(p, &info) == 0 || !info.dli_fname) return "";
  return info.dli_fname;
}

bool is_library(const std::string& path) { return path.find("libconcord_intercept.so") != std::string::npos; }

TEST(InterceptDlsym, LookupsInLibcudaGetTheWrappersAndNothingElse) {
  const char* preload = std::getenv("LD_PRELOAD");
  ASSERT_TRUE(preload && is_library(preload)) << "run with LD_PRELOAD=libconcord_intercept.so";
  void* cuda = dlopen(CONCORD_CUDA_STUB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(cuda, nullptr) << dlerror();
  for (const EntryPoint& e : entry_points()) {
    void* p = dlsym(cuda, e.exported);
    ASSERT_NE(p, nullptr) << e.exported;
    EXPECT_TRUE(is_library(object_of(p))) << e.exported << " resolved to " << object_of(p);
    // The same wrapper by the default search (the preloaded export).
    EXPECT_EQ(p, dlsym(RTLD_DEFAULT, e.exported)) << e.exported;
  }
  // What is not intercepted is libcuda's own.
  for (const char* name : {"cuMemcpyAsync", "cuInit", "cuModuleGetFunction", "cuEventRecord"}) {
    void* p = dlsym(cuda, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_FALSE(is_library(object_of(p))) << name << " resolved to " << object_of(p);
  }
  EXPECT_EQ(dlsym(cuda, "cuNoSuchFunction"), nullptr);
  dlclose(cuda);
}

TEST(InterceptDlsym, OnlyTheHooksAreExported) {
  // The library's internals (and the static layers in it) are local.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "_ZN7concord9intercept11real_driverEv"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "_ZN7concord3ipc12TenantClient7connectERKNS0_19TenantClientOptionsE"), nullptr);
  EXPECT_TRUE(is_library(object_of(dlsym(RTLD_DEFAULT, "concord_request_begin"))));
  EXPECT_TRUE(is_library(object_of(dlsym(RTLD_DEFAULT, "dlsym"))));
}

}  // namespace
}  // namespace concord::intercept
