// Status and Result<T>: the one error type of Concord's API.
//
// Every fallible call returns a Status or a Result<T>; both are [[nodiscard]]. A Status carries a
// code and a message that names what failed (file, field, reason). Result<T> holds either a value
// or a non-ok Status.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace concord {

enum class StatusCode {
  ok = 0,
  invalid_argument,   // a caller passed something malformed (bad placement, bad option)
  parse_error,        // a spec or data file could not be read (file, line, field, reason)
  not_found,          // a name (kernel, policy, tenant, file) does not exist
  already_exists,     // a registration under a name that is taken
  unsupported,        // the backend or kernel cannot do what was asked (capability missing)
  failed_precondition,// the call is valid but not in the current state (dispatch of a busy launch)
  device_error,       // a CUDA or driver call failed
  io_error,           // reading or writing a file or database failed
  deadline_exceeded,  // a run passed its time limit
  cancelled,          // a run was asked to stop (SIGINT, SIGTERM, a caller's stop flag)
  internal,           // a broken invariant inside Concord: a bug
  permission_denied,  // the caller (a peer process's user) may not do or see this
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
  static Status parse_error(std::string m) { return {StatusCode::parse_error, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
  static Status already_exists(std::string m) { return {StatusCode::already_exists, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::unsupported, std::move(m)}; }
  static Status failed_precondition(std::string m) {
    return {StatusCode::failed_precondition, std::move(m)};
  }
  static Status device_error(std::string m) { return {StatusCode::device_error, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
  static Status deadline_exceeded(std::string m) { return {StatusCode::deadline_exceeded, std::move(m)}; }
  static Status cancelled(std::string m) { return {StatusCode::cancelled, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::internal, std::move(m)}; }
  static Status permission_denied(std::string m) { return {StatusCode::permission_denied, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::ok; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", for logs and the terminal.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(state_).is_ok() && "a Result holding a Status must hold an error");
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace concord

// Propagate a non-ok Status from an expression returning Status.
#define CONCORD_RETURN_IF_ERROR(expr)           \
  do {                                          \
    ::concord::Status concord_status_ = (expr); \
    if (!concord_status_.is_ok()) return concord_status_; \
  } while (0)
