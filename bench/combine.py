#!/usr/bin/env python3
"""Combines several runs' estimates of one cost (e.g. the TPOT p99 cost of bench/compare.sh
or bench/run.sh) into one, with the runs' disagreement counted: a DerSimonian-Laird
random-effects mean. Each run gives its estimate and its 90% interval (as printed by
bench/tpot_pool.py); the interval's width gives the run's standard error. The host's load moves
between runs, so runs of the same code differ by more than their own intervals allow; a plain
(fixed-effect) mean would ignore that and claim too narrow an interval.

Usage: bench/combine.py LABEL=EST,LO,HI ...   (percent), e.g.
       bench/combine.py 80r=1.8,1.04,2.91 35r=0.6,0.01,1.43
"""
import math
import sys

Z90 = 1.6449


def parse(arg):
    label, _, nums = arg.partition("=")
    est, lo, hi = (float(x) for x in nums.split(","))
    if not lo <= est <= hi or hi == lo:
        raise ValueError(f"{arg}: want EST,LO,HI with LO <= EST <= HI and LO < HI")
    return label, est, (hi - lo) / (2 * Z90)


def main(args):
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        runs = [parse(a) for a in args]
    except ValueError as e:
        print(f"combine.py: {e}", file=sys.stderr)
        return 2
    def weighted_mean(weights):
        return sum(wi * est for wi, (_, est, _) in zip(weights, runs)) / sum(weights)

    w = [1 / se**2 for _, _, se in runs]
    fixed = weighted_mean(w)
    q = sum(wi * (est - fixed) ** 2 for wi, (_, est, _) in zip(w, runs))
    df = len(runs) - 1
    tau2 = max(0.0, (q - df) / (sum(w) - sum(wi * wi for wi in w) / sum(w)))
    wr = [1 / (se**2 + tau2) for _, _, se in runs]
    mean = weighted_mean(wr)
    se = 1 / math.sqrt(sum(wr))
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    for label, est, run_se in runs:
        print(f"  {label:12s} {est:+.2f}%  (standard error {run_se:.2f})")
    print(f"fixed-effect mean {fixed:+.2f}% (90% interval {fixed - Z90 / math.sqrt(sum(w)):+.2f}% "
          f"to {fixed + Z90 / math.sqrt(sum(w)):+.2f}%)")
    print(f"random-effects mean {mean:+.2f}% (90% interval {mean - Z90 * se:+.2f}% to "
          f"{mean + Z90 * se:+.2f}%); between runs: tau {math.sqrt(tau2):.2f}, I^2 {100 * i2:.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
