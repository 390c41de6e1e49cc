#!/usr/bin/env python3
"""Drops the stalled rounds of a compare.sh results file (docs/performance.md, "The p99"), for
every condition alike. By default a round goes when any of its runs has more than 100 gaps past
4 ms (the sample server's rule: a normal run has ~15). With --max-steal-ms N a round goes when
any of its runs lost more than N ms to the hypervisor (OUT/steal, both CPUs): the rule for
llama-server, whose every gap is past 4 ms on a slow host, and whose p99 follows the steal.
Writes RESULTS.kept and prints the rounds dropped; then: python3 bench/gap_tail.py RESULTS.kept

Usage: python3 bench/drop_stalled.py OUT/results [--max-steal-ms N]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tpot_pool import gaps_ms  # noqa: E402

STALLED_GAPS = 100  # gaps past 4 ms in one run (a normal run has ~15)


def stolen_rounds(steal_path, max_ms):
    """Rounds with a run over max_ms of steal ("round condition ms" lines)."""
    bad = set()
    for line in open(steal_path):
        parts = line.split()
        if len(parts) == 3 and float(parts[2]) > max_ms:
            bad.add(parts[0])
    return bad


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--max-steal-ms"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = argv[1]
    rows = [line.split() for line in open(path)]
    if len(argv) == 4:
        bad = stolen_rounds(os.path.join(os.path.dirname(path), "steal"), float(argv[3]))
    else:
        bad = {r[0] for r in rows if sum(g > 4 for g in gaps_ms(r[4])) > STALLED_GAPS}
    with open(path + ".kept", "w") as out:
        out.writelines(" ".join(r) + "\n" for r in rows if r[0] not in bad)
    print(f"rounds dropped ({len(bad)}):", sorted(bad, key=int))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
