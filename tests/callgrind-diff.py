#!/usr/bin/env python3
"""What N episodes cost, function by function: two callgrind profiles of the
same daemon, one over N episodes and one over an idle window as long (both
from start to stop), subtracted and divided by N.

    python3 tests/callgrind-diff.py EPISODES.out IDLE.out N [self|inclusive]

Prints the total per episode, then the functions whose cost per episode is
largest (self cost by default: where the instructions are executed;
`inclusive` adds their callees). Reads callgrind_annotate's output, so it
needs valgrind's tools on the host.
"""
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(\S.*)$")


def costs(path, inclusive):
    out = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
         "--threshold=100", path],
        check=True, capture_output=True, text=True).stdout
    total, by_fn = 0, {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        n, name = int(m.group(1).replace(",", "")), m.group(2)
        if name.startswith("PROGRAM TOTALS"):
            total = n
            continue
        # "???:function [object]": the function, without the object.
        name = re.sub(r"^\?\?\?:", "", name)
        name = re.sub(r" \[[^\]]*\]$", "", name)
        by_fn[name] = by_fn.get(name, 0) + n
    return total, by_fn


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    eps, idle, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    inclusive = len(sys.argv) > 4 and sys.argv[4] == "inclusive"
    te, fe = costs(eps, inclusive)
    ti, fi = costs(idle, inclusive)
    print(f"per episode: {(te - ti) / n:,.0f} instructions "
          f"({'inclusive' if inclusive else 'self'} cost by function below)")
    rows = sorted(((fe.get(k, 0) - fi.get(k, 0)) / n, k) for k in set(fe) | set(fi))
    rows.reverse()
    for d, k in rows:
        if abs(d) < 500:
            continue
        print(f"{d:>10,.0f}  {k[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
