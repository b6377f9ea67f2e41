#include "ipc/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace concord::ipc {
namespace {

Status check_name(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos || name.size() > 250) {
    return Status::invalid_argument(fmt::format("shared memory name '{}': must be '/' then up to 249 bytes without '/'", name));
  }
  return Status::ok();
}

Status errno_status(const char* what, const std::string& name, int err) {
  const std::string m = fmt::format("shared memory {}: {}: {}", name, what, std::strerror(err));
  if (err == EEXIST) return Status::already_exists(m);
  if (err == ENOENT) return Status::not_found(m);
  if (err == EACCES || err == EPERM) return Status::permission_denied(m);
  return Status::io_error(m);
}

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<SharedMemory> SharedMemory::create(const std::string& name, size_t bytes, mode_t mode, std::optional<uid_t> owner) {
  CONCORD_RETURN_IF_ERROR(check_name(name));
  if (bytes == 0) return Status::invalid_argument(fmt::format("shared memory {}: size 0", name));
  Fd fd{::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)};
  if (fd.fd < 0) return errno_status("shm_open", name, errno);
  SharedMemory m;
  m.name_ = name;
  m.owner_ = true;
  m.linked_ = true;  // from here on, failures unlink it (m's destructor)
  // The umask may have narrowed the mode; the caller's mode is what the peer's access rests on.
  if (::fchmod(fd.fd, mode) != 0) return errno_status("fchmod", name, errno);
  if (owner && *owner != ::geteuid() && ::fchown(fd.fd, *owner, static_cast<gid_t>(-1)) != 0) {
    return errno_status("fchown", name, errno);
  }
  if (::ftruncate(fd.fd, static_cast<off_t>(bytes)) != 0) return errno_status("ftruncate", name, errno);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return errno_status("mmap", name, errno);
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  return m;
}

Result<SharedMemory> SharedMemory::open(const std::string& name) {
  CONCORD_RETURN_IF_ERROR(check_name(name));
  Fd fd{::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0)};
  if (fd.fd < 0) return errno_status("shm_open", name, errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return errno_status("fstat", name, errno);
  if (st.st_size <= 0) return Status::failed_precondition(fmt::format("shared memory {}: empty (its creator has not sized it yet)", name));
  const auto bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return errno_status("mmap", name, errno);
  SharedMemory m;
  m.name_ = name;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  return m;
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept { *this = std::move(other); }

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
    owner_ = std::exchange(other.owner_, false);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

SharedMemory::~SharedMemory() { reset(); }

Status SharedMemory::unlink() {
  if (!owner_ || !linked_) return Status::ok();
  linked_ = false;
  if (::shm_unlink(name_.c_str()) != 0 && errno != ENOENT) return errno_status("shm_unlink", name_, errno);
  return Status::ok();
}

void SharedMemory::reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  if (owner_ && linked_) ::shm_unlink(name_.c_str());
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  linked_ = false;
}

}  // namespace concord::ipc
