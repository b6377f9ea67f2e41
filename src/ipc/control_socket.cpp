#include "ipc/control_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace concord::ipc {
namespace {

Status sys_error(const std::string& what) {
  const int err = errno;
  const std::string m = fmt::format("control socket: {}: {}", what, std::strerror(err));
  if (err == EACCES || err == EPERM) return Status::permission_denied(m);
  if (err == ENOENT || err == ECONNREFUSED) return Status::not_found(m);
  return Status::io_error(m);
}

Result<sockaddr_un> address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) {
    return Status::invalid_argument(fmt::format("control socket: path '{}' is empty or longer than {} bytes", path, sizeof a.sun_path - 1));
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Writes all of `bytes` (the socket may take them in pieces); MSG_NOSIGNAL: a peer that left
// gives EPIPE, not SIGPIPE.
Status send_all(int fd, std::span<const uint8_t> bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      // The server's sockets are non-blocking: a peer whose receive buffer is full is not read
      // from again, rather than stalling every other client while it waits.
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::io_error("control socket: the peer does not read its replies");
      return sys_error("send");
    }
    sent += size_t(n);
  }
  return Status::ok();
}

Status reply(int fd, const Message& message, const std::vector<int>& fds = {}) {
  Result<std::vector<uint8_t>> frame = encode(message);
  if (!frame.is_ok()) return frame.status();
  if (fds.empty()) return send_all(fd, *frame);
  // The descriptors ride on the frame's first byte.
  char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (fds.size() > 4) return Status::internal("control socket: more than 4 descriptors in one reply");
  iovec iov{frame->data(), 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? Status::io_error("control socket: the peer does not read its replies")
                                                              : sys_error("sendmsg");
  }
  return send_all(fd, std::span<const uint8_t>(*frame).subspan(1));
}

ErrorReply error_reply(const Status& s) {
  std::string m = s.message();
  for (char& c : m) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (m.size() > limits::kErrorBytes) m.resize(limits::kErrorBytes);
  return ErrorReply{s.code(), std::move(m)};
}

// Reads exactly `bytes.size()` bytes before `deadline`; descriptors that come with them go to
// `fds` (closed when `fds` is null).
Status recv_exact(int fd, std::span<uint8_t> bytes, std::chrono::steady_clock::time_point deadline, std::vector<int>* fds) {
  size_t got = 0;
  while (got < bytes.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::deadline_exceeded("control socket: no reply in time");
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("poll");
    if (r == 0) continue;
    char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{bytes.data() + got, bytes.size() - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed = -1;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fds != nullptr) fds->push_back(passed);
        else ::close(passed);
      }
    }
    if (n == 0) return Status::io_error("control socket: the daemon closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("recv");
    }
    got += size_t(n);
  }
  return Status::ok();
}

// The pid of the server listening at `addr`, when one answers there (a connect that succeeds, or
// finds its backlog full); nullopt when nothing does (no file, or a socket nobody listens on).
std::optional<int32_t> live_server(const sockaddr_un& addr) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  const int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  std::optional<int32_t> pid;
  if (r == 0) {
    ucred cred{};
    socklen_t len = sizeof cred;
    pid = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
  } else if (err == EAGAIN || err == EINPROGRESS) {
    pid = 0;  // alive, its backlog full
  }
  ::close(fd);
  return pid;
}

}  // namespace

bool PeerCredentials::in_group(uint32_t group) const {
  return gid == group || std::find(groups.begin(), groups.end(), group) != groups.end();
}

Result<PeerCredentials> KernelCredentials::peer(int fd) const {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return sys_error("SO_PEERCRED");
  if (len != sizeof cred) return Status::io_error("control socket: SO_PEERCRED gave a short answer");
  PeerCredentials p{cred.pid, cred.uid, cred.gid};
  // The groups the peer had when it connected, from the kernel: no race with a pid that ended and
  // was reused, as reading /proc would have.
  std::vector<gid_t> groups(64);
  socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  bool got = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0;
  if (!got && errno == ERANGE) {
    groups.resize(glen / sizeof(gid_t) + 1);
    glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    got = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0;
  }
  if (got) p.groups.assign(groups.begin(), groups.begin() + std::min<size_t>(groups.size(), glen / sizeof(gid_t)));
  return p;
}

