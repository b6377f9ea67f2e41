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
  // Closes and removes the file (the work it was opened for failed): no empty file is left
  // looking like a result.
  void discard();

  const std::string& path() const { return path_; }
  bool is_stdout() const { return file_ == stdout; }

 private:
  OutputFile(std::FILE* file, std::string path, std::string what)
      : file_(file), path_(std::move(path)), what_(std::move(what)) {}
  Status error(const std::string& action, int err) const;

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string what_;
};

}  // namespace concord::cli
