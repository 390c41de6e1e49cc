// Root-tier helpers for probe tests: run a workload under `latency-doctor record` (or the
// probes in this process, record_in_process), then pick the records by type.
//
// Workloads (tests/workloads/NAME.cpp -> build/ld-wl-NAME) wait for SIGUSR1 before they do
// their work, so the probes are attached first: start the workload, start the recorder, wait
// until it says "attached", send SIGUSR1; the recorder stops when the workload exits.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "events.h"
#include "kernel_util.hpp"
#include "probes/probe_session.hpp"
#include "proc_util.hpp"
#include "trace/trace_file.hpp"
#include "trace/trace_header.hpp"

namespace ld::test {

inline std::string agent_path() { return std::string(LD_BUILD_DIR) + "/latency-doctor"; }
inline std::string workload_path(const std::string& name) { return std::string(LD_BUILD_DIR) + "/ld-wl-" + name; }

// Sends SIGUSR1 once `target` is ready for it (ld::wl::wait_for_go: SIGUSR1 blocked, or the
// thread asleep in sigwait, which unblocks it while waiting): sent earlier, it would kill a
// workload still starting up, and the agent may well be attached before the workload gets to
// main().
inline void release_workload(Child& target) {
  std::string proc = "/proc/" + std::to_string(target.pid());
  unsigned long long usr1 = 1ULL << (SIGUSR1 - 1);
  auto ready = [&] {
    unsigned long long blocked = 0;
    if (FILE* f = std::fopen((proc + "/status").c_str(), "r")) {
      char line[256];
      while (std::fgets(line, sizeof(line), f)) std::sscanf(line, "SigBlk: %llx", &blocked);
      std::fclose(f);
    }
    long nr = -1;
    if (FILE* f = std::fopen((proc + "/syscall").c_str(), "r")) {
      if (std::fscanf(f, "%ld", &nr) != 1) nr = -1;
      std::fclose(f);
    }
    return (blocked & usr1) != 0 || nr == SYS_rt_sigtimedwait;
  };
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until && !target.wait(std::chrono::milliseconds(0)) && !ready())
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  target.signal(SIGUSR1);
}

struct Recorded {
  nlohmann::json header;
  nlohmann::json trailer;
  std::vector<std::vector<uint64_t>> records;  // 8-aligned copies
  std::string agent_err;
  int agent_exit = -1;

  // Every record of `type`, as T (records shorter than T are skipped).
  template <typename T>
  std::vector<T> of_type(uint16_t type) const {
    std::vector<T> out;
    for (const auto& r : records) {
      const auto* h = reinterpret_cast<const ld_hdr*>(r.data());
      if (h->type != type || h->size < sizeof(T)) continue;
      T value;
      std::memcpy(&value, r.data(), sizeof(T));
      out.push_back(value);
    }
    return out;
  }
  // The trailer's status object of probe `name` (null when absent).
  nlohmann::json probe(const std::string& name) const {
    for (const auto& p : trailer.value("probes", nlohmann::json::array()))
      if (p.value("name", "") == name) return p;
    return nullptr;
  }
};