Result<uint32_t> group_id(const std::string& name) {
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  const int err = ::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found);
  if (err != 0) return Status::io_error(fmt::format("group '{}': getgrnam_r: {}", name, std::strerror(err)));
  if (found == nullptr) return Status::not_found(fmt::format("group '{}': no such group", name));
  return uint32_t(g.gr_gid);
}

Result<SocketPathLock> SocketPathLock::claim(const std::string& path, const std::string& what) {
  Result<sockaddr_un> addr = address(path);
  if (!addr.is_ok()) return addr.status();
  const std::string lock_path = path + ".lock";
  const auto fail = [&what](const std::string& op) {
    return Status::io_error(fmt::format("{}: {}: {}", what, op, std::strerror(errno)));
  };
  SocketPathLock lock;
  lock.lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (lock.lock_fd_ < 0) return fail("open " + lock_path);
  const auto refuse = [&](int32_t pid) {
    const std::string who = pid > 0 ? fmt::format("a live server (pid {})", pid) : std::string("a live server");
    return Status::already_exists(fmt::format("{} {}: {} serves it; stop it first (a second server never takes over a live "
                                              "one's socket)", what, path, who));
  };
  if (::flock(lock.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return fail("flock " + lock_path);
    // Held: the holder wrote its pid there (a server that answers says so itself too).
    char buf[32] = {};
    const ssize_t n = ::pread(lock.lock_fd_, buf, sizeof buf - 1, 0);
    int32_t pid = n > 0 ? static_cast<int32_t>(std::strtol(buf, nullptr, 10)) : 0;
    if (const std::optional<int32_t> answering = live_server(*addr); answering && *answering > 0) pid = *answering;
    return refuse(pid);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::already_exists(fmt::format("{}: {} exists and is not a socket", what, path));
    // A server that took no lock (an older daemon) may still be alive on it.
    if (const std::optional<int32_t> answering = live_server(*addr)) return refuse(*answering);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fail("unlink the stale " + path);
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(lock.lock_fd_, 0) != 0 || ::pwrite(lock.lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return fail("write " + lock_path);
  }
  lock.path_ = path;
  return lock;
}

void SocketPathLock::bound() {
  struct stat st {};
  if (::lstat(path_.c_str(), &st) != 0) return;
  bound_ = true;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

SocketPathLock::SocketPathLock(SocketPathLock&& other) noexcept { *this = std::move(other); }

SocketPathLock& SocketPathLock::operator=(SocketPathLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::exchange(other.path_, {});
    lock_fd_ = std::exchange(other.lock_fd_, -1);
    bound_ = std::exchange(other.bound_, false);
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

SocketPathLock::~SocketPathLock() { release(); }

void SocketPathLock::release() {
  struct stat st {};
  if (bound_ && ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(path_.c_str());
  bound_ = false;
  if (lock_fd_ >= 0) ::close(lock_fd_);  // the lock file stays: removing it would race a server taking it
  lock_fd_ = -1;
}

Result<ControlServer> ControlServer::listen(const ControlServerOptions& options, const CredentialSource& credentials,
                                            ControlHandler& handler) {
  Result<sockaddr_un> addr = address(options.path);
  if (!addr.is_ok()) return addr.status();
  Result<SocketPathLock> lock = SocketPathLock::claim(options.path, "control socket");
  if (!lock.is_ok()) return lock.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys_error("socket");
  ControlServer server(fd, std::move(*lock), credentials, handler, options);
  // Bind with no access for anyone, then open it to the mode: no window in which the umask's
  // wider default lets a stranger connect.
  const mode_t old_mask = ::umask(0777);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  ::umask(old_mask);
  if (bound != 0) return sys_error("bind " + options.path);
  server.lock_.bound();
  if (options.gid && ::chown(options.path.c_str(), static_cast<uid_t>(-1), *options.gid) != 0) {
    return sys_error(fmt::format("chown {} to group {}", options.path, *options.gid));
  }
  if (::chmod(options.path.c_str(), options.mode) != 0) return sys_error("chmod " + options.path);
  if (::listen(fd, 64) != 0) return sys_error("listen");
  return server;
}

ControlServer::ControlServer(ControlServer&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      lock_(std::move(other.lock_)),
      path_(std::exchange(other.path_, {})),
      credentials_(other.credentials_),
      handler_(other.handler_),
      options_(other.options_),
      connections_(other.connections_),
      clients_(std::exchange(other.clients_, {})),
      per_uid_(std::exchange(other.per_uid_, {})),
      malformed_(other.malformed_),
      refused_(other.refused_),
      timed_out_(other.timed_out_) {}

ControlServer::~ControlServer() {
  for (auto& [fd, client] : clients_) ::close(fd);
  if (fd_ >= 0) ::close(fd_);
}

void ControlServer::accept_all() {
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // EAGAIN: none left. Out of descriptors: retried in 50 ms. Others: the next poll retries.
      if (errno == EMFILE || errno == ENFILE) accept_paused_until_ = Clock::now() + std::chrono::milliseconds(50);
      return;
    }
    Result<PeerCredentials> peer = credentials_->peer(fd);
    Status refusal = peer.status();
    if (peer.is_ok() && static_cast<int>(clients_.size()) >= options_.max_clients) {
      refusal = Status::failed_precondition(fmt::format("control socket: {} connections, the limit", options_.max_clients));
    } else if (peer.is_ok() && peer->uid != 0 && per_uid_[peer->uid] >= options_.max_clients_per_uid) {
      refusal = Status::failed_precondition(
          fmt::format("control socket: uid {} holds {} connections, the limit per user", peer->uid, options_.max_clients_per_uid));
    }
    if (!refusal.is_ok()) {
      ++refused_;
      (void)reply(fd, error_reply(refusal));
      ::close(fd);
      continue;
    }
    peer->connection = ++connections_;
    const Clock::time_point now = Clock::now();
    clients_.emplace(fd, Client{*peer, {}, now, now});
    ++per_uid_[peer->uid];
  }
}

void ControlServer::drop(int fd) {
  const auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  const PeerCredentials peer = it->second.peer;
  clients_.erase(it);
  if (auto u = per_uid_.find(peer.uid); u != per_uid_.end() && --u->second <= 0) per_uid_.erase(u);
  ::close(fd);
  handler_->disconnected(peer);
}

bool ControlServer::read_from(int fd, Client& client) {
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    if (client.in.empty()) client.frame_started = Clock::now();
    client.in.insert(client.in.end(), buf, buf + n);
    // Never hold more than one frame's worth of a client's bytes.
    if (client.in.size() > kMaxFrameBytes * 2) break;
  }
  while (client.in.size() >= kHeaderBytes) {
    Result<size_t> body = body_length(std::span<const uint8_t, kHeaderBytes>(client.in.data(), kHeaderBytes));
    if (!body.is_ok()) {
      ++malformed_;
      (void)reply(fd, error_reply(body.status()));
      return false;
    }
    if (client.in.size() < kHeaderBytes + *body) break;
    const std::span<const uint8_t> frame(client.in.data(), kHeaderBytes + *body);
    Result<Message> request = decode_on(frame, Channel::control_request);
    if (!request.is_ok()) {
      ++malformed_;
      (void)reply(fd, error_reply(request.status()));
      return false;
    }
    client.in.erase(client.in.begin(), client.in.begin() + static_cast<ptrdiff_t>(frame.size()));
    client.active = client.frame_started = Clock::now();
    const Message answer = handler_->handle(client.peer, *request);
    if (!reply(fd, answer, handler_->reply_fds(client.peer, answer)).is_ok()) return false;
  }
  return true;
}

Status ControlServer::serve_once(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  const bool paused = Clock::now() < accept_paused_until_;
  fds.push_back({paused ? -1 : fd_, POLLIN, 0});  // a negative fd is skipped by poll
  for (const auto& [fd, client] : clients_) fds.push_back({fd, POLLIN, 0});
  if (paused) timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(accept_paused_until_ - Clock::now()) + std::chrono::milliseconds(1));
  const int r = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (r < 0) return errno == EINTR ? Status::ok() : sys_error("poll");
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const auto it = clients_.find(fds[i].fd);
    if (it == clients_.end()) continue;
    if (!read_from(fds[i].fd, it->second)) drop(fds[i].fd);
  }
  if (fds[0].revents & POLLIN) accept_all();
  expire(Clock::now());
  return Status::ok();
}

void ControlServer::expire(Clock::time_point now) {
  std::vector<int> expired;
  for (auto& [fd, client] : clients_) {
    if (!client.in.empty()) {
      if (now - client.frame_started > options_.frame_timeout) expired.push_back(fd);
    } else if (now - client.active > options_.idle_timeout) {
      // A tenant's connection is silent by design: asked again one idle timeout later.
      if (handler_->holds_tenant(client.peer)) client.active = now;
      else expired.push_back(fd);
    }
  }
  for (int fd : expired) {
    ++timed_out_;
    drop(fd);
  }
}

Result<ControlClient> ControlClient::connect(const std::string& path, std::chrono::milliseconds timeout) {
  Result<sockaddr_un> addr = address(path);
  if (!addr.is_ok()) return addr.status();
  // Non-blocking while connecting: a Unix socket's connect answers EAGAIN while the server's
  // queue is full (a blocking one would wait until it accepts).
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return sys_error("socket");
  ControlClient client(fd);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) {
        return Status::deadline_exceeded(fmt::format("connect {}: no answer within {} ms", path, timeout.count()));
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        errno = err;
        return sys_error("connect " + path);
      }
      break;
    }
    if (errno != EAGAIN) return sys_error("connect " + path);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::deadline_exceeded(fmt::format("connect {}: the server accepted nothing within {} ms (its queue is full)", path, timeout.count()));
    }
    ::usleep(1000);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return sys_error("fcntl " + path);
  return client;
}

