#include "profile/ncu.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <tuple>
#include <sstream>


namespace concord::profile {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
namespace {

// Splits one CSV record (double-quoted fields, "" for a quote). False when the line is not a
// well-formed record.
bool split_csv(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
      was_quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  if (quoted) return false;
  out.push_back(cur);
  return was_quoted;
}

// A number as ncu prints it ("1,234.5", "12.3", "n/a" is not a number).
bool parse_number(std::string s, double& v) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

bool parse_id(const std::string& s, int64_t& id) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  id = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

int column(const std::vector<std::string>& header, const std::string& name) {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

}  // namespace

std::vector<std::string> ncu_metric_names(const std::vector<NcuFacet>& facets) {
  std::vector<std::string> out;
  auto add = [&](const std::string& m) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  };
  for (const NcuFacet& f : facets) {
    for (const std::string& m : f.metrics) add(m);
  }
  add(kNcuDurationMetric);
  return out;
}

Result<std::vector<NcuLaunch>> parse_ncu_csv(const std::string& text, const std::vector<std::string>& metrics,
                                             const std::string& source) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header, f;
  int line_no = 0;
  int id_col = -1, kernel_col = -1, name_col = -1, value_col = -1;
  std::vector<NcuLaunch> out;
  auto error = [&](const std::string& why) {
    return Status::parse_error(source + ":" + std::to_string(line_no) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] != '"') continue;  // ==PROF== lines, program output
    if (!split_csv(line, f)) continue;
    if (header.empty()) {
      header = f;
      id_col = column(header, "ID");
      kernel_col = column(header, "Kernel Name");
      name_col = column(header, "Metric Name");
      value_col = column(header, "Metric Value");
      if (id_col < 0 || kernel_col < 0) return error("not an ncu CSV header (no \"ID\" and \"Kernel Name\" columns)");
      continue;
    }
    if (f.size() != header.size()) return error("expected " + std::to_string(header.size()) + " fields, found " + std::to_string(f.size()));
    int64_t id = 0;
    if (!parse_id(f[static_cast<size_t>(id_col)], id)) continue;  // the raw page's units row
    if (out.empty() || out.back().id != id) {
      if (std::any_of(out.begin(), out.end(), [&](const NcuLaunch& l) { return l.id == id; })) {
        return error("launch ID " + std::to_string(id) + " appears in two separate runs of rows");
      }
      out.push_back({id, f[static_cast<size_t>(kernel_col)], {}});
    }
    NcuLaunch& launch = out.back();
    if (name_col >= 0 && value_col >= 0) {  // long layout
      double v = 0;
      const std::string& value = f[static_cast<size_t>(value_col)];
      if (!parse_number(value, v)) return error("metric " + f[static_cast<size_t>(name_col)] + ": value '" + value + "' is not a number");
      launch.metrics[f[static_cast<size_t>(name_col)]] = v;
    } else {  // raw page: every column whose header is a metric we asked for
      for (const std::string& m : metrics) {
        const int c = column(header, m);
        if (c < 0) continue;
        double v = 0;
        if (!parse_number(f[static_cast<size_t>(c)], v)) return error("metric " + m + ": value '" + f[static_cast<size_t>(c)] + "' is not a number");
        launch.metrics[m] = v;
      }
    }
  }
  if (header.empty()) return Status::parse_error(source + ": no ncu CSV records (did ncu profile anything?)");
  return out;
}

Result<std::vector<std::vector<NcuLaunch>>> split_at_markers(const std::vector<NcuLaunch>& launches, size_t jobs,
                                                             const std::string& source) {
  std::vector<std::vector<NcuLaunch>> out;
  bool skipping = false;
  for (const NcuLaunch& l : launches) {
    if (l.kernel.find(kNcuMarkerKernel) != std::string::npos) {
      out.emplace_back();
      skipping = false;
    } else if (l.kernel.find(kNcuSkipKernel) != std::string::npos) {
      skipping = true;
    } else if (skipping) {
      continue;
    } else if (out.empty()) {
      return Status::parse_error(source + ": kernel '" + l.kernel + "' (ID " + std::to_string(l.id) + ") ran before the first marker");
    } else {
      out.back().push_back(l);
    }
  }
  if (out.size() != jobs) {
    return Status::parse_error(source + ": " + std::to_string(out.size()) + " marker kernels for " + std::to_string(jobs) + " jobs");
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].empty()) return Status::parse_error(source + ": job " + std::to_string(k) + " ran no kernel");
  }
  return out;
}

namespace {
// Every pass measured every job (the passes are matched to the jobs by position).
Status check_passes(const std::vector<SuiteJob>& jobs, const std::vector<NcuPass>& passes, const std::string& source) {
  if (passes.empty()) return Status::invalid_argument(source + ": no ncu pass to store");
  for (size_t k = 0; k < passes.size(); ++k) {
    if (passes[k].size() != jobs.size()) {
      return Status::invalid_argument(source + ": pass " + std::to_string(k + 1) + " has " + std::to_string(passes[k].size()) +
                                      " measured jobs for " + std::to_string(jobs.size()) + " jobs");
    }
  }
  return Status::ok();
}
}  // namespace

Result<NcuStored> store_ncu_facet(ProfileStore& store, const NcuFacet& facet, const std::string& gpu,
                                  const std::string& driver, const std::vector<SuiteJob>& jobs,
                                  const std::vector<NcuPass>& passes, const std::string& source) {
  CONCORD_RETURN_IF_ERROR(check_passes(jobs, passes, source));
  if (!facet.of_job) return Status::invalid_argument(source + ": the " + facet.name + " facet has no reader");
  NcuStored out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SuiteJob& job = jobs[i];
    const ProfileKey key{gpu, driver, job.kernel, job.variant, job.size};
    std::vector<std::vector<NcuLaunch>> of_job;
    for (const NcuPass& p : passes) of_job.push_back(p[i]);
    auto json = facet.of_job(job, of_job, source + ": " + key.to_string());
    if (!json) {
      if (facet.required) return json.status();
      out.missing.push_back(json.status().message());
      continue;
    }
    CONCORD_RETURN_IF_ERROR(store.put_facet(key, facet.name, *json));
    ++out.written;
  }
  return out;
}

}  // namespace concord::profile
