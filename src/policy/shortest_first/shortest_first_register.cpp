// The policies of src/policy/shortest_first/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/shortest_first/shortest_first_policy.h"

namespace concord::policy {

void register_shortest_first(Registrations& r) {
  r.add("shortest-first", "the shortest ready kernel first (its shortest_first facet, else the estimator), one at a time on the whole GPU",
        make_shortest_first);
}

}  // namespace concord::policy