ControlClient::ControlClient(ControlClient&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

ControlClient::~ControlClient() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Message> ControlClient::call(const Message& request, std::chrono::milliseconds timeout) {
  if (!allowed_on(type_of(request), Channel::control_request)) {
    return Status::invalid_argument(fmt::format("control socket: a {} message is not a request", to_string(type_of(request))));
  }
  Result<std::vector<uint8_t>> frame = encode(request);
  if (!frame.is_ok()) return frame.status();
  return call_raw(*frame, timeout);
}

Result<Message> ControlClient::call(const Message& request, std::chrono::milliseconds timeout, std::vector<int>& fds) {
  if (!allowed_on(type_of(request), Channel::control_request)) {
    return Status::invalid_argument(fmt::format("control socket: a {} message is not a request", to_string(type_of(request))));
  }
  Result<std::vector<uint8_t>> frame = encode(request);
  if (!frame.is_ok()) return frame.status();
  return call_raw(*frame, timeout, &fds);
}

Result<Message> ControlClient::call_raw(std::span<const uint8_t> bytes, std::chrono::milliseconds timeout, std::vector<int>* fds) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (Status sent = send_all(fd_, bytes); !sent.is_ok()) {
    // A server that refuses a connection says why and closes it, possibly before the request
    // went out: its reason is then waiting to be read, and is the better answer.
    Result<Message> said = read_reply(deadline, fds);
    return said.is_ok() ? said : Result<Message>(sent);
  }
  return read_reply(deadline, fds);
}

Result<Message> ControlClient::read_reply(std::chrono::steady_clock::time_point deadline, std::vector<int>* fds) {
  std::vector<uint8_t> frame(kHeaderBytes);
  CONCORD_RETURN_IF_ERROR(recv_exact(fd_, frame, deadline, fds));
  Result<size_t> body = body_length(std::span<const uint8_t, kHeaderBytes>(frame.data(), kHeaderBytes));
  if (!body.is_ok()) return body.status();
  frame.resize(kHeaderBytes + *body);
  CONCORD_RETURN_IF_ERROR(recv_exact(fd_, std::span<uint8_t>(frame).subspan(kHeaderBytes), deadline, fds));
  return decode_on(frame, Channel::control_reply);
}

}  // namespace concord::ipc
