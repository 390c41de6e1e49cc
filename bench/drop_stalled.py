#!/usr/bin/env python3
"""Drops the stalled rounds of a compare.sh results file (docs/performance.md, "The p99"): a
round any of whose runs has more than 100 gaps past 4 ms goes, for every condition alike.
Writes RESULTS.kept and prints the rounds dropped; then: python3 bench/gap_tail.py RESULTS.kept

Usage: python3 bench/drop_stalled.py OUT/results
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tpot_pool import gaps_ms  # noqa: E402

STALLED_GAPS = 100  # gaps past 4 ms in one run (a normal run has ~15)


def main(path):
    rows = [line.split() for line in open(path)]
    bad = {r[0] for r in rows if sum(g > 4 for g in gaps_ms(r[4])) > STALLED_GAPS}
    with open(path + ".kept", "w") as out:
        out.writelines(" ".join(r) + "\n" for r in rows if r[0] not in bad)
    print("rounds dropped:", sorted(bad, key=int))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
