// Root tier: the perf probe's user-space frames, end to end. A streaming server whose every
// 15th token runs a named slow function (C++: ld_wl::slow_detokenize; Python:
// render_usage_summary; FastAPI: build_usage_report in the event loop) is recorded by
// `latency-doctor attach`; the report must name the function for >= 90% of those slow tokens,
// with its share, and the extra-code finding must name it. Python targets: Debian's stripped
// /usr/bin/python3.11 and pyenv's 3.10-3.13 builds where installed (skipped otherwise).
#include <unistd.h>

#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent_util.hpp"
#include "probe_test_util.hpp"
#include "probes/python_frames.hpp"
#include "probes/user_symbols.hpp"

namespace ld::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kWorkloads = std::string(LD_SOURCE_DIR) + "/tests/workloads";
const std::string kDebian = "/usr/bin/python3.11";
std::string pyenv(const std::string& v) {
  const std::string minor = v.substr(0, v.rfind('.'));
  return "/root/.pyenv/versions/" + v + "/bin/python" + minor;
}

struct Target {
  std::unique_ptr<Child> proc;
  int port = 0;
  explicit Target(std::vector<std::string> argv) {
    proc = std::make_unique<Child>(argv);
    if (!proc->wait_for_output("listening on", 30s)) return;
    std::smatch m;
    const std::string out = proc->out();
    if (std::regex_search(out, m, std::regex(R"(listening on 127\.0\.0\.1:(\d+))"))) port = std::stoi(m[1]);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1/completions"; }
};

// Records `target` while 6 requests of 46 tokens run one after another (3 slow tokens each:
// 15, 30, 45), then checks that those slow tokens are outliers whose frames name `function`.
void expect_named(Target& target, const std::string& function, bool python) {
  ASSERT_GT(target.port, 0) << target.proc->err();
  const json report = agent::run_and_report(target.proc->pid(), "120s", [&] {
    auto result = agent::drive(target.url(), 6, 1, 46);
    EXPECT_EQ(result.failed, 0);
  });
  ASSERT_TRUE(report.is_object());
  std::string perf_detail;
  for (const json& p : report.value("probes", json::array()))
    if (p.value("name", "") == "perf") perf_detail = p.value("reason", "");
  ASSERT_NE(perf_detail.find("user stacks by frame pointers"), std::string::npos) << perf_detail;
  if (python) {
    EXPECT_NE(perf_detail.find("Python frames: Python 3."), std::string::npos) << perf_detail;
  }

  int slow = 0, named = 0;
  double share = 0;
  std::string seen, misses;  // misses: the outliers that named another function, whole
  for (const json& o : report["outliers"]) {
    // The slow function's tokens (15, 30, 45): other gaps the host made slow are not judged.
    const uint64_t index = o.value("token_index", uint64_t{0});
    if (o.value("kind", "") != "tpot" || index == 0 || index % 15 != 0) continue;
    ++slow;
    const json frames = o.value("frames", json::array());
    if (frames.empty()) {
      seen += "(none) ";
      continue;
    }
    seen += frames[0].value("function", "") + " ";
    if (frames[0].value("function", "") != function) misses += o.dump() + "\n";
    if (frames[0].value("function", "") == function) {
      ++named;
      share += frames[0].value("share", 0.0);
      EXPECT_EQ(frames[0].value("runtime", ""), python ? "python" : "native");
      EXPECT_LT(frames[0].value("typical_share", 1.0), 0.1);
    }
  }
  std::printf("frames: %d of %d slow tokens name %s (mean share %.2f)\n", named, slow, function.c_str(),
              named ? share / named : 0.0);
  EXPECT_GE(slow, 12) << "the workload's slow tokens were not found as outliers";
  EXPECT_GE(named, (slow * 9 + 9) / 10) << "first frames seen: " << seen << "\n" << misses;
  if (named) {
    EXPECT_GE(share / named, 0.5);
  }

  bool finding = false;
  for (const json& f : report.value("findings", json::array()))
    if (f.value("rule", "") == "extra-code") {
      finding = true;
      EXPECT_NE(f.value("title", "").find(function), std::string::npos) << f.dump();
      EXPECT_NE(f.value("evidence", "").find(function), std::string::npos) << f.dump();
    }
  EXPECT_TRUE(finding) << "no extra-code finding";
}

TEST(FramesProbe, CppSlowFunctionIsNamed) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Target t({workload_path("frames_server"), "--port", "0"});
  expect_named(t, "ld_wl::slow_detokenize", false);
}

