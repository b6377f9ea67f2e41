// The policies of src/policy/fedcm/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/fedcm/fedc_policy.h"
#include "policy/fedcm/fedcm_policy.h"
#include "policy/fedcm/krisp_policy.h"

namespace concord::policy {

void register_fedcm(Registrations& r) {
  r.add("fedcm", "FEDCM: collocation by Algorithm 1 and cache bypass (FEDCM paper, Section III); params sigma, gamma",
        make_fedcm);
  r.add("fedc", "FEDCM's collocation without cache bypass (FedC); param sigma", make_fedc);
  r.add("krisp", "KRISP as in FEDCM's evaluation: each kernel its own d x C SMs, disjoint where possible",
        make_krisp);
}

}  // namespace concord::policy
