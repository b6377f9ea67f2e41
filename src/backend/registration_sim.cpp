#include "backend/registration.h"
#include "concord/backend_factory.h"

namespace concord {

// A build without CUDA: the simulator, which make_backend() always knows, is all there is.
void register_builtin_backends() {}

}  // namespace concord
