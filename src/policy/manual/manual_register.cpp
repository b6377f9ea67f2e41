// The policies of src/policy/manual/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/manual/manual_policy.h"

namespace concord::policy {

void register_manual(Registrations& r) {
  r.add("manual", "hand-written placements: params sms.T, tlp.T, cache.T, form, fuse=A+B, ratio=a:b",
        make_manual);
}

}  // namespace concord::policy
