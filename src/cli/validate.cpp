// `concord validate SPEC`: checks a workload spec without running it.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "concord/workload.h"

namespace concord::cli {

Subcommand add_validate_command(CLI::App& parent) {
  auto spec = std::make_shared<std::string>();
  CLI::App* app = parent.add_subcommand("validate", "Check a workload spec; errors name file, line, field and reason");
  app->add_option("spec", *spec, "Workload spec (YAML)")->required();
  return {app, [spec](const Config&) {
            auto w = load_workload_file(*spec);
            if (!w) return fail(w.status());
            int64_t launches = 0;
            for (const auto& t : w->tenants) launches += t.launches_per_request() * t.requests;
            std::cout << *spec << ": ok (" << w->tenants.size() << " tenants, " << launches << " launches)\n";
            return kExitOk;
          }};
}

}  // namespace concord::cli
