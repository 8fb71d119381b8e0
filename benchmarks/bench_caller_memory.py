"""Benchmark: the analysing process's memory over many distinct compiles.

    .venv/bin/python benchmarks/bench_caller_memory.py [N]

One process (the caller: a notebook's kernel, a script) analyses N (default 200) distinct user
functions, each a small MLP step at its own width, so no cache answers; the compiles run in the
explorer's worker, as always. Prints the caller's resident memory (VmRSS) before the first
analyse (after `import explorer` and jax), after the first, after 50 (past the explorer's
report caches' 32: what a session settles at) and every 50 after, with the entries jax's
tracing caches hold, and the growth per compile between the 50th and the last: what a long
session pays per edit. The worker's memory is the worker's (docs/reliability.md).
"""

from __future__ import annotations

import gc
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    import jax
    import jax.numpy as jnp

    import explorer
    from explorer._src.compile.jax_private import traced_cache_entries

    def step(w1, w2, x):
        h = jax.nn.gelu(x @ w1)
        return jnp.mean((h @ w2) ** 2)

    S = jax.ShapeDtypeStruct
    start = rss_mb()
    print(f"after import: {start:.1f} MB", flush=True)
    marks: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        width = 128 + 8 * i              # distinct shapes: no cache answers
        report = explorer.analyze(step, S((256, width), jnp.float32),
                                  S((width, 256), jnp.float32), S((64, 256), jnp.float32),
                                  mesh="data=2,model=4", use_cache=False,
                                  specs={"w1": "None,model", "w2": "model,None",
                                         "x": "data,None"})
        assert report is not None and report.collectives
        if i in (1, 50) or i % 50 == 0 or i == n:
            gc.collect()
            marks.append((i, rss_mb()))
            print(f"after {i:4d} compiles: {marks[-1][1]:.1f} MB, jax's caches "
                  f"{traced_cache_entries()} entries ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    settled = [(i, m) for i, m in marks if i >= min(50, n)]
    (i0, m0), (i1, m1) = settled[0], marks[-1]
    per = (m1 - m0) / (i1 - i0) if i1 > i0 else float("nan")
    print(f"\n| caller | after import | after 1 | after {i0} | after {i1} | "
          f"per compile after {i0} |")
    print("|---|---|---|---|---|---|")
    print(f"| {n} distinct MLP steps, 8 CPU devices | {start:.0f} MB | {marks[0][1]:.0f} MB | "
          f"{m0:.0f} MB | {m1:.0f} MB | {per * 1000:.0f} kB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
