// The LeasePolicy interface's destructor: the one place its vtable is emitted (the policies' lease
// forms live in their folders, the daemon's lease runner in src/daemon/).
#include "concord/lease.h"

namespace concord {

LeasePolicy::~LeasePolicy() = default;

}  // namespace concord
