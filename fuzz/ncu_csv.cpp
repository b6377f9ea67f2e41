// Fuzz target: the Nsight Compute CSV reader (`concord profile raise --from-csv`) and the RAISE
// vectors made from what it reads. Any input must give launches or an error; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "profile/ncu.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto launches = concord::profile::parse_ncu_csv(text, "fuzz.csv");
  if (!launches.is_ok()) {
    if (launches.status().message().empty()) std::abort();
    return 0;
  }
  if (!launches->empty()) {
    auto vector = concord::profile::raise_vector(*launches, "fuzz.csv");
    (void)vector.is_ok();
    for (size_t jobs : {size_t{1}, size_t{2}}) {
      auto split = concord::profile::split_at_markers(*launches, jobs, "fuzz.csv");
      (void)split.is_ok();
    }
  }
  return 0;
}
