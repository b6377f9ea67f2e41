#include "policy/aker/baymax_policy.h"

#include "mechanism/params.h"
#include "policy/aker/aker_policy.h"

namespace concord::policy {

Result<std::unique_ptr<Policy>> make_baymax(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("baymax", params, {"idle_cap"}));
  auto cap = idle_cap_param("baymax", params);
  if (!cap) return cap.status();
  return std::unique_ptr<Policy>(std::make_unique<BaymaxPolicy>(*cap));
}

}  // namespace concord::policy
