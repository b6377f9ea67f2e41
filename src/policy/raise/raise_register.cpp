// The policies of src/policy/raise/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/raise/raise_policy.h"
#include "policy/raise/type_order_policy.h"

namespace concord::policy {

void register_raise(Registrations& r) {
  r.add("raise", "RAISE: task streams by resource-type scores and dynamic block sizes (RAISE paper, Section V); params alpha, beta, streams, dims, tie, ahead, burst",
        make_raise);
  r.add("sq", "RAISE baseline: task streams, all tasks of one type then the next (COM, MEM, LAT); random dims; params streams, dims (random|min|mid|max)",
        make_sq);
  r.add("rr", "RAISE baseline: task streams, types COM, MEM, LAT in turn; random dims; params streams, dims (random|min|mid|max)", make_rr);
  r.add("rd", "RAISE baseline: task streams, random task order; random dims; params streams, dims (random|min|mid|max)", make_rd);
}

}  // namespace concord::policy
