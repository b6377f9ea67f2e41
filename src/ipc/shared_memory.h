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
  // An anonymous object (memfd) of `bytes`, sealed against growing and shrinking: nothing in
  // /dev/shm, gone when the last mapping and descriptor go, and a peer that is handed the
  // descriptor cannot truncate it under the creator (which would fault its reads). Its file mode
  // is 0400 (a memfd is made 0777): a peer of another user cannot reopen it through
  // /proc/<pid>/fd at all, and none but root can reopen it for writing. The descriptor is kept
  // (fd()) so it can be passed over a Unix socket. `label` names it in messages.
  // `peers_write` false: also sealed against every later write and writable mapping
  // (F_SEAL_FUTURE_WRITE): the creator's own mapping still writes, nothing anyone maps or opens
  // afterwards does, root's reopened descriptors included.
  static Result<SharedMemory> create_sealed(const std::string& label, size_t bytes, bool peers_write = true);
  // Maps a sealed object received as a descriptor (taking the descriptor: it is closed here); one
  // whose size could still change is refused.
  static Result<SharedMemory> from_fd(int fd, const std::string& label);
  // The same, mapped read-only (a descriptor opened read-only can be mapped no other way).
  static Result<SharedMemory> from_fd_read_only(int fd, const std::string& label);

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
  // The descriptor of a sealed object this handle created (-1 otherwise).
  int fd() const { return fd_; }
  // Another descriptor of the sealed object this handle created, opened anew read-only: one
  // through which the peer can neither write nor resize it; the caller owns it.
  Result<int> reopen_read_only() const;
  // A copy of the creator's descriptor (read-write), for a peer that writes the object.
  Result<int> duplicate() const;
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
  int fd_ = -1;
};

}  // namespace concord::ipc
