// concord_channel_analyze RAW.json [--out-dir DIR] [--seed S] [--permutations N]: the channel
// probe's verdict (docs/channel_probe.md). Writes DIR/verdict.json and DIR/summary.md (DIR: the
// raw file's folder) and prints the summary. Exit status 2 when the raw file is malformed (the
// message names the field), 1 when an output cannot be written.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "channel_analysis.h"
#include "channel_raw.h"
#include "concord/cli_parse.h"

int main(int argc, char** argv) {
  CLI::App app{"Decides from concord_channel_probe's raw timings whether HBM channels can be steered by in-page offsets"};
  std::string raw_path, out_dir;
  concord::channel::AnalysisOptions options;
  app.add_option("raw", raw_path, "raw timings written by concord_channel_probe")->required();
  app.add_option("--out-dir", out_dir, "folder for verdict.json and summary.md (default: the raw file's folder)");
  app.add_option("--seed", options.seed, "seed of the permutation tests")->capture_default_str();
  app.add_option("--permutations", options.permutations, "permutations of the interaction test")
      ->capture_default_str()
      ->check(CLI::Range(100, 1000000));
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);

  auto raw = concord::channel::read_raw_file(raw_path);
  if (!raw) {
    std::fprintf(stderr, "concord_channel_analyze: %s\n", raw.status().message().c_str());
    return 2;
  }
  const auto report = concord::channel::analyze(*raw, options);
  if (out_dir.empty()) out_dir = std::filesystem::path(raw_path).parent_path().string();
  if (out_dir.empty()) out_dir = ".";
  const std::string markdown = concord::channel::report_markdown(report);
  const std::filesystem::path dir(out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"verdict.json", concord::channel::report_json(report).dump(1) + "\n"},
                                   {"summary.md", markdown}}) {
    std::ofstream out(dir / name);
    out << text;
    if (!out) {
      std::fprintf(stderr, "concord_channel_analyze: %s: cannot write\n", (dir / name).string().c_str());
      return 1;
    }
  }
  std::fputs(markdown.c_str(), stdout);
  return 0;
}
