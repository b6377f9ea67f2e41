#include "daemon/metrics_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <httplib.h>

namespace concord::daemon {
namespace {

using Clock = std::chrono::steady_clock;

Status sys(const std::string& what) { return Status::io_error(fmt::format("metrics endpoint: {}: {}", what, std::strerror(errno))); }

void set_timeout(int fd, int option, Clock::duration left) {
  const auto us = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
  timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

// One Unix-socket connection: its request head read within `read_for` in all (a client trickling
// a byte at a time gets that much, not that much a byte; what it asks does not matter), then the
// text as an HTTP/1.0 reply within `write_for`.
void answer(int fd, const std::string& body, Clock::duration read_for, Clock::duration write_for) {
  const auto until = Clock::now() + read_for;
  std::string head;
  char buf[1024];
  while (head.size() < 8192 && head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) break;
    set_timeout(fd, SO_RCVTIMEO, left);
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  const auto send_until = Clock::now() + write_for;
  const std::string reply = fmt::format(
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
  for (size_t sent = 0; sent < reply.size();) {
    const auto left = send_until - Clock::now();
    if (left <= Clock::duration::zero()) break;
    set_timeout(fd, SO_SNDTIMEO, left);
    const ssize_t n = ::send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

struct MetricsServer::Tcp {
  httplib::Server server;
  std::thread thread;
};

MetricsServer::MetricsServer(Text text, MetricsServerOptions options) : text_(std::move(text)), options_(options) {}

MetricsServer::~MetricsServer() {
  stop();
  if (unix_fd_ >= 0) ::close(unix_fd_);
}

bool MetricsServer::active() const { return unix_fd_ >= 0 || tcp_ != nullptr; }

Status MetricsServer::listen_unix(const std::string& path, mode_t mode, std::optional<uint32_t> gid) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return Status::invalid_argument(fmt::format("metrics socket '{}': path too long", path));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  // As the control socket: never another server's live socket, a stale one replaced.
  Result<ipc::SocketPathLock> lock = ipc::SocketPathLock::claim(path, "metrics socket");
  if (!lock.is_ok()) return lock.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys("socket");
  // Bound with no access for anyone, then given its group and mode.
  const mode_t old_mask = ::umask(0777);
  const int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::umask(old_mask);
  if (bound != 0 || ::listen(fd, 64) != 0) {
    const Status s = sys("bind " + path);
    ::close(fd);
    return s;
  }
  lock->bound();
  if ((gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) || ::chmod(path.c_str(), mode) != 0) {
    const Status s = sys("chown/chmod " + path);
    ::close(fd);
    return s;
  }
  unix_lock_ = std::move(*lock);
  unix_fd_ = fd;
  group_ = gid.value_or(::getgid());
  return Status::ok();
}

Status MetricsServer::listen_tcp(int port, bool tenants) {
  auto tcp = std::make_unique<Tcp>();
  httplib::Server& s = tcp->server;
  const size_t workers = options_.workers;
  s.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  s.set_read_timeout(options_.read_timeout);
  s.set_write_timeout(options_.write_timeout);
  s.set_keep_alive_max_count(1);  // one scrape a connection: a held connection holds nothing more
  s.Get(".*", [this, tenants](const httplib::Request&, httplib::Response& res) {
    MetricsView v;
    v.kind = tenants ? MetricsView::Kind::all : MetricsView::Kind::aggregate;
    res.set_content(text_(v), "text/plain; version=0.0.4");
  });
  if (!s.bind_to_port("127.0.0.1", port)) return sys(fmt::format("bind 127.0.0.1:{}", port));  // localhost only
  tcp_ = std::move(tcp);
  return Status::ok();
}

MetricsView MetricsServer::view_of(int fd) const {
  MetricsView v;
  Result<ipc::PeerCredentials> peer = ipc::KernelCredentials().peer(fd);
  if (!peer.is_ok()) {
    v.kind = MetricsView::Kind::aggregate;
    return v;
  }
  if (peer->uid == 0 || peer->uid == ::getuid() || peer->in_group(group_)) return v;  // all
  v.kind = MetricsView::Kind::own;
  v.uid = peer->uid;
  return v;
}

void MetricsServer::serve_unix() {
  httplib::ThreadPool pool(options_.workers);
  // Connections accepted and not answered yet, at most: past it new ones are closed at once.
  const size_t most = options_.workers * 8;
  auto waiting = std::make_shared<std::atomic<size_t>>(0);
  while (!stopping_.load()) {
    pollfd p{unix_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    for (;;) {
      const int c = ::accept4(unix_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      if (waiting->load() >= most) {
        ::close(c);
        continue;
      }
      const MetricsView view = view_of(c);
      ++*waiting;
      pool.enqueue([this, c, view, waiting] {
        answer(c, text_(view), options_.read_timeout, options_.write_timeout);
        ::close(c);
        --*waiting;
      });
    }
  }
  pool.shutdown();
}

void MetricsServer::start() {
  if (unix_fd_ >= 0 && !unix_thread_.joinable()) unix_thread_ = std::thread([this] { serve_unix(); });
  if (tcp_ && !tcp_->thread.joinable()) {
    tcp_->thread = std::thread([this] { tcp_->server.listen_after_bind(); });
    // Until it runs, stop() would not reach it (it stops a running server only).
    for (int i = 0; i < 2000 && !tcp_->server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void MetricsServer::stop() {
  stopping_ = true;
  if (unix_thread_.joinable()) unix_thread_.join();
  if (tcp_ && tcp_->thread.joinable()) {
    tcp_->server.stop();
    tcp_->thread.join();
  }
}

}  // namespace concord::daemon
