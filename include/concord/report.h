// Results as files and tables: JSON with every raw figure, a terminal/Markdown summary, and a
// Chrome/Perfetto trace observer.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "concord/engine.h"
#include "concord/experiment.h"

namespace concord {

struct RunContext {
  std::string workload_file;
  std::map<std::string, std::string> params;  // the policy's parameters
  std::string commit;     // git commit of the build, when known
};

// The whole experiment as JSON text: metrics, per-tenant and per-request figures, per-launch and
// per-dispatch start/end, engine statistics.
std::string experiment_json(const ExperimentResult& result, const RunContext& context);
// A fixed-width summary table (tenants, NP, latency; STP, ANTT, FI, HS, makespan).
void print_summary(std::ostream& out, const ExperimentResult& result);

// Writes a Chrome trace (chrome://tracing, ui.perfetto.dev): one track per tenant, one per GPC
// (the SM groups a dispatch touched).
class ChromeTraceObserver final : public EngineObserver {
 public:
  explicit ChromeTraceObserver(const DeviceSpec& device) : device_(device) {}
  void on_dispatch_end(const DispatchRecord& dispatch) override;
  void on_request_end(TenantId tenant, const RequestRecord& request) override;
  // Names the tenant tracks; call before write().
  void set_tenant_names(std::vector<std::string> names) { tenant_names_ = std::move(names); }
  Status write(const std::string& path) const;

 private:
  struct Event {
    std::string name;
    int pid = 0;
    int64_t tid = 0;
    double start_us = 0;
    double dur_us = 0;
    std::string args;
  };
  DeviceSpec device_;
  std::vector<Event> events_;
  std::vector<std::string> tenant_names_;
};

}  // namespace concord
