#include "concord/status.h"

namespace concord {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::parse_error: return "parse error";
    case StatusCode::not_found: return "not found";
    case StatusCode::already_exists: return "already exists";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::failed_precondition: return "failed precondition";
    case StatusCode::device_error: return "device error";
    case StatusCode::io_error: return "I/O error";
    case StatusCode::deadline_exceeded: return "deadline exceeded";
    case StatusCode::cancelled: return "cancelled";
    case StatusCode::internal: return "internal error";
    case StatusCode::permission_denied: return "permission denied";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(concord::to_string(code_)) + ": " + message_;
}

}  // namespace concord
