// The policies of src/policy/concord/ under their names (src/policy/registration.h).
#include "policy/concord/concord_lease.h"
#include "policy/concord/concord_policy.h"
#include "policy/registration.h"

namespace concord::policy {

void register_concord(Registrations& r) {
  r.add("concord",
        "Concord's own LC/BE policy: LC at once on every SM; BE natively through Orion's gate; elastic BE shrunk to the TPCs "
        "the LC leaves (tidal) only while measured to leave the LC within slack; params dur_fraction, tolerance, window, "
        "steps, reserve, be_tlp, elastic_gate, native_alone, slack",
        make_concord);
  r.add_lease("concord", make_concord_lease);
}

}  // namespace concord::policy
