// The policies of src/policy/priority_streams/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/priority_streams/priority_streams_lease.h"
#include "policy/priority_streams/priority_streams_policy.h"

namespace concord::policy {

void register_priority_streams(Registrations& r) {
  r.add("priority-streams", "streams with LC tenants on a high-priority CUDA stream, BE on the lowest (baseline); param ahead",
        make_priority_streams);
  r.add_lease("priority-streams", make_priority_streams_lease);
}

}  // namespace concord::policy
