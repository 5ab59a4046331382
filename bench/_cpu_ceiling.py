"""What two processes can gain over one on this machine, whatever the studio does: the ceiling of
a "2 workers / 1 worker" figure (``bench/experiments.py``, ``bench/scale.py``).

Two CPUs are not always two times one CPU: a virtual machine's two vCPUs can share a physical
core, its caches or its memory bandwidth with each other and with other guests. Measured here on
2026-12-06 (this 2-CPU machine, quiet): a pure-Python loop in two processes ran 1.56–1.84× the
same work in one. A benchmark prints this beside its own ratio, measured in the same run.
"""
from __future__ import annotations

import multiprocessing
import statistics
import time


def _spin(n: int) -> int:
    """CPU-bound pure Python with no memory traffic to speak of: ``n`` multiply-and-modulo steps."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def two_processes_over_one(n: int = 6_000_000, rounds: int = 3) -> tuple[float, list[float]]:
    """``(median, each round's ratio)`` of one process doing ``2 n`` steps of :func:`_spin` over two
    processes (forked) doing ``n`` each at once, over ``rounds`` rounds. About ``1.2 × rounds``
    seconds at the default ``n`` on a 2-CPU machine. 2.0 is the ideal; a figure near 1 means the two
    CPUs are not there (a loaded machine, a one-CPU quota)."""
    ctx = multiprocessing.get_context("fork")
    ratios = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        _spin(2 * n)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        procs = [ctx.Process(target=_spin, args=(n,)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        two = time.perf_counter() - t0
        ratios.append(one / two)
    return statistics.median(ratios), ratios


#: the figure's name in a benchmark's table, after the benchmark's own prefix
FIGURE = "this machine's ceiling for 2 at once: two CPU-bound Python processes / one (same run, bench/_cpu_ceiling.py)"


def bench_line(prefix: str, ceiling: float, rounds: list[float]) -> str:
    """The ``BENCH`` line (an info row) of a ceiling measured by :func:`two_processes_over_one`,
    under ``prefix`` (the benchmark's name: ``"scale"``)."""
    return f"BENCH\t{prefix}: {FIGURE}\t{ceiling:.2f}× (rounds {', '.join(f'{x:.2f}' for x in rounds)})\t—\tinfo"