void python_case(const std::string& python) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed";
  Target t({python, kWorkloads + "/frames_server.py", "--port", "0"});
  expect_named(t, "render_usage_summary", true);
}

TEST(FramesProbe, DebianPython311) { python_case(kDebian); }
TEST(FramesProbe, Pyenv310) { python_case(pyenv("3.10.13")); }
TEST(FramesProbe, Pyenv311) { python_case(pyenv("3.11.7")); }
TEST(FramesProbe, Pyenv312) { python_case(pyenv("3.12.1")); }
TEST(FramesProbe, Pyenv313) { python_case(pyenv("3.13.0")); }

TEST(FramesProbe, FastApiEventLoopFunctionIsNamed) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  if (access(kDebian.c_str(), X_OK) != 0) GTEST_SKIP() << kDebian << " is not installed";
  if (system((kDebian + " -c 'import fastapi, uvicorn' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "python3-fastapi / python3-uvicorn are not installed (scripts/setup.sh)";
  Target t({kDebian, kWorkloads + "/frames_fastapi.py", "--port", "0"});
  expect_named(t, "build_usage_report", true);
}

// --user-stacks off: the samples are plain ld_cpu_sample records, as before user stacks; on (the
// default), ld_cpu_frames with native stacks named in ld_ustack records of the process.
TEST(FramesProbe, UserStacksOffAndOn) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const bool on : {false, true}) {
    SCOPED_TRACE(on ? "on" : "off");
    Child wl({workload_path("perf_kernel_busy")});
    Recorded rec = record_workload(wl, "perf", 20s, {"--user-stacks", on ? "on" : "off"});
    ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
    const std::string detail = rec.probe("perf").value("reason", "");
    const auto plain = rec.of_type<ld_cpu_sample>(LD_EV_CPU_SAMPLE);
    const auto framed = rec.of_type<ld_cpu_frames>(LD_EV_CPU_FRAMES);
    if (!on) {
      EXPECT_NE(detail.find("no user stacks: --user-stacks off"), std::string::npos) << detail;
      EXPECT_GT(plain.size(), 10u);
      EXPECT_TRUE(framed.empty());
      EXPECT_TRUE(rec.of_type<ld_ustack>(LD_EV_USTACK).empty());
      continue;
    }
    EXPECT_NE(detail.find("user stacks by frame pointers"), std::string::npos) << detail;
    EXPECT_TRUE(plain.empty());
    ASSERT_GT(framed.size(), 10u);
    size_t with_stack = 0;
    for (const auto& f : framed) with_stack += f.ustack_id >= 0;
    EXPECT_GT(with_stack, framed.size() / 2);
    // Every stack a sample names comes as a record of its process, its innermost frame named.
    std::set<int64_t> ids;
    size_t named = 0;
    for (const auto& r : rec.records) {
      const auto* u = reinterpret_cast<const ld_ustack*>(r.data());
      if (u->hdr.type != LD_EV_USTACK) continue;
      EXPECT_EQ(u->hdr.tgid, uint32_t(wl.pid()));
      ids.insert(u->stack_id);
      ld_uframe first{};
      if (u->depth > 0) std::memcpy(&first, reinterpret_cast<const char*>(r.data()) + sizeof(ld_ustack), sizeof(first));
      named += first.func[0] != 0;
    }
    for (const auto& f : framed) {
      if (f.ustack_id >= 0) {
        EXPECT_TRUE(ids.count(f.ustack_id)) << f.ustack_id;
      }
    }
    EXPECT_GT(named, ids.size() / 2);
  }
}

