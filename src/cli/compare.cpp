// `concord compare RESULTS.json...`: one table of the headline figure (docs/running.md, "The
// headline") of many runs: a row per policy (with its parameters), a column per workload. A
// closed-loop workload's cell is its throughput over serial, an open-loop one's the LC SLO
// attainment with the BE progress beside it; the best policy of each workload is marked.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"

namespace concord::cli {

namespace {

using nlohmann::json;

struct CompareOptions {
  std::vector<std::string> inputs;
  bool markdown = false;
};

// One run's cell: its headline, or why it has none.
struct Cell {
  std::string text;
  std::optional<double> rank;  // larger is better; none when the run has no headline
  std::string headline;        // the headline's name
};

std::string run_label(const json& j) {
  std::string label = j.value("policy", std::string("?"));
  if (j.contains("params") && j["params"].is_object() && !j["params"].empty()) {
    std::string params;
    for (const auto& [k, v] : j["params"].items()) {
      params += (params.empty() ? "" : ";") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    label += ":" + params;
  }
  return label;
}

Result<Cell> cell_of(const std::string& file, const json& j) {
  if (!j.is_object() || !j.contains("metrics") || !j.contains("policy")) {
    return Status::invalid_argument(file + ": not a `concord run` results file (no 'metrics' or 'policy')");
  }
  const json& m = j["metrics"];
  if (m.is_null()) {
    std::string reason = "ended early";
    if (j.contains("status") && j["status"].is_object() && j["status"].contains("reason") && j["status"]["reason"].is_string()) {
      reason += ": " + j["status"]["reason"].get<std::string>();
    }
    return Cell{"ended early", std::nullopt, reason};
  }
  if (!m.is_object()) return Status::invalid_argument(file + ": field 'metrics' is not an object");
  if (!m.contains("headline")) {
    // Schema version 1 has no headline: its window STP, said so.
    if (m.contains("stp_window") && m["stp_window"].is_number()) {
      const double v = m["stp_window"].get<double>();
      return Cell{fmt::format("{:.3f} (STP)", v), v, "stp_window"};
    }
    return Status::invalid_argument(file + ": field 'metrics.headline' is missing");
  }
  const json& h = m["headline"];
  if (!h.is_object() || !h.contains("name") || !h["name"].is_string() || !h.contains("value") || !h["value"].is_number()) {
    return Status::invalid_argument(file + ": field 'metrics.headline' lacks a string 'name' or a numeric 'value'");
  }
  const std::string name = h["name"].get<std::string>();
  const double v = h["value"].get<double>();
  if (name == "throughput_over_serial") return Cell{fmt::format("{:.3f}x", v), v, name};
  if (name == "stp_window") return Cell{fmt::format("{:.3f} (STP)", v), v, name};
  if (name == "lc_slo_attainment") {
    const double be = h.contains("be_np_sum") && h["be_np_sum"].is_number() ? h["be_np_sum"].get<double>() : 0;
    // Ranked by attainment, then by BE progress.
    return Cell{fmt::format("{:.1f}% / BE {:.2f}", v * 100, be), v * 1e6 + be, name};
  }
  if (name == "be_np_sum") return Cell{fmt::format("BE {:.2f}", v), v, name};
  return Status::invalid_argument(file + ": field 'metrics.headline.name': unknown headline '" + name + "'");
}

std::string headline_legend(const std::string& name) {
  if (name == "throughput_over_serial") return "throughput over serial (serial = 1)";
  if (name == "stp_window") return "STP over the co-run window (no serial reference run)";
  if (name == "lc_slo_attainment") return "LC SLO attainment / BE progress (sum of BE NP)";
  if (name == "be_np_sum") return "BE progress (sum of BE NP)";
  return name;
}

int compare(const CompareOptions& o) {
  std::vector<std::string> workloads, policies;
  std::map<std::pair<std::string, std::string>, Cell> cells;  // (policy, workload)
  std::map<std::string, std::string> kinds;                   // workload -> headline name
  std::string device;
  for (const std::string& file : o.inputs) {
    std::ifstream in(file);
    if (!in) return fail(Status::not_found(file + ": cannot open"));
    json j;
    try {
      in >> j;
    } catch (const json::exception& e) {
      return fail(Status::parse_error(file + ": not JSON: " + e.what()));
    }
    std::string workload, policy;
    Result<Cell> cell = Status::internal("unset");
    try {
      cell = cell_of(file, j);
      if (!cell) return fail(cell.status());
      workload = std::filesystem::path(j.value("workload", file)).stem().string();
      policy = run_label(j);
      if (device.empty()) device = j.value("device", std::string());
    } catch (const json::exception& e) {
      // A field of the wrong type (a number where a name belongs): the file named, nothing thrown on.
      return fail(Status::parse_error(file + ": not a `concord run` results file: " + e.what()));
    }
    if (cells.count({policy, workload})) {
      return fail(Status::invalid_argument(file + ": a second run of policy '" + policy + "' on workload '" + workload +
                                           "' (one file per policy and workload)"));
    }
    if (std::find(workloads.begin(), workloads.end(), workload) == workloads.end()) workloads.push_back(workload);
    if (std::find(policies.begin(), policies.end(), policy) == policies.end()) policies.push_back(policy);
    if (cell->rank) {
      // One kind of figure per column: throughput over serial beside a window STP (a run with
      // --no-serial, or a schema 1 file) would be ranked as if they were one measure.
      if (auto k = kinds.find(workload); k != kinds.end() && k->second != cell->headline) {
        return fail(Status::invalid_argument(fmt::format("{}: its headline is {} where another run of workload '{}' has {}; "
                                                         "compare runs with the same headline (all with or all without --no-serial)",
                                                         file, cell->headline, workload, k->second)));
      }
      kinds[workload] = cell->headline;
    }
    cells[{policy, workload}] = std::move(*cell);
  }
  // The best run of each workload (the highest rank) gets a mark.
  std::map<std::string, double> best;
  for (const auto& [key, c] : cells) {
    if (!c.rank) continue;
    auto it = best.find(key.second);
    if (it == best.end() || *c.rank > it->second) best[key.second] = *c.rank;
  }
  auto text = [&](const std::string& p, const std::string& w) {
    auto it = cells.find({p, w});
    if (it == cells.end()) return std::string("-");
    const Cell& c = it->second;
    const bool top = c.rank && *c.rank == best[w];
    return c.text + (top ? " *" : o.markdown ? "" : "  ");  // plain text: the marks' column kept aligned
  };
  std::ostringstream out;
  if (o.markdown) {
    out << "| policy |";
    for (const auto& w : workloads) out << " " << w << " |";
    out << "\n|---|";
    for (size_t i = 0; i < workloads.size(); ++i) out << "---:|";
    out << "\n";
    for (const auto& p : policies) {
      out << "| " << p << " |";
      for (const auto& w : workloads) out << " " << text(p, w) << " |";
      out << "\n";
    }
  } else {
    size_t pw = 6;
    for (const auto& p : policies) pw = std::max(pw, p.size());
    std::vector<size_t> widths;
    for (const auto& w : workloads) {
      size_t width = w.size();
      for (const auto& p : policies) width = std::max(width, text(p, w).size());
      widths.push_back(width);
    }
    out << fmt::format("{:<{}}", "policy", pw);
    for (size_t i = 0; i < workloads.size(); ++i) out << fmt::format("  {:>{}}", workloads[i], widths[i]);
    out << "\n";
    for (const auto& p : policies) {
      out << fmt::format("{:<{}}", p, pw);
      for (size_t i = 0; i < workloads.size(); ++i) out << fmt::format("  {:>{}}", text(p, workloads[i]), widths[i]);
      out << "\n";
    }
  }
  out << "\n";
  for (const auto& w : workloads) {
    auto it = kinds.find(w);
    out << w << ": " << (it == kinds.end() ? std::string("no run finished") : headline_legend(it->second)) << "\n";
  }
  out << "* the best policy of each workload" << (device.empty() ? "" : "; device " + device) << "\n";
  std::cout << out.str();
  return kExitOk;
}

}  // namespace

Subcommand add_compare_command(CLI::App& parent) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* app = parent.add_subcommand(
      "compare", "One table of many runs' headline figures: a row per policy, a column per workload (results JSON files)");
  app->add_option("inputs", o->inputs, "Results JSON files of `concord run --out`, one per policy and workload")->required();
  app->add_flag("--markdown", o->markdown, "A Markdown table");
  return {app, [o](const Config&) { return compare(*o); }};
}

}  // namespace concord::cli
