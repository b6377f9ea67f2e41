// The policies of src/policy/concord/ under their names (src/policy/registration.h).
#include "policy/concord/concord_lease.h"
#include "policy/concord/concord_policy.h"
#include "policy/registration.h"

namespace concord::policy {

void register_concord(Registrations& r) {
  r.add("concord",
        "Concord's own LC/BE policy: LC at once on every SM; elastic BE shrinks to the TPCs the LC leaves (tidal), opaque BE "
        "passes Orion's gate; params dur_fraction, tolerance, window, steps, reserve, be_tlp, elastic_gate",
        make_concord);
  r.add_lease("concord", make_concord_lease);
}

}  // namespace concord::policy
