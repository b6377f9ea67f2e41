// The Policy interface's destructor: the one place its vtable is emitted (the registry that makes
// policies by name is the policy folders', src/policy/registry.cpp).
#include "concord/policy.h"

namespace concord {

Policy::~Policy() = default;

}  // namespace concord
