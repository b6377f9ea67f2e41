// Fuzz target: the daemon protocol's decoder and the shared-memory ring's attach and pop, on bytes
// a hostile tenant process could write. Any input must give a message or a Status naming a field;
// a frame that decodes re-encodes to the same bytes; a ring read from arbitrary memory never
// reads outside it. Nothing may crash, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "ipc/protocol.h"
#include "ipc/ring.h"

namespace {

void check_frame(std::span<const uint8_t> bytes) {
  using namespace concord::ipc;
  concord::Result<Message> m = decode(bytes);
  if (!m.is_ok()) {
    if (m.status().message().find("field ") == std::string::npos) std::abort();
    return;
  }
  concord::Result<std::vector<uint8_t>> again = encode(*m);
  if (!again.is_ok() || again->size() != bytes.size() || std::memcmp(again->data(), bytes.data(), bytes.size()) != 0) {
    std::abort();
  }
  int channels = 0;
  for (Channel c : {Channel::up_ring, Channel::down_ring, Channel::control_request, Channel::control_reply}) {
    if (decode_on(bytes, c).is_ok() != allowed_on(type_of(*m), c)) std::abort();
    channels += allowed_on(type_of(*m), c) ? 1 : 0;
  }
  if (channels == 0) std::abort();  // every message type travels somewhere
}

void check_ring(std::span<const uint8_t> bytes) {
  using namespace concord::ipc;
  // The input as a ring's shared memory, 64-byte aligned as a mapping is.
  std::vector<std::byte> storage(bytes.size() + 64);
  const size_t pad = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  std::span<std::byte> memory(storage.data() + pad, bytes.size());
  if (!bytes.empty()) std::memcpy(memory.data(), bytes.data(), bytes.size());
  concord::Result<SpscRing> ring = SpscRing::attach(memory);
  if (!ring.is_ok()) return;
  std::vector<uint8_t> out(ring->max_message());
  for (uint32_t i = 0; i <= ring->geometry().capacity; ++i) {
    concord::Result<size_t> n = ring->try_pop(out);
    if (!n.is_ok() || *n == 0) break;
    if (*n > out.size()) std::abort();
    check_frame({out.data(), *n});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  check_frame(bytes);
  check_ring(bytes);
  return 0;
}
