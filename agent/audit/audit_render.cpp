#include "audit/audit_render.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "report/text_table.hpp"
#include "util/time.hpp"

namespace ld::audit {
namespace {

using model::Finding;
using model::SysctlRec;
using report::printable;

const std::string kIndent = "  ";

// ---- fact access for the text report

const rules::FactValue* fact(const AuditResult& r, std::string_view name) { return r.host.facts.get(name); }

std::string value_text(const rules::FactValue& v) {
  if (const double* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d) && *d == std::floor(*d) && std::fabs(*d) < 1e15)
      return fmt::format("{}", static_cast<int64_t>(*d));
    return fmt::format("{:.3g}", *d);
  }
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "yes" : "no";
  return std::get<std::string>(v);
}

std::string text_of(const AuditResult& r, std::string_view name, std::string_view missing = "?") {
  const auto* v = fact(r, name);
  return v ? printable(value_text(*v)) : std::string(missing);
}

std::optional<double> number(const AuditResult& r, std::string_view name) {
  const auto* v = fact(r, name);
  if (!v || !std::holds_alternative<double>(*v)) return std::nullopt;
  return std::get<double>(*v);
}

std::optional<bool> flag(const AuditResult& r, std::string_view name) {
  const auto* v = fact(r, name);
  if (!v || !std::holds_alternative<bool>(*v)) return std::nullopt;
  return std::get<bool>(*v);
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string bytes_fact(const AuditResult& r, std::string_view name) {
  auto n = number(r, name);
  return n ? bytes_text(*n) : "?";
}

// ---- sections

std::string header_section(const AuditResult& r) {
  std::string out = fmt::format("latency-doctor audit of {}", printable(r.host.root));
  if (fact(r, "host.kernel_release")) out += " - kernel " + text_of(r, "host.kernel_release");
  if (fact(r, "cpu.count")) out += fmt::format(", {} CPUs", text_of(r, "cpu.count"));
  if (fact(r, "cpu.model")) out += " (" + text_of(r, "cpu.model") + ")";
  if (fact(r, "mem.total_bytes")) out += ", " + bytes_fact(r, "mem.total_bytes") + " RAM";
  out += "\n";
  if (r.host.target_pid > 0 || !r.host.target_cgroup.empty()) {
    std::string target = "target:";
    if (r.host.target_pid > 0) target += fmt::format(" pid {}", r.host.target_pid);
    if (!r.host.target_comm.empty()) target += " (" + printable(r.host.target_comm) + ")";
    if (!r.host.target_cgroup.empty())
      target += fmt::format("{} cgroup {} (v{})", r.host.target_pid > 0 ? "," : "", printable(r.host.target_cgroup),
                            text_of(r, "cgroup.version"));
    out += target + "\n";
  } else {
    out += "target: none (add --pid PID or --cgroup PATH to check the service's cgroup and open-file limit)\n";
  }
  return out;
}

std::string findings_section(const AuditResult& r) {
  if (r.findings.empty()) return "findings: none\n";
  size_t counts[3] = {0, 0, 0};
  for (const auto& f : r.findings)
    if (int rank = severity_rank(f.severity); rank >= 0) counts[rank]++;
  std::string out = fmt::format("findings: {} crit, {} warn, {} info\n", counts[2], counts[1], counts[0]);
  for (const Finding& f : r.findings) out += report::finding_text(f);
  return out;
}

std::string cpu_line(const AuditResult& r) {
  std::string out = fmt::format("{} CPUs", text_of(r, "cpu.count"));
  auto cpufreq = flag(r, "cpu.cpufreq");
  if (cpufreq && !*cpufreq) {
    out += ", no cpufreq (the hypervisor or firmware sets the frequency)";
  } else if (cpufreq) {
    out += ", governor " + text_of(r, "cpu.governor");
    if (fact(r, "cpu.boost")) out += ", boost " + std::string(*flag(r, "cpu.boost") ? "on" : "off");
  }
  if (const auto* idle = fact(r, "cpu.idle_states")) {
    std::string states = value_text(*idle);
    out += states.empty() ? ", no cpuidle states" : ", idle states " + printable(states);
    if (auto ms = number(r, "cpu.idle_max_latency_ms"))
      out += fmt::format(" (deepest {} exits in {:.0f} us)", text_of(r, "cpu.idle_deepest"), util::ms_to_us(*ms));
  }
  return out;
}

std::string memory_line(const AuditResult& r) {
  std::string out = bytes_fact(r, "mem.total_bytes");
  auto swap = number(r, "mem.swap_total_bytes");
  out += swap ? (*swap == 0 ? ", no swap" : ", swap " + bytes_text(*swap)) : ", swap ?";
  out += ", THP " + text_of(r, "mem.thp_enabled") + " (defrag " + text_of(r, "mem.thp_defrag") + ")";
  out += ", NUMA nodes " + text_of(r, "numa.nodes");
  return out;
}

std::string cgroup_line(const AuditResult& r) {
  std::string out = "v" + text_of(r, "cgroup.version");
  if (r.host.target_pid <= 0 && r.host.target_cgroup.empty()) return out + " (no target given)";
  if (fact(r, "cgroup.path")) out += " " + text_of(r, "cgroup.path");
  auto limited = flag(r, "cgroup.cpu_limited");
  if (!limited) out += ": CPU quota ?";
  else if (*limited) out += fmt::format(": CPU quota {} CPUs", text_of(r, "cgroup.cpu_quota_cpus"));
  else out += ": no CPU quota";
  if (fact(r, "cgroup.cpuset_cpus"))
    out += fmt::format(", cpus {} ({})", text_of(r, "cgroup.cpuset_cpus"), text_of(r, "cgroup.cpuset_count"));
  if (auto throttled = number(r, "cgroup.nr_throttled"))
    out += fmt::format(", throttled in {} of {} periods", *throttled, text_of(r, "cgroup.nr_periods"));
  auto mem = flag(r, "cgroup.mem_limited");
  out += !mem   ? ", memory limit ?"
         : *mem ? ", memory limit " + bytes_fact(r, "cgroup.mem_limit_bytes")
                : ", no memory limit";
  auto swap = flag(r, "cgroup.swap_limited");
  out += !swap   ? ", swap limit ?"
         : *swap ? ", swap limit " + bytes_fact(r, "cgroup.swap_limit_bytes")
                 : ", no swap limit";
  return out;
}

std::string nginx_line(const AuditResult& r) {
  auto found = flag(r, "nginx.found");
  if (!found) return "?";
  if (!*found) return "no /etc/nginx/nginx.conf (no nginx in front, or give --nginx-conf)";
  std::string out = fmt::format("{} ({} files), proxied blocks: {}", text_of(r, "nginx.config"),
                                text_of(r, "nginx.files"), text_of(r, "nginx.proxied_blocks"));
  for (const char* d :
       {"proxy_buffering", "proxy_buffer_size", "proxy_read_timeout", "keepalive_timeout", "proxy_http_version"}) {
    std::string name = std::string("nginx.") + d;
    if (!fact(r, name)) continue;
    bool dflt = flag(r, name + ".default").value_or(false);
    out += fmt::format("\n{}{:<11}{} {}  ({}{})", kIndent, "", d, text_of(r, name),
                       dflt ? "default, proxy_pass at " : "", text_of(r, name + ".at"));
  }
  return out;
}

std::string host_section(const AuditResult& r) {
  std::string out = "host\n";
  auto line = [&](const char* what, const std::string& text) {
    out += kIndent + fmt::format("{:<10} {}\n", what, text);
  };
  line("cpu", cpu_line(r));
  line("memory", memory_line(r));
  line("cgroup", cgroup_line(r));
  if (fact(r, "limits.nofile_soft"))
    line("limits", fmt::format("open files {} soft / {} hard", text_of(r, "limits.nofile_soft"),
                               text_of(r, "limits.nofile_hard")));
  if (auto irq = flag(r, "irq.irqbalance_running")) line("irq", *irq ? "irqbalance running" : "irqbalance not running");
  line("nginx", nginx_line(r));
  return out;
}

std::string sysctl_section(const AuditResult& r) {
  report::TextTable table({{"key", report::Align::kLeft}, {"value", report::Align::kLeft}});
  for (const auto& [name, value] : r.host.facts.all()) {
    if (name.rfind("sysctl.", 0) != 0) continue;
    if (name.size() > 4 && (name.ends_with(".low") || name.ends_with(".high"))) continue;
    table.add_row({name.substr(7), printable(value_text(value))});
  }
  if (auto cost = number(r, "host.sched_migration_cost_ns"))
    table.add_row({"(debugfs) sched/migration_cost_ns", fmt::format("{}", *cost)});
  return "sysctls read\n" + table.render(kIndent);
}

std::string tracing_section(const AuditResult& r) {
  report::TextTable table({{"", report::Align::kLeft}, {"", report::Align::kLeft}, {"", report::Align::kLeft}});
  for (const auto& c : r.host.tracing)
    table.add_row({c.available ? (*c.available ? "yes" : "no") : "?", printable(c.name), printable(c.detail)});
  std::string out = "tracing: what latency-doctor can trace here\n";
  std::string rendered = table.render(kIndent);
  // The header row of an unnamed table is blank: drop it.
  if (auto nl = rendered.find('\n'); nl != std::string::npos) rendered = rendered.substr(nl + 1);
  return out + rendered;
}

std::string unknown_section(const AuditResult& r) {
  if (r.host.unknown.empty()) return "";
  report::TextTable table(
      {{"fact", report::Align::kLeft}, {"file", report::Align::kLeft}, {"why", report::Align::kLeft}});
  for (const auto& u : r.host.unknown) table.add_row({printable(u.fact), printable(u.path), printable(u.reason)});
  return fmt::format("unknown ({}): could not be read, so not checked\n", r.host.unknown.size()) +
         table.render(kIndent);
}

std::string warnings_section(const AuditResult& r) {
  std::vector<std::string> all = r.host.warnings;
  all.insert(all.end(), r.warnings.begin(), r.warnings.end());
  if (all.empty()) return "";
  std::string out = fmt::format("warnings ({})\n", all.size());
  for (const auto& w : all) out += kIndent + printable(w) + "\n";
  return out;
}

std::string normalise(std::string_view value) {
  std::string out;
  bool blank = false;
  for (char c : value) {
    if (c == ' ' || c == '\t' || c == '\n') {
      blank = !out.empty();
      continue;
    }
    if (blank) out.push_back(' ');
    blank = false;
    out.push_back(c);
  }
  return out;
}

// Comment text on one line: a newline in a rule's text must not end the comment.
std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  return printable(out);
}

}  // namespace

