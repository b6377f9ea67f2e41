// Fuzz target: the profile JSON import (`concord profile import`, and every row the store reads).
// Any input must give a profile or an error; nothing may throw or crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "concord/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto profile = concord::profile_from_json(text);
  if (profile.is_ok()) {
    // What was read can be written and read back.
    auto again = concord::profile_from_json(concord::profile_to_json(*profile));
    if (!again.is_ok()) std::abort();
  } else if (profile.status().message().empty()) {
    std::abort();
  }
  return 0;
}
