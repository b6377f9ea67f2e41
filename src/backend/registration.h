// The backends built into this binary, registered with make_backend(): the simulator is always
// there; registration adds what the build was configured with (CUDA). The build links exactly one
// implementation (registration_sim.cpp, or cuda/registration_cuda.cpp), so no program carries a
// CUDA #ifdef: a program calls this once at start and asks available_backends() what it got.
#pragma once

namespace concord {

void register_builtin_backends();

}  // namespace concord
