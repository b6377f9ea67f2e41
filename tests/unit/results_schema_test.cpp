// The results JSON against its schema (docs/schema/results-v2.json). nlohmann-json has no
// validator, so this file checks the subset of JSON Schema the schema uses: type (one or a list),
// const, enum, required, properties, additionalProperties (as a schema), items, minItems and
// maxItems; any other keyword in the schema fails the test, so the schema cannot drift into
// keywords nobody checks.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/sim/sim_backend.h"
#include "concord/device.h"
#include "concord/experiment.h"
#include "concord/report.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"

namespace concord {
namespace {

using nlohmann::json;

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// Appends "path: reason" for every way `value` breaks `schema`.
void check(const json& schema, const json& value, const std::string& path, std::vector<std::string>& errors) {
  static const std::set<std::string> known = {"$schema", "title", "description", "type", "const", "enum", "required",
                                              "properties", "additionalProperties", "items", "minItems", "maxItems"};
  for (const auto& [keyword, unused] : schema.items()) {
    if (!known.count(keyword)) errors.push_back(path + ": the schema uses '" + keyword + "', which this check does not know");
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool any = false;
    for (const auto& t : types) any = any || has_type(value, t.get<std::string>());
    if (!any) {
      errors.push_back(path + ": " + value.type_name() + " where the schema wants " + schema["type"].dump());
      return;
    }
  }
  if (schema.contains("const") && value != schema["const"]) errors.push_back(path + ": not " + schema["const"].dump());
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found) errors.push_back(path + ": " + value.dump() + " is not one of " + schema["enum"].dump());
  }
  if (value.is_object()) {
    for (const auto& r : schema.value("required", json::array())) {
      if (!value.contains(r.get<std::string>())) errors.push_back(path + ": missing required field '" + r.get<std::string>() + "'");
    }
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, child] : value.items()) {
      const std::string at = path + "." + key;
      if (properties.contains(key)) check(properties[key], child, at, errors);
      else if (schema.contains("additionalProperties")) check(schema["additionalProperties"], child, at, errors);
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) errors.push_back(path + ": too few items");
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) errors.push_back(path + ": too many items");
    if (schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i) check(schema["items"], value[i], path + "[" + std::to_string(i) + "]", errors);
    }
  }
}

std::vector<std::string> validate(const json& schema, const json& value) {
  std::vector<std::string> errors;
  check(schema, value, "$", errors);
  return errors;
}

json load_schema() {
  std::ifstream in(CONCORD_SCHEMA_DIR "/results-v2.json");
  EXPECT_TRUE(in.good()) << "cannot open " CONCORD_SCHEMA_DIR "/results-v2.json";
  return json::parse(in);
}

// Results of one example on the simulator, as `concord run --out` writes them.
json results_of(const std::string& example, const std::string& policy, bool compare_serial) {
  auto workload = load_workload_file(std::string(CONCORD_EXAMPLES_DIR) + "/" + example);
  EXPECT_TRUE(workload.is_ok()) << workload.status().to_string();
  if (!workload.is_ok()) return json();
  ExperimentConfig config;
  config.backend = BackendConfig{"sim", h200_spec(), 1};
  config.policy = policy;
  config.compare_serial = compare_serial;
  ReferenceCache cache;
  auto result = run_experiment(*workload, config, cache);
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  if (!result.is_ok()) return json();
  // The device as the backend states it, as `concord run` takes it.
  const RunContext context{example, {}, "0.1.0", "abc123", sim::SimBackend(h200_spec()).device()};
  return json::parse(experiment_json(*result, context));
}

TEST(ResultsSchema, TheSchemaIsVersionOneOfTheLayoutTheReportWrites) {
  const json schema = load_schema();
  EXPECT_EQ(schema.at("properties").at("schema_version").at("const"), kResultsSchemaVersion);
  // Every required field is described.
  std::vector<const json*> stack = {&schema};
  while (!stack.empty()) {
    const json& s = *stack.back();
    stack.pop_back();
    for (const auto& r : s.value("required", json::array())) {
      EXPECT_TRUE(s.at("properties").contains(r.get<std::string>())) << r;
    }
    if (s.contains("properties")) {
      for (const auto& [key, child] : s.at("properties").items()) stack.push_back(&child);
    }
    if (s.contains("items")) stack.push_back(&s.at("items"));
  }
}

