#include "ipc/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <tuple>
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

// Maps all of an object opened as `fd` (its size from fstat, never from its contents).
Result<std::pair<std::byte*, size_t>> map_whole(int fd, const std::string& name, int prot = PROT_READ | PROT_WRITE) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_status("fstat", name, errno);
  if (st.st_size <= 0) return Status::failed_precondition(fmt::format("shared memory {}: empty (its creator has not sized it yet)", name));
  const auto bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno_status("mmap", name, errno);
  return std::pair{static_cast<std::byte*>(p), bytes};
}

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
  auto mapped = map_whole(fd.fd, name);
  if (!mapped.is_ok()) return mapped.status();
  SharedMemory m;
  m.name_ = name;
  std::tie(m.data_, m.size_) = *mapped;
  return m;
}

Result<SharedMemory> SharedMemory::create_sealed(const std::string& label, size_t bytes, bool peers_write) {
  if (bytes == 0) return Status::invalid_argument(fmt::format("shared memory {}: size 0", label));
  Fd fd{::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (fd.fd < 0) return errno_status("memfd_create", label, errno);
  if (::fchmod(fd.fd, 0400) != 0) return errno_status("fchmod", label, errno);
  if (::ftruncate(fd.fd, static_cast<off_t>(bytes)) != 0) return errno_status("ftruncate", label, errno);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return errno_status("mmap", label, errno);
  // F_SEAL_SEAL last: nobody, a peer with a writable descriptor included, adds a seal later (one
  // against writes would keep the next writer from mapping it).
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | (peers_write ? 0 : F_SEAL_FUTURE_WRITE);
  if (::fcntl(fd.fd, F_ADD_SEALS, seals) != 0) {
    const int err = errno;
    ::munmap(p, bytes);
    return errno_status("F_ADD_SEALS", label, err);
  }
  SharedMemory m;
  m.name_ = label;
  m.owner_ = true;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  m.fd_ = std::exchange(fd.fd, -1);
  return m;
}

namespace {

Result<std::pair<std::byte*, size_t>> map_sealed(int raw, const std::string& label, int prot) {
  Fd fd{raw};
  const int seals = ::fcntl(fd.fd, F_GET_SEALS);
  if (seals < 0) return errno_status("F_GET_SEALS", label, errno);
  if ((seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL)) {
    return Status::failed_precondition(fmt::format("shared memory {}: not sealed against shrinking", label));
  }
  return map_whole(fd.fd, label, prot);
}

}  // namespace

Result<SharedMemory> SharedMemory::from_fd(int raw, const std::string& label) {
  auto mapped = map_sealed(raw, label, PROT_READ | PROT_WRITE);
  if (!mapped.is_ok()) return mapped.status();
  SharedMemory m;
  m.name_ = label;
  std::tie(m.data_, m.size_) = *mapped;
  return m;
}

Result<SharedMemory> SharedMemory::from_fd_read_only(int raw, const std::string& label) {
  auto mapped = map_sealed(raw, label, PROT_READ);
  if (!mapped.is_ok()) return mapped.status();
  SharedMemory m;
  m.name_ = label;
  std::tie(m.data_, m.size_) = *mapped;
  return m;
}

Result<int> SharedMemory::reopen_read_only() const {
  if (fd_ < 0) return Status::failed_precondition(fmt::format("shared memory {}: not a sealed object this process made", name_));
  const std::string path = fmt::format("/proc/self/fd/{}", fd_);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("reopen", name_, errno);
  return fd;
}

Result<int> SharedMemory::duplicate() const {
  if (fd_ < 0) return Status::failed_precondition(fmt::format("shared memory {}: not a sealed object this process made", name_));
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return errno_status("dup", name_, errno);
  return fd;
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
    fd_ = std::exchange(other.fd_, -1);
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
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  linked_ = false;
}

}  // namespace concord::ipc
