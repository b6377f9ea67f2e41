// The policies of src/policy/static_partition/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/static_partition/static_partition_policy.h"

namespace concord::policy {

void register_static_partition(Registrations& r) {
  r.add("static-partition", "MPS-like: each tenant a fixed even TPC-granular share of SMs (baseline)",
        make_static_partition);
}

}  // namespace concord::policy
