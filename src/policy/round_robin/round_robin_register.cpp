// The policies of src/policy/round_robin/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/round_robin/round_robin_policy.h"

namespace concord::policy {

void register_round_robin(Registrations& r) {
  r.add("round-robin", "tenants take turns, one launch at a time on the whole GPU; param streams=N (baseline)",
        make_round_robin);
}

}  // namespace concord::policy
