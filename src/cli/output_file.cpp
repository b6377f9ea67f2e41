#include "cli/output_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace concord::cli {
namespace {

// Removes `path` when it is a regular file (never a device such as /dev/full or /dev/null, which
// an output path may name); whether it did.
bool remove_if_regular(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) return false;
  return std::filesystem::remove(path, ec) && !ec;
}

}  // namespace

Result<OutputFile> OutputFile::open(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::invalid_argument(what + ": empty path");
  if (path == "-") return OutputFile(stdout, path, what);
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    const fs::file_status st = fs::status(dir, ec);
    if (!fs::exists(st)) {
      return Status::not_found(what + " " + path + ": directory " + dir.string() + " does not exist");
    }
    if (!fs::is_directory(st)) {
      return Status::invalid_argument(what + " " + path + ": " + dir.string() + " is not a directory");
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::io_error(what + " " + path + ": cannot open for writing: " + std::strerror(errno));
  return OutputFile(f, path, what);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      failed_(std::move(other.failed_)) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    file_ = std::exchange(other.file_, nullptr);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
    failed_ = std::move(other.failed_);
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (file_ && file_ != stdout) std::fclose(file_);
}

Status OutputFile::error(const std::string& action, int err) const {
  return Status::io_error(what_ + " " + path_ + ": " + action + " failed: " + std::strerror(err));
}

Status OutputFile::write_and_close(std::string_view text) {
  if (!file_) return Status::failed_precondition(what_ + " " + path_ + ": already closed");
  std::FILE* f = std::exchange(file_, nullptr);
  errno = 0;
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  if (written != text.size()) {
    const int err = errno ? errno : EIO;
    if (f != stdout) std::fclose(f);
    return error("write", err);
  }
  if (std::fflush(f) != 0) {
    const int err = errno;
    if (f != stdout) std::fclose(f);
    return error("write", err);
  }
  if (f != stdout && std::fclose(f) != 0) return error("close", errno);
  return Status::ok();
}

Status OutputFile::write(std::string_view text) {
  if (!file_) return Status::failed_precondition(what_ + " " + path_ + ": already closed");
  if (!failed_) return failed_;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) failed_ = error("write", errno ? errno : EIO);
  return failed_;
}

Status OutputFile::close() {
  // Closed already: nothing to flush, and the file (written, or removed) is left as it is.
  if (!file_) return Status::failed_precondition(what_ + " " + path_ + ": already closed");
  const bool to_stdout = is_stdout();
  Status st = failed_;
  if (!st) discard_handle();
  else st = write_and_close({});
  if (!st && !to_stdout) {
    // A file whose write failed part-way (a full disk) is not a result: it is removed.
    const bool removed = remove_if_regular(path_);
    return Status(st.code(), st.message() + (removed ? "; the partial file was removed" : ""));
  }
  return st;
}

void OutputFile::discard_handle() {
  if (!file_) return;
  std::FILE* f = std::exchange(file_, nullptr);
  if (f != stdout) std::fclose(f);
}

void OutputFile::discard() {
  if (!file_) return;
  if (file_ == stdout) {
    file_ = nullptr;
    return;
  }
  std::fclose(std::exchange(file_, nullptr));
  (void)remove_if_regular(path_);  // best effort: the error being reported matters more
}

}  // namespace concord::cli
