// The policies of src/policy/sgdrc/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/sgdrc/sgdrc_lease.h"
#include "policy/sgdrc/sgdrc_policy.h"

namespace concord::policy {

void register_sgdrc(Registrations& r) {
  r.add("sgdrc", "SGDRC: one LC + one BE kernel, tidal SM masking of elastic BE (SGDRC paper, Sections 4, 7.1); params window, tolerance, steps, reserve, be_tlp",
        make_sgdrc);
  r.add_lease("sgdrc", make_sgdrc_lease);
}

}  // namespace concord::policy
