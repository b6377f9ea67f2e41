// `concord policies`: the policies, one per line: name TAB summary.
#include <iostream>

#include "cli/command.h"
#include "concord/policy.h"

namespace concord::cli {

Subcommand add_policies_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("policies", "List the policies (name TAB summary)");
  return {app, [](const Config&) {
            for (const auto& e : builtin_policies().list()) std::cout << e.name << "\t" << e.summary << "\n";
            return kExitOk;
          }};
}

}  // namespace concord::cli
