// The policies of src/policy/streams/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/streams/streams_lease.h"
#include "policy/streams/streams_policy.h"

namespace concord::policy {

void register_streams(Registrations& r) {
  r.add("streams", "everything concurrent, one stream per tenant; the hardware decides (baseline)",
        make_streams);
  r.add_lease("streams", make_streams_lease);
}

}  // namespace concord::policy
