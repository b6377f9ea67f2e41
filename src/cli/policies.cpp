// `concord policies`: the policies, one per line: name TAB summary; those with a lease form (how
// concordd steers unmodified processes without a decision per launch) say so.
#include <iostream>

#include "cli/command.h"
#include "concord/lease.h"
#include "concord/policy.h"

namespace concord::cli {

Subcommand add_policies_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("policies", "List the policies (name TAB summary)");
  return {app, [](const Config&) {
            const LeasePolicyRegistry& leases = builtin_lease_policies();
            for (const auto& e : builtin_policies().list()) {
              std::cout << e.name << "\t" << e.summary;
              if (leases.contains(e.name)) std::cout << " [concordd: leases]";
              std::cout << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace concord::cli
