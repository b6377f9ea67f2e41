#include "intercept/green_context.h"

#include <vector>

namespace concord::intercept {

Result<OwnedGreenCtx> make_green_context(const RealDriver& driver, CUdevice device, std::span<const CUdevResource> parts) {
  if (parts.empty()) return Status::invalid_argument("green context: no SM resources to make it of");
  // cuDevResourceGenerateDesc takes its resources by non-const pointer (it only reads them).
  std::vector<CUdevResource> resources(parts.begin(), parts.end());
  CUdevResourceDesc desc{};
  CONCORD_INTERCEPT_CU(driver.dev_resource_generate_desc(&desc, resources.data(), static_cast<unsigned>(resources.size())));
  CUgreenCtx raw = nullptr;
  CONCORD_INTERCEPT_CU(driver.green_ctx_create(&raw, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
  return OwnedGreenCtx(&driver, raw);
}

}  // namespace concord::intercept