// C++ names as the reports show them: demangled, without parameters, qualifiers or clone suffixes.
TEST(FramesProbe, ReadableSymbols) {
  EXPECT_EQ(probes::readable_symbol("_ZN5ld_wl15slow_detokenizeERKNS_7OptionsEi"), "ld_wl::slow_detokenize");
  EXPECT_EQ(probes::readable_symbol("_ZN12_GLOBAL__N_17burn_msEd.part.0"), "(anonymous namespace)::burn_ms");
  EXPECT_EQ(probes::readable_symbol("_ZNK3foo3Bar3getEv"), "foo::Bar::get");
  EXPECT_EQ(probes::readable_symbol("PyEval_EvalCode"), "PyEval_EvalCode");
  EXPECT_EQ(probes::readable_symbol("_Znot_a_name"), "_Znot_a_name");
}

// 3.13's own offsets (_Py_DebugOffsets, read from the file) against the table kept for it: the
// table is what a 3.13 whose debug offsets cannot be read gets.
TEST(FramesProbe, Python313DebugOffsetsMatchTheTable) {
  const std::string python = pyenv("3.13.0");
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed";
  Child py({python, "-c", "import time; print('ready', flush=True); time.sleep(30)"});
  ASSERT_TRUE(py.wait_for_output("ready", 20s));
  std::string why;
  auto found = probes::find_python_process(static_cast<uint32_t>(py.pid()), &why);
  ASSERT_TRUE(found) << why;
  EXPECT_EQ(found->version, 0x030du);
  EXPECT_EQ(found->offsets, "_Py_DebugOffsets");
  auto table = probes::python_offsets_table(0x030d);
  ASSERT_TRUE(table);
  const ld_py_offsets& got = found->proc.off;
#define SAME(f) EXPECT_EQ(got.f, table->f) << #f
  SAME(runtime_interp_head);
  SAME(interp_threads_head);
  SAME(tstate_next);
  SAME(tstate_id);
  SAME(tstate_frame);
  SAME(frame_code);
  SAME(frame_previous);
  SAME(frame_instr);
  SAME(frame_owner);
  SAME(code_name);
  SAME(code_filename);
  SAME(code_firstlineno);
  SAME(code_linetable);
  SAME(code_adaptive);
  SAME(object_type);
  SAME(bytes_size);
  SAME(bytes_data);
  SAME(str_length);
  SAME(str_state);
  SAME(str_ascii_data);
  SAME(str_utf8);
#undef SAME
}

// Every interpreter found with its runtime and a version the walker knows; a native program is not one.
TEST(FramesProbe, PythonRuntimesAreFound) {
  int checked = 0;
  for (const std::string& python : {kDebian, pyenv("3.10.13"), pyenv("3.11.7"), pyenv("3.12.1"), pyenv("3.13.0")}) {
    if (access(python.c_str(), X_OK) != 0) continue;
    SCOPED_TRACE(python);
    Child py({python, "-c", "import time; print('ready', flush=True); time.sleep(30)"});
    ASSERT_TRUE(py.wait_for_output("ready", 20s));
    std::string why;
    auto found = probes::find_python_process(static_cast<uint32_t>(py.pid()), &why);
    ASSERT_TRUE(found) << why;
    const std::string minor = python.substr(python.rfind("python") + 6);
    EXPECT_EQ(found->version, 0x0300u | static_cast<uint32_t>(std::stoi(minor.substr(2))));
    EXPECT_NE(found->proc.runtime, 0u);
    EXPECT_NE(found->proc.code_type, 0u);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no CPython 3.10-3.13 installed";
  Child native({workload_path("frames_server"), "--port", "0"});
  ASSERT_TRUE(native.wait_for_output("listening on", 10s));
  std::string why;
  EXPECT_FALSE(probes::find_python_process(static_cast<uint32_t>(native.pid()), &why));
  EXPECT_EQ(why, "not a CPython process");
}

}  // namespace
}  // namespace ld::test
