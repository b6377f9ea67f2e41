// "Did you mean": the known name closest to a misspelt one, for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace concord {

// The candidate within a small edit distance of `word` (at most a third of its length, and at
// least 2), the closest first; empty when none is that close.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for the closest candidate, or "" when none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// `text` with its control characters written out (ESC as the four characters \x1b, DEL as \x7f;
// newlines and tabs kept), so that a name or key from a user's input cannot rewrite the terminal a
// message is printed on.
std::string escape_control(std::string_view text);

}  // namespace concord
