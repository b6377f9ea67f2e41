// The TenantSource interface's out-of-line members: its destructor (the one place its vtable is
// emitted) and the tenant class's name.
#include "concord/tenant_source.h"

namespace concord {

TenantSource::~TenantSource() = default;

const char* to_string(TenantClass c) { return c == TenantClass::latency_critical ? "LC" : "BE"; }

}  // namespace concord
