// The daemon's control socket: a Unix stream socket on which clients (tenant libraries, `concord
// top`) send requests and get one reply each, as protocol frames. The server learns who each
// client is from the kernel (SO_PEERCRED: the pid, uid and gid of the process that connected),
// through an interface so tests can inject credentials; a ControlHandler decides what that client
// may do. The socket file's mode (0660 by default) and group decide who may connect at all.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/status.h"
#include "ipc/protocol.h"

namespace concord::ipc {

struct PeerCredentials {
  int32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;  // primary group
  // The server's id of the connection these came on (unique for the server's life): a tenant
  // belongs to the connection that registered it, so one of a process's connections closing or
  // saying goodbye drops only the tenants registered on it. 0 where no server assigned one.
  uint64_t connection = 0;
  // Supplementary groups when the peer connected (SO_PEERGROUPS; empty where not known).
  std::vector<uint32_t> groups{};
  bool operator==(const PeerCredentials&) const = default;
  // Whether the peer is in `group`: its primary group or one of its supplementary groups.
  bool in_group(uint32_t group) const;
};

// Where the server learns who is on the other end of a connection.
class CredentialSource {
 public:
  virtual ~CredentialSource() = default;
  virtual Result<PeerCredentials> peer(int fd) const = 0;
};

// The kernel's word: SO_PEERCRED and SO_PEERGROUPS (Linux), taken when the peer connected.
class KernelCredentials final : public CredentialSource {
 public:
  Result<PeerCredentials> peer(int fd) const override;
};

// What the daemon does with one request of one client. Returns the reply (an ErrorReply for a
// refusal); `request` has been decoded and checked to be a control request.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  virtual Message handle(const PeerCredentials& peer, const Message& request) = 0;
  // Descriptors to pass with `reply` (SCM_RIGHTS; the handler keeps its own): a Registered reply's
  // rings, when they are anonymous objects. None by default.
  virtual std::vector<int> reply_fds(const PeerCredentials& peer, const Message& reply) {
    (void)peer;
    (void)reply;
    return {};
  }
  // The client's connection closed (a tenant library whose process ended).
  virtual void disconnected(const PeerCredentials& peer) { (void)peer; }
  // Whether the connection holds a registered tenant: such a connection stays open, silent, for
  // its process's life, so the idle timeout does not apply to it.
  virtual bool holds_tenant(const PeerCredentials& peer) {
    (void)peer;
    return false;
  }
};

