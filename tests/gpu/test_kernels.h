// Kernels that only the GPU tests run, outside the suite (no spec can name them): one whose
// blocks never end unless preempted, one that nothing stops, one that faults. register_test_kernels()
// gives the CUDA backend their device code (kernels::register_device_kernel).
#pragma once

#include "concord/kernel.h"
#include "concord/status.h"

namespace concord::testing {

// "test_spin": elastic; each of its 2^31 - 1 logical blocks spins for about 20 us, so it never
// ends within a test unless preempted (the persistent form stops at the next logical block).
KernelSpec spin_kernel();
// "test_hang": opaque (native only, like a library's kernel): one block of 32 threads that spins
// for ever; preemption cannot stop it. Its first launch on a backend (prepare_tenant's warm-up of
// an opaque kernel) ends at once.
KernelSpec hang_kernel();
// "test_fault": elastic; logical block 0 stores just above address 0, after spinning about a
// millisecond: cudaErrorIllegalAddress, which poisons the process's CUDA context.
KernelSpec fault_kernel();

// Registers the three with the CUDA backend (once; later calls do nothing).
Status register_test_kernels();

}  // namespace concord::testing
