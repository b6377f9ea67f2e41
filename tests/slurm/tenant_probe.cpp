// A Slurm job's stand-in for a CUDA program, for tests/slurm/slurm_jobs.sh (no GPU needed). Under
// the interception library (preloaded by concord_spank.so, with the CUDA toolkit's stub libcuda),
// marking a request registers the process with concordd as the plugin's variables say; it then
// stays for argv[1] seconds, as a tenant, and ends. Without the library it registers nothing.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

int main(int argc, char** argv) {
  auto* begin = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "concord_request_begin"));
  auto* end = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "concord_request_end"));
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  if (begin == nullptr || end == nullptr) {
    std::printf("probe: no interception library\n");
  } else {
    const int b = begin(), e = end();
    std::printf("probe: request marks %d %d (0: a tenant)\n", b, e);
  }
  std::fflush(stdout);
  const auto whole = static_cast<time_t>(seconds);
  timespec t{whole, static_cast<long>((seconds - static_cast<double>(whole)) * 1e9)};
  while (nanosleep(&t, &t) != 0) {
  }
  return 0;
}