// The server's limits (docs/daemon.md, "Limits"): one user cannot lock the others out by holding
// connections, and a connection that says nothing, or stops halfway through a frame, is closed.
struct ControlServerOptions {
  std::string path;             // the socket file; a stale one there is replaced, a live one refused (SocketPathLock)
  mode_t mode = 0660;
  std::optional<uint32_t> gid;  // the socket file's group (empty: the daemon's own)
  int max_clients = 1024;       // connections in all
  // Connections of one uid at once (root's are not capped): a user's tenants, one connection
  // each (at most kTenantsPerUser), and a few more for `concord top` and the like.
  int max_clients_per_uid = 72;
  // A connection that holds no tenant and sends no whole request for this long is closed.
  std::chrono::milliseconds idle_timeout{10'000};
  // A frame begun and not finished within this long closes its connection.
  std::chrono::milliseconds frame_timeout{2'000};
};

// The gid of a group name (getgrnam), for ControlServerOptions::gid.
Result<uint32_t> group_id(const std::string& name);

// A Unix socket path held by one server: `<path>.lock` is locked (flock) for the server's life,
// and no live server answers on `path`. A socket file left by a server that died is removed; a
// live server's is never touched: claim() fails naming its pid (from the kernel, SO_PEERCRED, or
// the lock file). The socket file is removed at the end only while it is still the one this
// server bound (bound()), so a server never removes a socket it did not create.
class SocketPathLock {
 public:
  // `what` names the socket in messages ("control socket", "metrics socket").
  static Result<SocketPathLock> claim(const std::string& path, const std::string& what);
  SocketPathLock() = default;
  SocketPathLock(SocketPathLock&& other) noexcept;
  SocketPathLock& operator=(SocketPathLock&& other) noexcept;
  SocketPathLock(const SocketPathLock&) = delete;
  SocketPathLock& operator=(const SocketPathLock&) = delete;
  ~SocketPathLock();
  // The server bound `path`: the file there now is its own.
  void bound();

 private:
  void release();
  std::string path_;
  int lock_fd_ = -1;
  bool bound_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

class ControlServer {
 public:
  static Result<ControlServer> listen(const ControlServerOptions& options, const CredentialSource& credentials,
                                      ControlHandler& handler);
  ControlServer(ControlServer&& other) noexcept;
  ControlServer& operator=(ControlServer&&) = delete;
  ControlServer(const ControlServer&) = delete;
  ~ControlServer();

  // Accepts connections and answers complete requests, waiting at most `timeout` for something
  // to happen. A client that sends a malformed frame gets an ErrorReply naming the field and is
  // disconnected; it does not affect the others.
  Status serve_once(std::chrono::milliseconds timeout);
  size_t clients() const { return clients_.size(); }
  // Requests refused because their frame did not decode.
  uint64_t malformed() const { return malformed_; }
  // Connections refused at accept (the limits in all or per uid) and closed by a timeout.
  uint64_t refused() const { return refused_; }
  uint64_t timed_out() const { return timed_out_; }
  const std::string& path() const { return path_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    PeerCredentials peer;
    std::vector<uint8_t> in;
    Clock::time_point active;         // accepted, or its last whole request
    Clock::time_point frame_started;  // when `in` last went from empty to not
  };
  ControlServer(int fd, SocketPathLock lock, const CredentialSource& credentials, ControlHandler& handler,
                const ControlServerOptions& options)
      : fd_(fd), lock_(std::move(lock)), path_(options.path), credentials_(&credentials), handler_(&handler), options_(options) {}
  void accept_all();
  // Out of descriptors (EMFILE, ENFILE): the listening socket stays readable, so it is left out of
  // poll until then instead of spinning; connections already open are served meanwhile.
  Clock::time_point accept_paused_until_{};
  // Closes the connections past the idle or the frame timeout.
  void expire(Clock::time_point now);
  // Reads what the client sent and answers each whole frame; false: drop the connection.
  bool read_from(int fd, Client& client);
  void drop(int fd);
  int fd_ = -1;
  SocketPathLock lock_;
  std::string path_;
  const CredentialSource* credentials_;
  ControlHandler* handler_;
  ControlServerOptions options_;
  uint64_t connections_ = 0;  // ids given to accepted connections (PeerCredentials::connection)
  std::map<int, Client> clients_;
  std::map<uint32_t, int> per_uid_;  // open connections by uid
  uint64_t malformed_ = 0;
  uint64_t refused_ = 0;
  uint64_t timed_out_ = 0;
};

class ControlClient {
 public:
  // Connects within `timeout`: a server that accepts nothing (stopped, wedged) with its queue full
  // is an error after it, never a wait without end.
  static Result<ControlClient> connect(const std::string& path, std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));
  ControlClient(ControlClient&& other) noexcept;
  ControlClient& operator=(ControlClient&&) = delete;
  ControlClient(const ControlClient&) = delete;
  ~ControlClient();
  // Sends one request and waits at most `timeout` for its reply (an ErrorReply is a reply, not an
  // error: the caller reads it).
  Result<Message> call(const Message& request, std::chrono::milliseconds timeout);
  // call(), and the descriptors the reply carried (the caller owns them; at most 4 are taken).
  Result<Message> call(const Message& request, std::chrono::milliseconds timeout, std::vector<int>& fds);
  // Sends raw bytes (tests of malformed frames) and reads one reply frame.
  Result<Message> call_raw(std::span<const uint8_t> bytes, std::chrono::milliseconds timeout,
                           std::vector<int>* fds = nullptr);
  int fd() const { return fd_; }

 private:
  explicit ControlClient(int fd) : fd_(fd) {}
  Result<Message> read_reply(std::chrono::steady_clock::time_point deadline, std::vector<int>* fds);
  int fd_ = -1;
};

}  // namespace concord::ipc
