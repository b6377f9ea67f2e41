// `concord backends`: the backends built into this binary, one per line.
#include <iostream>

#include "cli/command.h"
#include "concord/backend.h"
#include "concord/backend_factory.h"

namespace concord::cli {

Subcommand add_backends_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("backends", "List the backends built into this binary");
  return {app, [](const Config&) {
            for (const auto& b : available_backends()) std::cout << b << "\n";
            return kExitOk;
          }};
}

}  // namespace concord::cli
