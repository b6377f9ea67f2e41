// The policies of src/policy/serial/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/serial/serial_policy.h"

namespace concord::policy {

void register_serial(Registrations& r) {
  r.add("serial", "one launch at a time on the whole GPU (baseline)", make_serial);
}

}  // namespace concord::policy
