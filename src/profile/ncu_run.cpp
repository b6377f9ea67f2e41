// `concord profile raise` (alias `ncu`): runs Nsight Compute over this program's worker and stores
// the facets the policy folders read from its metrics (RAISE's vectors, PBS's miss rates). This side
// needs no CUDA (ncu runs the worker as a child).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "profile/ncu.h"

namespace concord::profile {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_seconds(double s) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << (s >= 60 ? s / 60 : s) << (s >= 60 ? " min" : " s");
  return o.str();
}

}  // namespace

Result<std::vector<NcuStored>> profile_ncu(ProfileStore& store, const std::vector<SuiteJob>& jobs,
                                           const std::vector<NcuFacet>& facets, const NcuOptions& options,
                                           std::ostream& progress) {
  if (facets.empty()) return Status::invalid_argument("profile raise: no facet reads Nsight Compute metrics");
  if (options.gpu.empty() || options.driver.empty()) {
    return Status::invalid_argument("profile raise: the device's name and driver are needed for the profile key");
  }
  std::vector<std::string> csvs = options.from_csv;
  if (csvs.empty()) {
    if (options.passes < 1) return Status::invalid_argument("profile raise: passes must be >= 1");
    const std::string jobs_file = options.work_dir + "/ncu_jobs.txt";
    {
      std::ofstream out(jobs_file);
      out << suite_jobs_to_text(jobs);
      out.close();
      if (!out) return Status::io_error(jobs_file + ": cannot write the job list");
    }
    std::string self = options.self;
    if (self.empty()) {
      char buf[4096];
      const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
      if (n <= 0) return Status::io_error("cannot find this program's path (/proc/self/exe)");
      self.assign(buf, static_cast<size_t>(n));
    }
    std::string metrics;
    for (const std::string& m : ncu_metric_names(facets)) metrics += (metrics.empty() ? "" : ",") + m;
    for (int pass = 1; pass <= options.passes; ++pass) {
      const std::string csv = options.work_dir + "/ncu_raise" + (pass > 1 ? "-" + std::to_string(pass) : "") + ".csv";
      // --clock-control none: the clocks stay as they are (the machine's rules); --page raw: one
      // CSV row per launch; --print-units base: durations in ns whatever their size.
      const std::string cmd = shell_quote(options.ncu) + " --clock-control none --target-processes all --csv --page raw" +
                              " --print-units base --metrics " + metrics + " --log-file " + shell_quote(csv) + " " +
                              shell_quote(self) + " profile raise-worker --jobs " + shell_quote(jobs_file);
      progress << "running (pass " << pass << " of " << options.passes << "): " << cmd << "\n";
      progress.flush();
      const auto t0 = std::chrono::steady_clock::now();
      const int rc = std::system(cmd.c_str());
      if (rc != 0) {
        return Status::internal("ncu exited with status " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) +
                                " (see " + csv + "); is ncu on the PATH (--ncu) and are the GPU's counters readable?");
      }
      progress << "ncu profiled " << jobs.size() << " jobs in "
               << format_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) << "\n";
      csvs.push_back(csv);
    }
  }
  std::vector<NcuPass> passes;
  for (const std::string& csv : csvs) {
    auto text = read_text_file(csv);
    if (!text) return text.status();
    auto launches = parse_ncu_csv(*text, ncu_metric_names(facets), csv);
    if (!launches) return launches.status();
    auto per_job = split_at_markers(*launches, jobs.size(), csv);
    if (!per_job) return per_job.status();
    passes.push_back(std::move(*per_job));
  }
  std::string source = csvs.front();  // errors name the CSVs the passes came from
  for (size_t i = 1; i < csvs.size(); ++i) source += ", " + csvs[i];
  std::vector<NcuStored> stored;
  for (const NcuFacet& facet : facets) {
    auto one = store_ncu_facet(store, facet, options.gpu, options.driver, jobs, passes, source);
    if (!one) return one.status();
    for (const std::string& m : one->missing) progress << "no " << facet.name << " facet: " << m << "\n";
    stored.push_back(std::move(*one));
  }
  return stored;
}

}  // namespace concord::profile
