#include "policy/fedcm/fedc_policy.h"

namespace concord::policy {

Result<std::unique_ptr<Policy>> make_fedc(const PolicyParams& params) {
  auto o = fedcm_options("fedc", params, false);
  if (!o) return o.status();
  return std::unique_ptr<Policy>(std::make_unique<FedcmPolicy>("fedc", *o, std::make_unique<NormalCaching>()));
}

}  // namespace concord::policy