int severity_rank(std::string_view severity) {
  if (severity == "info") return 0;
  if (severity == "warn") return 1;
  if (severity == "crit") return 2;
  return -1;
}

bool has_finding_at_or_above(const std::vector<Finding>& findings, std::string_view severity) {
  int threshold = severity_rank(severity);
  return std::any_of(findings.begin(), findings.end(),
                     [&](const Finding& f) { return severity_rank(f.severity) >= threshold; });
}

std::string render_audit_text(const AuditResult& r) {
  std::string out = header_section(r);
  for (const std::string& section : {findings_section(r), host_section(r), sysctl_section(r), tracing_section(r),
                                     unknown_section(r), warnings_section(r)}) {
    if (!section.empty()) out += "\n" + section;
  }
  return out;
}

std::string render_audit_json(const AuditResult& r) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["schema"] = kAuditSchema;
  j["host"] = nlohmann::ordered_json::parse(host_facts_to_json(r.host.facts).dump());
  j["findings"] = nlohmann::ordered_json::array();
  for (const Finding& f : r.findings) j["findings"].push_back(report::finding_to_json(f));
  // Extensions.
  j["root"] = r.host.root;
  nlohmann::ordered_json target = nlohmann::ordered_json::object();
  if (r.host.target_pid > 0) target["pid"] = r.host.target_pid;
  if (!r.host.target_comm.empty()) target["comm"] = r.host.target_comm;
  if (!r.host.target_cgroup.empty()) target["cgroup"] = r.host.target_cgroup;
  j["target"] = target;
  j["sources"] = r.host.sources;
  j["unknown"] = nlohmann::ordered_json::array();
  for (const auto& u : r.host.unknown)
    j["unknown"].push_back({{"fact", u.fact}, {"path", u.path}, {"reason", u.reason}});
  j["tracing"] = nlohmann::ordered_json::array();
  for (const auto& c : r.host.tracing) {
    nlohmann::ordered_json item = {{"name", c.name}};
    item["available"] = c.available ? nlohmann::ordered_json(*c.available) : nlohmann::ordered_json(nullptr);
    item["detail"] = c.detail;
    j["tracing"].push_back(item);
  }
  std::vector<std::string> warnings = r.host.warnings;
  warnings.insert(warnings.end(), r.warnings.begin(), r.warnings.end());
  j["warnings"] = warnings;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string render_sysctl_file(const AuditResult& r) {
  std::string out =
      "# Kernel settings for lower token latency (TTFT/TPOT), written by `latency-doctor audit`.\n"
      "# Install: cp THIS /etc/sysctl.d/90-latency-doctor.conf && sysctl --system\n";
  out += fmt::format("# Audited: {}", one_line(r.host.root));
  if (fact(r, "host.kernel_release")) out += ", kernel " + one_line(text_of(r, "host.kernel_release"));
  out += ". Read every caveat before applying.\n";
  std::set<std::string> written;
  size_t lines = 0;
  for (const Finding& f : r.findings) {
    bool reason_written = false;  // the finding's reason once, before its first line
    for (const SysctlRec& s : f.sysctl) {
      if (s.key.empty() || written.count(s.key)) continue;
      if (!s.current.empty() && normalise(s.current) == normalise(s.value)) continue;  // already so
      written.insert(s.key);
      if (!reason_written) {
        out += fmt::format("\n# {} [{}, rule {}]\n", one_line(f.title), one_line(f.severity), one_line(f.rule));
        if (!f.evidence.empty()) out += "# " + one_line(f.evidence) + "\n";
        reason_written = true;
      } else {
        out += "# also for: " + one_line(f.title) + "\n";
      }
      if (!s.caveat.empty()) out += "# caveat: " + one_line(s.caveat) + "\n";
      if (s.current.empty()) {
        out += "# not readable on the audited host (this kernel may not have it): uncomment if it does\n";
        out += fmt::format("# {} = {}\n", one_line(s.key), one_line(s.value));
      } else {
        out += fmt::format("# now: {}\n{} = {}\n", one_line(s.current), one_line(s.key), one_line(s.value));
      }
      ++lines;
    }
  }
  if (lines == 0) out += "\n# Nothing to change: no finding recommends a sysctl that differs from this host's value.\n";
  return out;
}

}  // namespace ld::audit
