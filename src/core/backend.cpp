// The Backend interface's out-of-line members: its destructor (the one place its vtable is
// emitted) and the default can_implement, which applies the placement rule (placement_rule.h).
#include "concord/backend.h"

#include "concord/placement_rule.h"

namespace concord {

Backend::~Backend() = default;

Status Backend::can_implement(const DispatchRequest& request) const {
  if (request.parts.empty() || request.parts.size() > 2 || request.parts[0].kernel == nullptr ||
      (request.parts.size() == 2 && request.parts[1].kernel == nullptr)) {
    return check_dispatch_resources(device(), request, Capabilities{}, nullptr);
  }
  const Capabilities first = capabilities(*request.parts[0].kernel);
  if (request.parts.size() == 1) return check_dispatch_resources(device(), request, first, nullptr);
  const Capabilities second = capabilities(*request.parts[1].kernel);
  return check_dispatch_resources(device(), request, first, &second);
}

}  // namespace concord
