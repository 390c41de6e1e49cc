#!/usr/bin/env python3
"""TPOT percentiles pooled over the runs of one benchmark condition (bench/run.sh (a), (b)).

A run of 60 requests x 100 tokens has ~5,900 gaps: its p99 is about the 59th largest, and on
a shared VM it moves by +-15% from one run to the next with the same code. Pooling the
gaps of all runs of a condition estimates the same quantile from N times the samples. The
interval is a paired bootstrap over runs (whole runs resampled with replacement, the same
indices for both conditions, so that drift of the host between pairs stays paired).

Usage: tpot_pool.py BASE_LOGS WITH_LOGS   (each a comma-separated list of --tokens-out files,
       in pair order). Prints "key value" lines.
"""
import json
import random
import sys


def gaps_ms(path):
    """Gaps between consecutive tokens of each request, in ms (bench's TPOT definition)."""
    tokens = {}
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "token":
                tokens.setdefault(e["request"], []).append(e["t_ns"])
    out = []
    for ts in tokens.values():
        ts.sort()
        out.extend((b - a) / 1e6 for a, b in zip(ts, ts[1:]))
    return out


def percentile(values, p):
    """Linear interpolation between closest ranks (analysis::percentile's definition)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    base = [gaps_ms(p) for p in sys.argv[1].split(",") if p]
    other = [gaps_ms(p) for p in sys.argv[2].split(",") if p]
    pooled_base = [g for run in base for g in run]
    pooled_other = [g for run in other for g in run]
    p99_base, p99_other = percentile(pooled_base, 99), percentile(pooled_other, 99)
    print("base_gaps", len(pooled_base))
    print("other_gaps", len(pooled_other))
    print("base_p50_ms %.4f" % percentile(pooled_base, 50))
    print("other_p50_ms %.4f" % percentile(pooled_other, 50))
    print("base_p99_ms %.4f" % p99_base)
    print("other_p99_ms %.4f" % p99_other)
    print("p99_ratio_pct %+.2f" % ((p99_other / p99_base - 1) * 100))
    interval = p99_ratio_interval(base, other)
    if interval:
        print("p99_ratio_90ci_pct %+.2f %+.2f" % interval)


def p99_ratio_interval(base, other, rounds=400):
    """90% paired bootstrap interval of the pooled p99's change in % (other vs base), over
    runs given as lists of gaps in pair order; None with fewer than 3 pairs."""
    pairs = min(len(base), len(other))
    if pairs < 3:
        return None
    rng = random.Random(1)  # a fixed seed: the same logs give the same interval
    ratios = []
    for _ in range(rounds):
        idx = [rng.randrange(pairs) for _ in range(pairs)]
        b = percentile([g for i in idx for g in base[i]], 99)
        o = percentile([g for i in idx for g in other[i]], 99)
        ratios.append((o / b - 1) * 100)
    ratios.sort()
    return ratios[int(0.05 * len(ratios))], ratios[int(0.95 * len(ratios)) - 1]


if __name__ == "__main__":
    main()
