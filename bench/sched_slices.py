#!/usr/bin/env python3
"""Who delayed the server's tokens, from the scheduler traces of `TRACE=1 bench/compare.sh`.

For each condition of the run (OUT/results), over its runs' traces (OUT/trace_R_I.txt.gz):
- the agent's on-CPU stretches (its threads: OUT/agenttids_R_I), by length, and how many
  began while a server thread was runnable on that CPU: such a stretch delays that thread's
  token by its length, and on the (a) load a token delayed by more than ~0.15 ms lands
  past the TPOT p99;
- the server threads' preemptions (switched out runnable, until back on a CPU), by length,
  with what ran on that CPU meanwhile (by comm; the agent's threads, whose comm is the bench
  client's "latency-doctor", as "agent");
- the bench client's waits for a CPU (woken or preempted, until on a CPU), by length, with
  what ran on that CPU just before it: its token timestamps are taken when it runs, so a
  late client makes a long gap as surely as a late server.

Usage: sched_slices.py OUT
"""
import collections
import gzip
import os
import re
import sys

LINE = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: (.*)')
SWITCH = re.compile(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> '
                    r'next_comm=(.*) next_pid=(\d+)')
CLASSES_US = [0, 20, 50, 100, 200, 500, 1000, 10**9]
SERVER_COMM = os.environ.get('SERVER_COMM', 'ld-sample-serv')  # ld-sample-server, cut to 15 characters by the kernel; llama-server for llama.cpp


WAKEUP = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_wakeup(?:_new)?: '
                    r'comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)')
CLIENT_COMM = 'latency-doctor'  # `latency-doctor bench`; the agent's threads are told apart by tid


def client_waits(events, agent_tids):
    """Counter(class -> waits), Counter(class -> ns), Counter((class, comm before) -> ns)."""
    waits, waits_ns, before = collections.Counter(), collections.Counter(), collections.Counter()
    since = {}      # client tid -> ts_ns it became runnable
    running = set()  # client tids on a CPU (a wake-up of a running task is traced too)
    for e in events:
        if e[0] == 'wakeup':
            _, ts, comm, tid = e
            if comm.startswith(CLIENT_COMM) and tid not in agent_tids and tid not in running:
                since.setdefault(tid, ts)
            continue
        _, _, ts, pcomm, ppid, pstate, ncomm, npid = e
        running.discard(ppid)
        since.pop(ppid, None)
        if pcomm.startswith(CLIENT_COMM) and ppid not in agent_tids and pstate.startswith('R'):
            since[ppid] = ts
        if ncomm.startswith(CLIENT_COMM) and npid not in agent_tids:
            running.add(npid)
        if npid in since:
            ns = ts - since.pop(npid)
            k = length_class(ns)
            waits[k] += 1
            waits_ns[k] += ns
            before[(k, 'agent' if ppid in agent_tids else pcomm)] += ns
    return waits, waits_ns, before


def trace_events(path):
    """In trace order: ('switch', cpu, ts_ns, prev_comm, prev_pid, prev_state, next_comm,
    next_pid) per sched_switch and ('wakeup', ts_ns, comm, pid) per sched_wakeup(_new)."""
    with gzip.open(path, 'rt', errors='replace') as f:
        for line in f:
            w = WAKEUP.match(line)
            if w:
                yield ('wakeup', int(round(float(w.group(4)) * 1e9)), w.group(5), int(w.group(6)))
                continue
            m = LINE.match(line)
            s = SWITCH.match(m.group(5)) if m else None
            if s:
                yield ('switch', int(m.group(3)), int(round(float(m.group(4)) * 1e9)), s.group(1),
                       int(s.group(2)), s.group(3), s.group(4), int(s.group(5)))


def length_class(ns):
    us = ns / 1000
    return max(i for i, c in enumerate(CLASSES_US) if us >= c)


def label(k):
    hi = CLASSES_US[k + 1]
    return f"{CLASSES_US[k]}-{hi} us" if hi < 10**9 else f">= {CLASSES_US[k]} us"


