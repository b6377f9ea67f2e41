// The policies of src/policy/random/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/random/random_policy.h"

namespace concord::policy {

void register_random(Registrations& r) {
  r.add("random", "seeded random order, one launch at a time on the whole GPU; param streams=N (baseline)",
        make_random);
}

}  // namespace concord::policy
