// Golden reports: every report format of the recorded traces in tests/fixtures/golden (and the
// formats fixture), made by the real binary (`latency-doctor report TRACE --format F`), must be
// byte-identical to what was accepted in tests/fixtures/golden/expected. A refactoring keeps
// them; a change meant to alter reports rewrites them with scripts/update_golden.sh and shows
// the difference in review. HTML and Perfetto output are kept as "size fnv1a-64" digests.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(LD_TEST_FIXTURES_DIR);
const fs::path kExpected = kFixtures / "golden" / "expected";

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string digest(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64: detects any change, nothing more is asked
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  return fmt::format("{} {:016x}\n", bytes.size(), h);
}

// "" when equal, else the first line that differs, both ways (the whole report is too long
// to read in a test log).
std::string first_difference(const std::string& got, const std::string& want) {
  if (got == want) return "";
  size_t line = 1, at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) {
    if (got[at] == '\n') ++line;
    ++at;
  }
  auto line_at = [](const std::string& text, size_t pos) {
    const size_t begin = text.rfind('\n', pos == 0 ? 0 : pos - 1);
    const size_t from = begin == std::string::npos ? 0 : begin + 1;
    return text.substr(from, text.find('\n', from) - from);
  };
  return fmt::format("line {}:\n  got:  {}\n  want: {}", line, line_at(got, at), line_at(want, at));
}

std::vector<fs::path> golden_traces() {
  std::vector<fs::path> traces{kFixtures / "formats" / "sample.ldtrace"};
  for (const auto& entry : fs::directory_iterator(kFixtures / "golden"))
    if (entry.path().extension() == ".ldtrace") traces.push_back(entry.path());
  return traces;
}

// The report as the CLI writes it, or "" with a failure when the command failed.
std::string cli_report(const fs::path& trace, const std::string& format, const fs::path& dir) {
  const fs::path exe = fs::read_symlink("/proc/self/exe").parent_path() / "latency-doctor";
  const fs::path out = dir / (trace.stem().string() + "." + format);
  const std::string cmd = fmt::format("'{}' report '{}' --format {} -o '{}' 2>/dev/null", exe.string(), trace.string(),
                                      format, out.string());
  const int raw = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << cmd;
  return slurp(out);
}

}  // namespace

TEST(GoldenReports, EveryFormatOfEveryTraceIsUnchanged) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ld-golden-{}", getpid());
  fs::create_directories(dir);
  const auto traces = golden_traces();
  ASSERT_GE(traces.size(), 4u);
  for (const auto& trace : traces) {
    const std::string name = trace.stem().string();
    for (const std::string format : {"text", "json", "markdown", "html", "perfetto"}) {
      const std::string got = cli_report(trace, format, dir);
      ASSERT_FALSE(got.empty()) << name << " " << format;
      if (format == "html" || format == "perfetto") {
        const fs::path want = kExpected / (name + "." + format + ".fnv1a");
        ASSERT_TRUE(fs::exists(want)) << want;
        EXPECT_EQ(digest(got), slurp(want))
            << name << "." << format << " changed (scripts/update_golden.sh if intended)";
      } else {
        const fs::path want = kExpected / (name + "." + format);
        ASSERT_TRUE(fs::exists(want)) << want;
        EXPECT_EQ(first_difference(got, slurp(want)), "")
            << name << "." << format << " changed (scripts/update_golden.sh if intended)";
      }
    }
  }
  fs::remove_all(dir);
}