def analyse(events, agent_tids):
    agent = collections.Counter()      # class -> stretches
    agent_delaying = collections.Counter()
    agent_ns = 0
    preempt = collections.Counter()    # class -> count
    preempt_ns = collections.Counter()
    by_comm = collections.Counter()    # (class, comm) -> ns
    waiting = {}      # server pid -> (since_ns, cpu)
    stolen = {}       # server pid -> Counter(comm -> ns)
    on_cpu = {}       # cpu -> (since_ns, comm, pid)
    agent_since = {}  # cpu -> (since_ns, a server thread waited)
    for _, cpu, ts, pcomm, ppid, pstate, ncomm, npid in (e for e in events if e[0] == 'switch'):
        if cpu in on_cpu:
            since, comm, _ = on_cpu[cpu]
            for pid, (t0, wcpu) in waiting.items():
                if wcpu == cpu:
                    stolen[pid][comm] += ts - max(since, t0)
        # The agent's threads share the bench client's comm: name them apart.
        on_cpu[cpu] = (ts, 'agent' if npid in agent_tids else ncomm, npid)
        if ppid in agent_tids and cpu in agent_since:
            t0, delaying = agent_since.pop(cpu)
            k = length_class(ts - t0)
            agent[k] += 1
            agent_delaying[k] += delaying
            agent_ns += ts - t0
        if pcomm.startswith(SERVER_COMM) and pstate.startswith('R'):
            waiting[ppid] = (ts, cpu)
            stolen[ppid] = collections.Counter()
        if npid in waiting:
            t0, _ = waiting.pop(npid)
            k = length_class(ts - t0)
            preempt[k] += 1
            preempt_ns[k] += ts - t0
            for comm, ns in stolen.pop(npid).items():
                by_comm[(k, comm)] += ns
        if npid in agent_tids:
            agent_since[cpu] = (ts, any(w == cpu for (_, w) in waiting.values()))
    return agent, agent_delaying, agent_ns, preempt, preempt_ns, by_comm


def main():
    out = sys.argv[1]
    conds = collections.OrderedDict()  # name -> [(round, index)]
    for line in open(os.path.join(out, 'results')):
        r, cond, _, _, log = line.split()
        index = os.path.basename(log)[len('tok_'):-len('.jsonl')].split('_')[1]
        conds.setdefault(cond, []).append((r, index))
    for cond, runs in conds.items():
        totals = [collections.Counter() for _ in range(8)]
        agent_ns = 0
        n = 0
        for r, i in runs:
            trace = os.path.join(out, f'trace_{r}_{i}.txt.gz')
            if not os.path.exists(trace):
                continue
            tids_file = os.path.join(out, f'agenttids_{r}_{i}')
            tids = {int(t) for t in open(tids_file).read().split()} if os.path.exists(tids_file) else set()
            events = list(trace_events(trace))  # each trace read once
            a, ad, ans, p, pns, bc = analyse(events, tids)
            for acc, c in zip(totals, (a, ad, p, pns, bc) + client_waits(events, tids)):
                acc.update(c)
            agent_ns += ans
            n += 1
        if not n:
            continue
        a, ad, p, pns, bc, cw, cwns, cwb = totals
        print(f"{cond}: {n} traced runs")
        if a:
            print(f"  agent on CPU {agent_ns / n / 1e6:.2f} ms per run, stretches by length "
                  "(per run; of them begun while a server thread waited on that CPU):")
            for k in sorted(a):
                print(f"    {label(k):>12s}: {a[k] / n:6.1f} ({ad[k] / n:.1f})")
        print("  server threads preempted, by length (per run, ms per run; top CPU takers meanwhile):")
        for k in sorted(p):
            who = sorted(((ns, comm) for (kk, comm), ns in bc.items() if kk == k), reverse=True)[:4]
            print(f"    {label(k):>12s}: {p[k] / n:7.1f} {pns[k] / n / 1e6:6.2f} ms; "
                  + ", ".join(f"{comm} {ns / n / 1e6:.2f}" for ns, comm in who))
        print("  bench client's waits for a CPU, by length (per run, ms per run; what ran there before it):")
        for k in sorted(cw):
            who = sorted(((ns, comm) for (kk, comm), ns in cwb.items() if kk == k), reverse=True)[:4]
            print(f"    {label(k):>12s}: {cw[k] / n:7.1f} {cwns[k] / n / 1e6:6.2f} ms; "
                  + ", ".join(f"{comm} {ns / n / 1e6:.2f}" for ns, comm in who))


if __name__ == '__main__':
    main()
