// A POSIX shared-memory object mapped into this process (shm_open + mmap), owned by one RAII
// handle: unmapped when the handle goes, and unlinked too when this handle created the object.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "concord/status.h"

namespace concord::ipc {

class SharedMemory {
 public:
  // Creates `name` ("/" then no further "/", as shm_open wants) of `bytes`, zero-filled, with file
  // mode `mode`; already_exists when the name is taken (O_EXCL: never adopts a stranger's object).
  // `owner` (a uid): the object is handed to that user (fchown) before it is sized, so the
  // daemon (root) can make a tenant's rings that only the tenant's user can open.
  static Result<SharedMemory> create(const std::string& name, size_t bytes, mode_t mode = 0600,
                                     std::optional<uid_t> owner = std::nullopt);
  // Maps an existing object whole; its size is what fstat says, never what its contents claim.
  static Result<SharedMemory> open(const std::string& name);

  SharedMemory() = default;
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool owner() const { return owner_; }
  // Removes the name now (the mapping stays): the creator's side does it once the peer attached,
  // so nothing is left in /dev/shm if both die.
  Status unlink();

 private:
  void reset();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
  bool linked_ = false;
};

}  // namespace concord::ipc
