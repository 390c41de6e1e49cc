// latency-doctor audit: is this host (or image) ready to serve tokens with low latency?
#include <unistd.h>

#include <climits>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "audit/audit.hpp"
#include "cli/common.hpp"

namespace ld::cli {
namespace {

struct AuditOptions {
  std::string root = "/";
  int pid = 0;
  std::string cgroup;
  std::string nginx_conf;
  std::string format = "text";
  std::string fail_on;
  std::vector<std::string> rule_paths;
  std::string output;
};

std::string render_audit(const audit::AuditResult& result, const std::string& format) {
  if (format == "json") return audit::render_audit_json(result);
  if (format == "sysctl") return audit::render_sysctl_file(result);
  return audit::render_audit_text(result);
}

// A relative --nginx-conf means the caller's directory, which only exists on the live host.
std::string nginx_conf_path(const AuditOptions& o) {
  if (o.nginx_conf.empty() || o.nginx_conf[0] == '/') return o.nginx_conf;
  if (o.root != "/" && !o.root.empty())
    throw std::invalid_argument(
        fmt::format("--nginx-conf {}: with --root give the path inside the tree, starting with /", o.nginx_conf));
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof(cwd))) throw std::runtime_error("cannot read the current directory");
  return std::string(cwd) + "/" + o.nginx_conf;
}

int run_audit(const AuditOptions& o) {
  audit::AuditRequest request;
  request.root = o.root;
  request.target = {o.pid, o.cgroup};
  request.nginx_conf = nginx_conf_path(o);
  request.rule_paths = o.rule_paths;
  if (o.pid < 0) throw std::invalid_argument(fmt::format("--pid {}: expected a process id", o.pid));
  auto out = Output::open(o.output);
  auto result = audit::run_audit(request);
  out->write(render_audit(result, o.format));
  // Warnings on stderr too: a sysctl file on stdout must stay clean.
  print_warnings(result.host.warnings);
  print_warnings(result.warnings);
  if (!o.fail_on.empty() && audit::has_finding_at_or_above(result.findings, o.fail_on)) return kExitAuditFinding;
  return kExitOk;
}

}  // namespace

void register_audit(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<AuditOptions>();
  auto* sub =
      app.add_subcommand("audit", "Check a host or image before deployment: kernel, CPU, cgroup, nginx, tracing");
  sub->footer(
      "Reads sysctls, CPU frequency/idle settings, THP, swap, NUMA, the service's cgroup (v1/v2)\n"
      "and open-file limit, the nginx config in front of SSE, and what latency-doctor can trace\n"
      "here. Files that cannot be read are listed as unknown. Needs no root (root sees more).\n\n"
      "Examples:\n"
      "  latency-doctor audit\n"
      "  latency-doctor audit --pid $(pgrep -f vllm) --nginx-conf /etc/nginx/nginx.conf\n"
      "  latency-doctor audit --format sysctl -o 90-latency-doctor.conf\n"
      "  latency-doctor audit --root /mnt/image --fail-on warn    # CI gate for images: exit 3");
  sub->add_option("--root", opts->root, "Audit the tree under DIR (an image, a chroot) instead of /")
      ->type_name("DIR")
      ->capture_default_str();
  auto* pid =
      sub->add_option("-p,--pid", opts->pid, "The service's process: its cgroup and open-file limit")->type_name("PID");
  auto* cgroup = sub->add_option("--cgroup", opts->cgroup,
                                 "The service's cgroup: /system.slice/NAME.service or /sys/fs/cgroup/...")
                     ->type_name("PATH");
  pid->excludes(cgroup);
  sub->add_option("--nginx-conf", opts->nginx_conf,
                  "nginx config to check (default /etc/nginx/nginx.conf; under --root when absolute)")
      ->type_name("PATH");
  sub->add_option("-f,--format", opts->format, "text, json, or sysctl (a ready /etc/sysctl.d/ file)")
      ->check(CLI::IsMember({"text", "json", "sysctl"}))
      ->capture_default_str();
  sub->add_option("--fail-on", opts->fail_on, "Exit 3 when a finding of this severity or worse exists: warn or crit")
      ->check(CLI::IsMember({"warn", "crit"}));
  add_rules_option(sub, opts->rule_paths);
  sub->add_option("-o,--output", opts->output, "Write to FILE (mode 0600)")->type_name("FILE");
  sub->callback([opts, &exit_code] { exit_code = run_command("audit", [&] { return run_audit(*opts); }); });
}

}  // namespace ld::cli
