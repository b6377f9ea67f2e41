// The policies of src/policy/aker/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/aker/aker_policy.h"
#include "policy/aker/baymax_policy.h"
#include "policy/aker/tacker_policy.h"

namespace concord::policy {

void register_aker(Registrations& r) {
  r.add("aker", "Aker (Aker paper, Section 8.3): one kernel at a time; the newest LC query's kernel fused with the BE kernel of largest gain, split at the opportune ratio, when within the QoS headroom; else reorder; BE + BE fusion when no LC is ready; param idle_cap",
        make_aker);
  r.add("tacker", "Tacker (Aker's baseline): Aker's manager with whole BE kernels fused, tensor-core + CUDA-core pairs only; param idle_cap",
        make_tacker);
  r.add("baymax", "Baymax (Aker's baseline): one kernel at a time; a BE kernel runs before the LC kernel only if it fits every query's headroom; param idle_cap",
        make_baymax);
}

}  // namespace concord::policy