// Records `target` (already started, waiting for SIGUSR1) with --probes `probes`, releases it,
// and waits for it to exit (or `limit`). extra_args go to `record`.
inline Recorded record_workload(Child& target, const std::string& probes,
                                std::chrono::milliseconds limit = std::chrono::seconds(60),
                                std::vector<std::string> extra_args = {}) {
  using namespace std::chrono_literals;
  Recorded out;
  std::string trace = "/tmp/ld-probe-" + std::to_string(getpid()) + "-" + std::to_string(target.pid()) + ".ldtrace";
  std::vector<std::string> argv{agent_path(), "record", "--pid",      std::to_string(target.pid()),
                                "--probes",   probes,   "--duration", "5m",
                                "-o",         trace};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  Child agent(argv);
  auto until = std::chrono::steady_clock::now() + 30s;
  while (agent.err().find("attached to pid") == std::string::npos && std::chrono::steady_clock::now() < until &&
         !agent.wait(0ms))
    std::this_thread::sleep_for(20ms);
  release_workload(target);
  if (!target.wait(limit)) target.signal(SIGKILL);
  auto code = agent.wait(30s);
  if (!code) {
    agent.signal(SIGINT);
    code = agent.wait(30s);
  }
  out.agent_exit = code.value_or(-1);
  out.agent_err = agent.err();
  try {
    auto summary = trace::read_trace(trace, [&](const ld_hdr& rec) {
      std::vector<uint64_t> copy((rec.size + 7) / 8);
      std::memcpy(copy.data(), &rec, rec.size);
      out.records.push_back(std::move(copy));
    });
    out.header = summary.header;
    out.trailer = summary.trailer;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cannot read the trace: " << e.what() << "\n" << out.agent_err;
  }
  unlink(trace.c_str());
  return out;
}

// The same as record_workload, with the probes of `options` in this process (a ProbeSession,
// not the `record` binary): for what only ProbeOptions can ask, such as a kernel hook forced
// (options.hooks) or, in this test build, an injected fault (options.faults). Records until
// `target` exits (or `limit`); the trailer holds the probes' statuses as record's does.
inline Recorded record_in_process(Child& target, probes::ProbeOptions options,
                                  std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  using namespace std::chrono_literals;
  Recorded out;
  probes::ensure_tracefs();
  options.tgids = {uint32_t(target.pid())};
  try {
    probes::ProbeSession session(options, [&](const ld_hdr& rec, size_t size) {
      std::vector<uint64_t> copy((size + 7) / 8);
      std::memcpy(copy.data(), &rec, size);
      out.records.push_back(std::move(copy));
    });
    release_workload(target);
    auto until = std::chrono::steady_clock::now() + limit;
    while (!target.wait(0ms) && std::chrono::steady_clock::now() < until) session.poll(50);
    if (!target.wait(0ms)) {
      target.signal(SIGKILL);
      target.wait(10s);
    }
    session.finish();
    trace::TraceTrailer trailer;  // the probes' statuses as the agent writes them
    trailer.probes = session.status();
    out.trailer = trace::to_json(trailer);
    out.agent_exit = 0;
  } catch (const std::exception& e) {
    out.agent_err = e.what();
    out.agent_exit = 2;
  }
  return out;
}

// "key value" lines of a workload's stdout (workloads print their tids and timings so).
inline std::map<std::string, uint64_t> parse_fields(const std::string& out) {
  std::map<std::string, uint64_t> fields;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    char key[64];
    unsigned long long value;
    int used = 0;
    if (std::sscanf(line.c_str(), "%63s %llu%n", key, &value, &used) == 2 && line[used] == 0) fields[key] = value;
  }
  return fields;
}

// Symbolised frames of every ld_kstack record of `source` (a probe id), by stack id.
inline std::map<int64_t, std::vector<std::string>> kstacks(const Recorded& rec, uint32_t source) {
  std::map<int64_t, std::vector<std::string>> out;
  for (const auto& r : rec.records) {
    const auto* k = reinterpret_cast<const ld_kstack*>(r.data());
    if (k->hdr.type != LD_EV_KSTACK || k->hdr.size < sizeof(ld_kstack) || k->source != source) continue;
    if (k->hdr.size < sizeof(ld_kstack) + size_t(k->depth) * LD_SYM_LEN) continue;
    const char* frames = reinterpret_cast<const char*>(r.data()) + sizeof(ld_kstack);
    std::vector<std::string> names;
    for (uint32_t i = 0; i < k->depth; ++i)
      names.emplace_back(frames + i * LD_SYM_LEN, strnlen(frames + i * LD_SYM_LEN, LD_SYM_LEN));
    out[k->stack_id] = std::move(names);
  }
  return out;
}

}  // namespace ld::test
