#!/usr/bin/env python3
"""Summary of a bench/compare.sh run: throughput and CPU per token paired against the none run
of the same round, and the token gaps of all runs of a condition pooled: their quantiles, the
share of gaps past a few thresholds, and the runs whose own p99 is past 2.5 ms (such a run
typically had its two request threads on one CPU for a while: gaps of ~4 ms).

Usage: gap_tail.py RESULTS   (lines "round cond tokens_per_s cpu_ms_per_token token_log")
"""
import statistics
import sys

from tpot_pool import gaps_ms, p99_ratio_interval, percentile  # the bench's TPOT and percentile definitions, one copy


def quantile(values, p):
    return percentile(values, p * 100)


def main():
    runs = {}
    order = []
    for line in open(sys.argv[1]):
        r, cond, tput, cpu, log = line.split()
        if cond not in runs:
            order.append(cond)
        runs.setdefault(cond, {})[r] = (float(tput), float(cpu), sorted(gaps_ms(log)))  # each log read once
    base = runs.get("none", {})
    pooled = {c: sorted(g for (_, _, gaps) in runs[c].values() for g in gaps) for c in order}
    p99_base = quantile(pooled["none"], 0.99) if "none" in pooled else float("nan")
    ths = (2.3, 2.5, 3.0, 4.0)
    print(f"{'condition':34s} {'runs':>4s} {'tok/s':>7s} {'paired':>7s} {'cpu/tok':>8s} "
          f"{'p50':>6s} {'p90':>6s} {'p98':>6s} {'p99':>6s} {'p99 vs none':>11s} "
          + " ".join(f"{'>' + str(t):>6s}" for t in ths) + "  runs p99>2.5")
    for c in order:
        d = runs[c]
        tput = [(d[r][0] / base[r][0] - 1) * 100 for r in d if r in base]
        cpu = [(d[r][1] / base[r][1] - 1) * 100 for r in d if r in base]
        g = pooled[c]
        p99 = quantile(g, 0.99)
        run_p99 = [quantile(gaps, 0.99) for (_, _, gaps) in d.values()]
        print(f"{c:34s} {len(d):4d} {statistics.median(x[0] for x in d.values()):7.1f} "
              f"{statistics.median(tput):+6.2f}% {statistics.median(cpu):+7.2f}% "
              f"{quantile(g, .5):6.3f} {quantile(g, .9):6.3f} {quantile(g, .98):6.3f} {p99:6.3f} "
              f"{(p99 / p99_base - 1) * 100:+10.1f}% "
              + " ".join(f"{sum(1 for x in g if x > t) / len(g) * 100:5.2f}%" for t in ths)
              + f"  {sum(1 for p in run_p99 if p > 2.5)}")
    # The p99 against none over the rounds both ran: a paired bootstrap interval of the pooled
    # p99, and the median of the rounds' own p99 ratios.
    for c in order:
        rounds = sorted(r for r in runs[c] if r in base) if c != "none" else []
        if len(rounds) < 3:
            continue
        b = [base[r][2] for r in rounds]
        o = [runs[c][r][2] for r in rounds]
        lo, hi = p99_ratio_interval(b, o)
        paired = statistics.median(quantile(y, .99) / quantile(x, .99) - 1 for x, y in zip(b, o)) * 100
        print(f"{c}: p99 vs none over {len(rounds)} rounds: 90% interval {lo:+.2f}% to {hi:+.2f}%, "
              f"median of the rounds' ratios {paired:+.2f}%")


if __name__ == "__main__":
    main()
