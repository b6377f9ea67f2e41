// concordd's Prometheus endpoint: a Unix socket and/or TCP on 127.0.0.1, every request answered
// with the text of the latest snapshot (any path). Each connection is served on a worker of a
// pool, within its own time bounds, so a silent or slow client holds one worker and never the
// others' scrapes.
//
// What the text names depends on who asks (MetricsView): on the Unix socket the kernel says who
// (SO_PEERCRED, SO_PEERGROUPS), and a tenant's name and uid go only to its own user, to root, to
// the daemon's user and to the daemon's group; on TCP nobody can be told apart, so it shows the
// totals alone unless `tcp_tenants`. TCP is cpp-httplib's server (its thread pool, read and write
// timeouts); the Unix socket keeps its own accept loop, because cpp-httplib 0.11 neither listens on
// Unix sockets nor tells a handler which socket its request came on.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "concord/status.h"
#include "daemon/prometheus.h"
#include "ipc/control_socket.h"

namespace concord::daemon {

struct MetricsServerOptions {
  // A request must arrive within this, and a reply be taken within `write_timeout`.
  std::chrono::milliseconds read_timeout{500};
  std::chrono::milliseconds write_timeout{1000};
  size_t workers = 8;  // per endpoint: connections served at once
};

class MetricsServer {
 public:
  using Text = std::function<std::string(const MetricsView&)>;
  explicit MetricsServer(Text text, MetricsServerOptions options = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // `gid`: the socket file's group, whose members see every tenant (empty: the daemon's group).
  Status listen_unix(const std::string& path, mode_t mode, std::optional<uint32_t> gid);
  Status listen_tcp(int port, bool tenants);
  bool active() const;
  // Serves on threads of its own until stop() (or the destructor).
  void start();
  void stop();

 private:
  struct Tcp;
  void serve_unix();
  MetricsView view_of(int fd) const;
  Text text_;
  MetricsServerOptions options_;
  // Unix socket
  int unix_fd_ = -1;
  ipc::SocketPathLock unix_lock_;
  uint32_t group_ = 0;
  std::thread unix_thread_;
  std::atomic<bool> stopping_{false};
  // TCP
  std::unique_ptr<Tcp> tcp_;
};

}  // namespace concord::daemon