TEST(ResultsSchema, RunsOfTheExamplesMatchTheSchema) {
  const json schema = load_schema();
  for (const auto& [example, policy, serial] : {std::tuple{"pair.yaml", "fedc", true}, std::tuple{"mix4.yaml", "streams", false},
                                                 std::tuple{"dnn.yaml", "static-partition", true}}) {
    const json results = results_of(example, policy, serial);
    ASSERT_FALSE(results.is_null());
    EXPECT_EQ(validate(schema, results), std::vector<std::string>{}) << example << " under " << policy;
    EXPECT_EQ(results.at("schema_version"), kResultsSchemaVersion);
    EXPECT_EQ(results.at("build").at("commit"), "abc123");
    EXPECT_EQ(results.at("device_info").at("name"), h200_spec().name);
    EXPECT_TRUE(results.at("device_info").at("simulated").get<bool>());
    for (const char* field : {"driver_version", "cuda_version", "cuda_driver_version"}) {
      EXPECT_EQ(results.at("device_info").at(field), "sim") << field << ": the simulator names itself in place of a driver";
    }
    EXPECT_GT(results.at("device_info").at("clock_hz").get<double>(), 0);
  }
}

TEST(ResultsSchema, TheCheckCatchesMissingFieldsAndWrongTypes) {
  const json schema = load_schema();
  json results = results_of("pair.yaml", "streams", true);
  ASSERT_FALSE(results.is_null());
  json missing = results;
  missing.erase("schema_version");
  EXPECT_EQ(validate(schema, missing), std::vector<std::string>{"$: missing required field 'schema_version'"});
  json wrong = results;
  wrong["tenants"][1]["logical_blocks"] = "5";
  EXPECT_EQ(validate(schema, wrong),
            std::vector<std::string>{"$.tenants[1].logical_blocks: string where the schema wants \"integer\""});
  json later = results;
  later["schema_version"] = 3;
  EXPECT_EQ(validate(schema, later), std::vector<std::string>{"$.schema_version: not 2"});
  json bad_class = results;
  bad_class["tenants"][0]["class"] = "batch";
  EXPECT_EQ(validate(schema, bad_class).size(), 1u);
}

// Stops the run once `after` requests have ended, as SIGINT does through `concord run`.
class StopAfter final : public EngineObserver {
 public:
  StopAfter(std::atomic<bool>& stop, int after) : stop_(stop), after_(after) {}
  void on_request_end(TenantId, const RequestRecord&) override {
    if (++ended_ == after_) stop_.store(true);
  }

 private:
  std::atomic<bool>& stop_;
  int after_;
  int ended_ = 0;
};

TEST(ResultsSchema, ResultsOfARunThatEndedEarlyMatchTheSchemaAndSaySo) {
  const json schema = load_schema();
  auto workload = load_workload_file(std::string(CONCORD_EXAMPLES_DIR) + "/mix4.yaml");
  ASSERT_TRUE(workload.is_ok()) << workload.status().to_string();
  std::atomic<bool> stop{false};
  StopAfter observer(stop, 5);
  ExperimentConfig config;
  config.backend = BackendConfig{"sim", h200_spec(), 1};
  config.policy = "streams";
  config.observer = &observer;
  config.stop = &stop;
  ReferenceCache cache;
  const ExperimentOutcome outcome = run_experiment_outcome(*workload, config, cache);
  ASSERT_EQ(outcome.status.code(), StatusCode::cancelled) << outcome.status.to_string();
  const RunContext context{"mix4.yaml", {}, "0.1.0", "abc123", h200_spec()};
  const json results = json::parse(experiment_json(outcome, context));
  EXPECT_EQ(validate(schema, results), std::vector<std::string>{});
  EXPECT_FALSE(results.at("status").at("complete").get<bool>());
  EXPECT_EQ(results.at("status").at("code"), "cancelled");
  EXPECT_EQ(results.at("status").at("stage"), "shared run");
  EXPECT_TRUE(results.at("metrics").is_null());
  int64_t finished = 0, unfinished_times = 0;
  for (const json& t : results.at("tenants")) {
    finished += t.at("requests_finished").get<int64_t>();
    EXPECT_TRUE(t.at("np").is_null());
    for (const json& q : t.at("requests")) unfinished_times += q.at("end_s").is_null();
  }
  EXPECT_GE(finished, 5);
  EXPECT_GT(unfinished_times, 0) << "requests in flight at the stop have no end";
  // A complete run says so too.
  const json whole = results_of("pair.yaml", "streams", false);
  EXPECT_TRUE(whole.at("status").at("complete").get<bool>());
  EXPECT_TRUE(whole.at("status").at("reason").is_null());
}

}  // namespace
}  // namespace concord
