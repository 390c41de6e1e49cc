// cpu.*, mem.*, numa.*, irq.* facts from /proc and /sys.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "audit/cpu_list.hpp"
#include "audit/fact_sink.hpp"
#include "util/time.hpp"

namespace ld::audit {
namespace {

const std::string kCpuDir = "/sys/devices/system/cpu";

std::optional<double> to_number(std::string_view text) {
  std::string line = first_line(text);
  double v = 0;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
  if (ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
  return v;
}

// "always [madvise] never" -> "madvise"
std::optional<std::string> bracketed_choice(std::string_view text) {
  auto open = text.find('[');
  auto close = text.find(']', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return std::nullopt;
  return std::string(text.substr(open + 1, close - open - 1));
}

// The value after "key:" on a /proc/cpuinfo or /proc/meminfo line.
std::optional<std::string> keyed_line(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    auto colon = line.find(':');
    if (colon != std::string_view::npos && first_line(line.substr(0, colon)) == key)
      return first_line(line.substr(colon + 1));
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

std::vector<int> cpu_numbers(const HostTree& tree) {
  std::vector<int> cpus;
  for (const auto& name : tree.list(kCpuDir)) {
    int n = 0;
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0) continue;
    auto [end, ec] = std::from_chars(name.data() + 3, name.data() + name.size(), n);
    if (ec == std::errc() && end == name.data() + name.size()) cpus.push_back(n);
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

void read_cpu_count_and_model(FactSink& sink) {
  auto cpuinfo = sink.read("cpu.model", "/proc/cpuinfo");
  if (auto online = sink.read("cpu.count", kCpuDir + "/online")) {
    if (auto cpus = parse_cpu_list(first_line(*online))) sink.set("cpu.count", cpus->size(), kCpuDir + "/online");
    else sink.unknown("cpu.count", kCpuDir + "/online", "malformed: " + first_line(*online));
  }
  if (!cpuinfo) return;
  // x86 names the model; arm64 has no "model name" but a "CPU part".
  for (const char* key : {"model name", "Model", "CPU part"}) {
    if (auto model = keyed_line(*cpuinfo, key); model && !model->empty()) {
      sink.set("cpu.model", *model, "/proc/cpuinfo");
      return;
    }
  }
  sink.unknown("cpu.model", "/proc/cpuinfo", "no model name line");
}

void read_cpufreq(FactSink& sink, const std::vector<int>& cpus) {
  const HostTree& tree = sink.tree();
  if (!tree.is_dir(kCpuDir + "/cpu0/cpufreq") && !tree.is_dir(kCpuDir + "/cpufreq/policy0")) {
    // No cpufreq driver (typical of VMs): the host controls the frequency; nothing to tune here.
    if (tree.is_dir(kCpuDir)) sink.set("cpu.cpufreq", false, kCpuDir + "/cpu0/cpufreq");
    else sink.unknown("cpu.cpufreq", kCpuDir, "no such directory");
    return;
  }
  sink.set("cpu.cpufreq", true, kCpuDir + "/cpu0/cpufreq");
  // Every CPU's governor: one slow CPU is enough to make the token thread's speed a lottery.
  std::set<std::string> governors;
  std::string first_path;
  FileText first_failure;
  for (int cpu : cpus) {
    std::string path = fmt::format("{}/cpu{}/cpufreq/scaling_governor", kCpuDir, cpu);
    if (first_path.empty()) first_path = path;
    FileText text = tree.read(path);
    if (text.ok) governors.insert(first_line(text.text));
    else if (first_failure.error.empty()) first_failure = text;
  }
  if (!governors.empty()) {
    std::string joined;
    for (const auto& g : governors) joined += (joined.empty() ? "" : ",") + g;
    sink.set("cpu.governor", joined, governors.size() == 1 ? first_path : kCpuDir + "/cpu*/cpufreq/scaling_governor");
  } else {
    sink.unknown("cpu.governor", first_path, first_failure.error.empty() ? "no CPU directories" : first_failure.error);
  }
  // Boost: acpi-cpufreq/amd-pstate expose cpufreq/boost, intel_pstate no_turbo (inverted).
  if (auto boost = sink.read_optional("cpu.boost", kCpuDir + "/cpufreq/boost")) {
    if (auto v = to_number(*boost)) sink.set("cpu.boost", *v != 0, kCpuDir + "/cpufreq/boost");
  } else if (auto no_turbo = sink.read_optional("cpu.boost", kCpuDir + "/intel_pstate/no_turbo")) {
    if (auto v = to_number(*no_turbo)) sink.set("cpu.boost", *v == 0, kCpuDir + "/intel_pstate/no_turbo");
  }
}

// Enabled idle states of cpu0: a deep C-state costs its exit latency on every wake-up of the
// token thread (tuned's latency-performance caps it with force_latency).
void read_idle_states(FactSink& sink) {
  const HostTree& tree = sink.tree();
  const std::string dir = kCpuDir + "/cpu0/cpuidle";
  if (!tree.is_dir(dir)) {
    if (tree.is_dir(kCpuDir)) sink.set("cpu.idle_states", "", dir);  // no cpuidle: busy-waits or halts
    return;
  }
  if (auto driver = sink.read_optional("cpu.idle_driver", kCpuDir + "/cpuidle/current_driver"))
    sink.set("cpu.idle_driver", first_line(*driver), kCpuDir + "/cpuidle/current_driver");
  std::string names;
  double max_latency_us = -1;
  std::string deepest;
  for (const auto& state : tree.list(dir)) {
    if (state.rfind("state", 0) != 0) continue;
    std::string base = dir + "/" + state;
    auto name = sink.read("cpu.idle_states", base + "/name");
    auto latency = sink.read("cpu.idle_states", base + "/latency");
    if (!name || !latency) continue;
    auto disabled = tree.read(base + "/disable");
    if (disabled.ok && to_number(disabled.text).value_or(0) != 0) continue;
    names += (names.empty() ? "" : ",") + first_line(*name);
    if (auto us = to_number(*latency); us && *us > max_latency_us) {
      max_latency_us = *us;
      deepest = first_line(*name);
    }
  }
  sink.set("cpu.idle_states", names, dir);
  if (max_latency_us >= 0) {
    sink.set("cpu.idle_deepest", deepest, dir);
    sink.set("cpu.idle_max_latency_ms", util::us_to_ms(max_latency_us), dir);
  }
}

void read_memory(FactSink& sink) {
  const std::string thp = "/sys/kernel/mm/transparent_hugepage";
  for (auto [fact, file] : {std::pair{"mem.thp_enabled", "/enabled"}, std::pair{"mem.thp_defrag", "/defrag"}}) {
    auto text = sink.read(fact, thp + file);
    if (!text) continue;
    if (auto choice = bracketed_choice(*text)) sink.set(fact, *choice, thp + file);
    else sink.unknown(fact, thp + file, "malformed: " + first_line(*text));
  }
  auto meminfo = sink.read("mem.swap_total_bytes", "/proc/meminfo");
  if (!meminfo) return;
  for (auto [fact, key] : {std::pair{"mem.swap_total_bytes", "SwapTotal"}, std::pair{"mem.total_bytes", "MemTotal"}}) {
    auto value = keyed_line(*meminfo, key);
    std::optional<double> kb = value ? to_number(value->substr(0, value->find(' '))) : std::nullopt;
    if (kb) sink.set(fact, *kb * 1024.0, "/proc/meminfo");
    else sink.unknown(fact, "/proc/meminfo", fmt::format("no {} line", key));
  }
}

void read_numa(FactSink& sink) {
  const std::string dir = "/sys/devices/system/node";
  if (auto online = sink.read_optional("numa.nodes", dir + "/online")) {
    if (auto nodes = parse_cpu_list(first_line(*online))) {
      sink.set("numa.nodes", nodes->size(), dir + "/online");
      return;
    }
  }
  // A kernel without CONFIG_NUMA has no node directory: one node.
  if (sink.tree().is_dir("/sys/devices/system") && !sink.tree().exists(dir)) sink.set("numa.nodes", 1, dir);
  else if (!sink.facts().has("numa.nodes")) sink.unknown("numa.nodes", dir + "/online", "no such file");
}

// irqbalance spreads device interrupts over CPUs; without it they may all land on CPU 0,
// and a token thread there shares its CPU with every packet.
void read_irq(FactSink& sink) {
  const HostTree& tree = sink.tree();
  bool any_process = false;
  for (const auto& name : tree.list("/proc")) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    auto comm = tree.read("/proc/" + name + "/comm");
    if (!comm.ok) continue;
    any_process = true;
    if (first_line(comm.text) == "irqbalance") {
      sink.set("irq.irqbalance_running", true, "/proc/" + name + "/comm");
      return;
    }
  }
  if (any_process) sink.set("irq.irqbalance_running", false, "/proc/*/comm");
  else sink.unknown("irq.irqbalance_running", "/proc/*/comm", "no process list under this root");
}

}  // namespace

void read_system_facts(FactSink& sink) {
  read_cpu_count_and_model(sink);
  read_cpufreq(sink, cpu_numbers(sink.tree()));
  read_idle_states(sink);
  read_memory(sink);
  read_numa(sink);
  read_irq(sink);
}

}  // namespace ld::audit
