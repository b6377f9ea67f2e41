// One exit-status rule for every Concord binary's command line (the `concord` command, concordd,
// the benches): 0 for --help, 2 for a bad command line with CLI11's message, so a script tells a
// mistake in its call (2) from a failure of the work (1). CLI11_PARSE alone exits with CLI11's own
// codes (100 and up).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <string>

// Parses `argv` into `app`; on --help prints it and returns 0 from the calling function, on a bad
// command line names it and returns 2.
#define CONCORD_PARSE_COMMAND_LINE(app, argc, argv)                                         \
  do {                                                                                      \
    try {                                                                                   \
      (app).parse((argc), (argv));                                                          \
    } catch (const CLI::ParseError& concord_parse_error) {                                  \
      if (concord_parse_error.get_exit_code() == 0) return (app).exit(concord_parse_error); \
      std::cerr << (app).get_name() << ": " << concord_parse_error.what() << "\n";          \
      return 2;                                                                             \
    }                                                                                       \
  } while (false)

namespace concord {

// A number that is finite: CLI11's range and sign checks let "nan" and "inf" through, which a
// later conversion to an integer type cannot take.
inline CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(text, &used);
          if (used == text.size() && std::isfinite(v)) return {};
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not a finite number";
      },
      "FINITE");
}

}  // namespace concord
