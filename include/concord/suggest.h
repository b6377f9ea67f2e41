// "Did you mean": the known name closest to a misspelt one, for error messages.
#pragma once

#include <string>
#include <vector>

namespace concord {

// The candidate within a small edit distance of `word` (at most a third of its length, and at
// least 2), the closest first; empty when none is that close.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for the closest candidate, or "" when none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace concord
