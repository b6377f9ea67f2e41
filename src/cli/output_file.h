// An output file of the CLI (results, traces, exports), opened before the work starts so that a
// bad path fails at once, with every write checked: errors name the path and the system's reason.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "concord/status.h"

namespace concord::cli {

class OutputFile {
 public:
  // Checks that the directory of `path` exists, then creates or truncates `path`. "-" is standard
  // output. `what` names the file in messages ("--out", "--trace").
  [[nodiscard]] static Result<OutputFile> open(const std::string& path, const std::string& what);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // Writes `text` and closes the file; a short write, or a failed flush or close (a full disk),
  // is an error.
  [[nodiscard]] Status write_and_close(std::string_view text);
  // Writes `text` and keeps the file open, for a file written piece by piece; the first failed
  // write is kept and returned by every later write and by close().
  [[nodiscard]] Status write(std::string_view text);
  // Flushes and closes the file: the first write error, or a failed flush or close; a file that
  // failed is removed (a truncated file would read as a result).
  [[nodiscard]] Status close();
  // Closes and removes the file (the work it was opened for failed): no empty file is left
  // looking like a result.
  void discard();

  const std::string& path() const { return path_; }
  bool is_stdout() const { return file_ == stdout; }

 private:
  OutputFile(std::FILE* file, std::string path, std::string what)
      : file_(file), path_(std::move(path)), what_(std::move(what)) {}
  Status error(const std::string& action, int err) const;
  void discard_handle();  // closes without removing

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string what_;
  Status failed_;  // the first failed write()
};

}  // namespace concord::cli
