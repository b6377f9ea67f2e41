// The policies of src/policy/orion/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/orion/orion_lease.h"
#include "policy/orion/orion_policy.h"

namespace concord::policy {

void register_orion(Registrations& r) {
  r.add("orion", "Orion (LC baseline, as its public code behaves): LC at once on a high-priority stream; BE only when no LC request is active, or within the SM threshold with a profile unlike the LC kernel's; BE waits once its outstanding duration passes a share of the LC request's latency; params sm_threshold, dur_fraction, ahead",
        make_orion);
  r.add_lease("orion", make_orion_lease);
}

}  // namespace concord::policy
