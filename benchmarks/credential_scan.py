"""How long the credential scan (``harness.base.credentials``, behind every masking and the refusal at load)
takes over 1 MB strings, and that its time grows linearly: the old URL-password pattern backtracked (10,000
characters of letters took 3.8 s, a 100,000-character description 222 s in ``rosetta plan``).

Each case is a text of SIZE characters, masked ``--repeats`` times; the table gives the median and the
largest time, and the ratio of the median at 4 x SIZE to the median at SIZE (about 4 for a linear scan, 16
for a quadratic one; smaller sizes than 1 MB fit the processor's caches and make the ratio say more about
them than about the scan). Cases: logs as runs write them (with and without credentials), random printable text,
and adversarial strings built to make a backtracking or per-candidate scan slow (long runs of the
characters the patterns start with, anchors repeated without a match, credentials back to back).
Usage: python benchmarks/credential_scan.py [--size 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import string
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.base import credentials  # noqa: E402


def _log(n: int, every: int) -> str:
    """A rank's log: steps, losses, storage URLs; a line of credentials every ``every`` lines (0: none)."""
    lines, size, i = [], 0, 0
    while size < n:
        lines.append(f"rank 0: step {i} loss=0.{i % 999} lr=0.1 samples/s=123.4 reading s3://bucket/data/part-{i}.tar "
                     f"from https://127.0.0.1:8333/bench?list-type=2&prefix=x{i}\n")
        if every and i % every == 0:
            lines.append(f"AWS_SECRET_ACCESS_KEY=wJalr/K7MD+x{i} s3://AKIA:wJ/a+b{i}@bkt ?sig=abc{i}&se=2030 "
                         f"Authorization: Bearer eyJhbGciOi{i}\n")
        size += sum(len(line) for line in lines[-2:])  # an over-count at most: the text is cut to n
        i += 1
    return "".join(lines)[:n]


CASES = {
    "log, no credential": lambda n: _log(n, 0),
    "log, credentials every 100 lines": lambda n: _log(n, 100),
    "log, credentials every line": lambda n: _log(n, 1),
    "random printable": lambda n: "".join(random.Random(0).choice(string.printable) for _ in range(n)),
    "letters (the old pattern's worst)": lambda n: "a" * n,
    "'://a:' repeated, no @": lambda n: ("://a:" * n)[:n],
    "s3://AKIA: then '/'-runs, no @": lambda n: ("s3://AKIA:" + "wJ/" * n)[:n],
    "'=' repeated": lambda n: "=" * n,
    "'_key' repeated, no =": lambda n: ("_key" * n)[:n],
    "'token=' repeated (all credentials)": lambda n: ("token=" * n)[:n],
    "'&sig=' repeated (all credentials)": lambda n: ("&sig=" * n)[:n],
    "'\"password\":' repeated (all credentials)": lambda n: ('"password":' * n)[:n],
    "'bearer x' repeated (too short)": lambda n: ("bearer x" * n)[:n],
    "authorization: then letters": lambda n: ("authorization: " + "a" * n)[:n],
}


def timed(text: str, repeats: int) -> list[float]:
    """Seconds per ``credentials.mask`` of ``text``, ``repeats`` times."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        credentials.mask(text, "***")
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="characters per text (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1-minute load {load:.1f}; "
          f"{args.size:,} characters, median (max) of {args.repeats}")
    print(f"| case | ms at {args.size:,} (median) | ms (max) | ms at {4 * args.size:,} | ratio |")
    print("|---|---|---|---|---|")
    for name, make in CASES.items():
        one, four = timed(make(args.size), args.repeats), timed(make(4 * args.size), args.repeats)
        ratio = statistics.median(four) / statistics.median(one)
        print(f"| {name} | {statistics.median(one) * 1e3:.1f} | {max(one) * 1e3:.1f} | "
              f"{statistics.median(four) * 1e3:.1f} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
