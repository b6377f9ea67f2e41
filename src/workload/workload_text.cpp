// The spec parser's text helpers: reading a spec or timestamps file safely, numbers as YAML
// scalars, the second-document and nesting scans (src/workload/parser.h).
#include "workload/parser.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace concord::workload_impl {

// Reads a whole regular file of at most `limit` bytes. Errors say what is wrong with the path,
// never what the file holds (a spec may point anywhere). Opening without blocking and refusing
// anything but a regular file keeps FIFOs and devices such as /dev/zero from hanging the read.
Result<std::string> read_regular_file(const std::filesystem::path& path, int64_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return Status::not_found(why);
    return Status::io_error(why);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::io_error(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Status::invalid_argument("is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(std::string("is not a regular file (") + (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device" : S_ISSOCK(st.st_mode) ? "a socket" : "a special file") + ")");
  }
  const std::string over = "is larger than the limit of " + std::to_string(limit) + " bytes";
  if (st.st_size > limit) return Status::invalid_argument(over);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  // The file may grow while it is read: read at most one byte past the limit.
  while (true) {
    if (got == text.size()) {
      if (static_cast<int64_t>(got) > limit) return Status::invalid_argument(over);
      text.resize(std::min<size_t>(text.size() * 2 + 4096, static_cast<size_t>(limit) + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(got) > limit) return Status::invalid_argument(over);
  text.resize(got);
  return text;
}

// A scalar as the spec wrote it, shortened for messages.
std::string shown(const std::string& s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "...";
}

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Decimal integer, optional leading '+'; nullopt when the text is anything else or out of range.
// (yaml-cpp would read "010" as octal 8 and "0x10" as 16.)
std::optional<int64_t> parse_decimal(const std::string& text) {
  std::string_view s = text;
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A finite decimal number ("1", "-2.5", "3e-3", optional leading '+').
std::pair<double, NumberError> parse_finite(const std::string& text) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const std::string lower = [&] {
    std::string l(s);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  }();
  for (const char* special : {".nan", "nan", ".inf", "inf", "-.inf", "-inf", "infinity", "-infinity"}) {
    if (lower == special) return {0, NumberError::not_finite};
  }
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return {0, NumberError::not_finite};
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return {0, NumberError::not_a_number};
  if (!std::isfinite(v)) return {0, NumberError::not_finite};
  return {v, NumberError::none};
}

// Checked arithmetic on counts: nullopt on overflow of int64.
// The line (1-based) where a second YAML document in `text` starts, or 0 when there is none.
// Counted on yaml-cpp's events, two documents at most: YAML::LoadAll never returns on some
// inputs (a lone ',' as a document makes yaml-cpp 0.7 yield empty documents forever).
int second_document_line(const std::string& text) {
  // A second document needs a marker ("---" to start one, "..." to end the first); without one
  // there is nothing to look for, and the spec is not scanned twice.
  if (text.find("---") == std::string::npos && text.find("...") == std::string::npos) return 0;
  class FirstMark : public YAML::EventHandler {
   public:
    int line = -1;
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { note(m); }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      note(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      note(m);
    }
    void OnMapEnd() override {}

   private:
    void note(const YAML::Mark& m) {
      if (line < 0 && !m.is_null()) line = m.line;
    }
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstMark first;
  if (!parser.HandleNextDocument(first)) return 0;
  FirstMark second;
  if (!parser.HandleNextDocument(second)) return 0;
  return std::max(second.line, 0) + 1;
}

// The deepest YAML nesting in `text` and the 1-based line where it is reached: block levels
// (distinct indentation columns open at a line) plus flow brackets open at a character, outside
// quotes and comments. A spec needs a few; yaml-cpp gives up past a few hundred with "bad file".
std::pair<int, int> yaml_nesting(const std::string& text) {
  std::vector<size_t> indents;
  int flow = 0, deepest = 0, deepest_line = 0, line = 1;
  size_t i = 0;
  while (i < text.size()) {
    size_t col = 0;
    while (i + col < text.size() && text[i + col] == ' ') ++col;
    const size_t start = i + col;
    const bool content = start < text.size() && text[start] != '\n' && text[start] != '#';
    if (content && flow == 0) {
      while (!indents.empty() && indents.back() > col) indents.pop_back();
      if (indents.empty() || indents.back() < col) indents.push_back(col);
    }
    char quote = 0;
    for (i = start; i < text.size() && text[i] != '\n'; ++i) {
      const char c = text[i];
      if (quote) {
        if (quote == '"' && c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') ++i;  // an escape
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '#' && (i == start || text[i - 1] == ' ')) {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      }
      if (c == '"' || c == '\'') quote = c;
      else if (c == '[' || c == '{') ++flow;
      else if ((c == ']' || c == '}') && flow > 0) --flow;
      const int depth = static_cast<int>(indents.size()) + flow;
      if (depth > deepest) {
        deepest = depth;
        deepest_line = line;
      }
    }
    if (content && static_cast<int>(indents.size()) + flow > deepest) {
      deepest = static_cast<int>(indents.size()) + flow;
      deepest_line = line;
    }
    ++i;  // the newline
    ++line;
  }
  return {deepest, deepest_line};
}

}  // namespace concord::workload_impl
