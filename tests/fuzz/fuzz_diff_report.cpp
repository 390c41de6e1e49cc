// libFuzzer target: any bytes as the two JSON reports of `diff`. Reading a report may refuse it
// (invalid_argument), never crash; every format renders what is read, histograms of any shape
// included.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "compare/diff.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (report.is_discarded()) return 0;
  try {
    ld::compare::Side a = ld::compare::side_of_report(report, "a.json");
    ld::compare::Side b = a;
    b.label = "b.json";
    const ld::compare::Diff d = ld::compare::diff_sides(std::move(a), std::move(b), size);
    for (const char* format : {"text", "markdown", "html", "json"}) (void)ld::compare::render_diff(d, format);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
