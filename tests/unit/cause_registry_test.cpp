// A cause lives in several places (CONTRIBUTING.md, "Add a cause"): the vocabulary, the walk that
// charges it, a rule that turns it into a finding, the docs, a scenario. Each test here fails
// when a cause of model::kCauses is missing from one of them.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "model/cause.hpp"
#include "rules/rule.hpp"

using ld::model::Cause;
using ld::model::kCauses;

namespace {

const std::string kRoot = std::string(LD_TEST_DATA_DIR) + "/../..";

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file of a directory with this extension, concatenated.
std::string read_all(const std::string& dir, const std::string& ext) {
  std::string all;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot + "/" + dir))
    if (entry.path().extension() == ext) all += read(entry.path().string());
  return all;
}

// "disk_io" -> "Cause::kDiskIo": the enumerator's name, as the code spells it.
std::string enumerator(std::string_view id) {
  std::string out = "Cause::k";
  bool upper = true;
  for (char c : id) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

}  // namespace

TEST(CauseRegistry, EveryIdParsesBackToItsCause) {
  for (const auto& info : kCauses) {
    ASSERT_TRUE(ld::model::parse_cause(info.id).has_value()) << info.id;
    EXPECT_EQ(*ld::model::parse_cause(info.id), info.cause) << info.id;
    EXPECT_FALSE(info.label.empty() || info.color.empty() || info.description.empty()) << info.id;
  }
}

TEST(CauseRegistry, EveryCauseIsChargedByTheAnalysis) {
  const std::string analysis = read_all("agent/analysis", ".cpp");
  for (const auto& info : kCauses)
    EXPECT_NE(analysis.find(enumerator(info.id)), std::string::npos)
        << info.id << ": no agent/analysis/*.cpp charges " << enumerator(info.id);
}

TEST(CauseRegistry, EveryCauseHasAShippedRule) {
  ld::rules::RuleSet rules;
  ld::rules::load_rules_path(rules, kRoot + "/rules");
  for (const auto& info : kCauses) {
    bool found = false;
    for (const auto& rule : rules.rules) found = found || rule.cause == info.cause;
    EXPECT_TRUE(found) << info.id << ": no rule in rules/ has cause = \"" << info.id << "\"";
  }
}

TEST(CauseRegistry, EveryCauseIsDocumented) {
  const std::string attribution = read(kRoot + "/docs/attribution.md");
  const std::string rules = read(kRoot + "/docs/rules.md");
  for (const auto& info : kCauses) {
    const std::string quoted = "`" + std::string(info.id) + "`";
    EXPECT_NE(attribution.find(quoted), std::string::npos) << info.id << ": docs/attribution.md never names it";
    EXPECT_NE(rules.find("| " + quoted + " |"), std::string::npos)
        << info.id << ": no row in docs/rules.md's evidence table";
  }
}

TEST(CauseRegistry, EveryCauseHasAScenarioOrSaysWhyNot) {
  // A scenario injects the cause into a real server (tests/integration/scenario_test.cpp); a
  // cause this machine cannot produce is listed in docs/accuracy.md with the reason.
  const std::string scenarios = read(kRoot + "/tests/integration/scenario_test.cpp");
  const std::string accuracy = read(kRoot + "/docs/accuracy.md");
  for (const auto& info : kCauses) {
    if (info.cause == Cause::kUnknown) continue;  // what no probe explains: nothing to inject
    const std::string id(info.id);
    const bool scenario = scenarios.find("\"" + id + "\"") != std::string::npos ||
                          scenarios.find("\"" + id + "+") != std::string::npos ||
                          scenarios.find("+" + id + "\"") != std::string::npos;
    const size_t line = accuracy.find("`" + id + "`");
    bool excused = false;
    for (size_t at = line; at != std::string::npos && !excused; at = accuracy.find("`" + id + "`", at + 1)) {
      const size_t end = accuracy.find('\n', at);
      excused = accuracy.substr(at, end - at).find("no scenario") != std::string::npos;
    }
    EXPECT_TRUE(scenario || excused) << id << ": no scenario in scenario_test.cpp, and docs/accuracy.md does "
                                     << "not say why it has none (\"`" << id << "` ... no scenario\")";
  }
}
