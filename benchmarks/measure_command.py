"""Run a command and print its wall time and peak memory (largest child RSS) at the end.

Usage: python benchmarks/measure_command.py -- snakemake --cores 2
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    start = time.perf_counter()
    code = subprocess.call(argv)  # noqa: S603 - the user's own command
    wall = time.perf_counter() - start
    # ru_maxrss of RUSAGE_CHILDREN: the peak resident set of the largest waited-for
    # descendant, in KiB on Linux.
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"[measure] {' '.join(argv[:3])}...: wall {wall:.1f} s, peak memory {peak_mib:.0f} MiB "
        f"(largest single process), exit {code}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
