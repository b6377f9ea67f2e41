// `concord kernels`: the workload suite, one kernel per line, tab-separated.
#include <iostream>

#include "cli/command.h"
#include "concord/suite.h"

namespace concord::cli {

Subcommand add_kernels_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "kernels", "List the workload suite's kernels (name TAB elastic|opaque TAB origin TAB description TAB default size)");
  return {app, [](const Config&) {
            for (const auto& e : suite_catalog()) {
              std::cout << e.name << "\t" << (e.elastic ? "elastic" : "opaque") << "\t" << e.origin << "\t" << e.description
                        << "\t" << e.default_size << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace concord::cli
