"""Which candidate to compile next: a cheap model of the step time, learnt from the candidates
compiled so far.

The bounds (explorer._src.layout_search.bounds) decide what may be skipped; they do not say which of
the candidates left is likely best, and on a small model they prune little. The order does matter
as soon as the search is cut short by its budget or its patience, and it decides how soon the
bounds can prune. So the search compiles, after the reference:

1. one candidate on every other mesh shape, the one with the lowest time bound there (the mesh
   shape changes the step time more than anything else, and a model that has seen one shape
   cannot say anything about another);
2. then the lowest prediction of a ridge regression of log(predicted step) on where each tensor
   lives: one feature per (input or constraint point, Tiling) and one per mesh shape, the same
   layout facts the equivalence check uses, refitted after every compile. The costs of a
   sharded program come from its tensors' layouts (each collective moves one tensor for one
   layout conflict), so an additive model in them ranks well after a few compiles. Memory per
   device gets the same model, and candidates predicted not to fit the chip go last.

On three exhaustive searches of transformer_train (about 150 candidates each; docs/
performance.md) this order reached the optimum after 7, 12 and 13 compiles, for any ridge from
0.01 to 1 and either tie-break; richer features (shard-shape numbers) did better on some spaces
and far worse on others. It is only an order: it never skips a candidate, so a search that runs
to the end is exact whatever it predicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from explorer._src.layout_search.space import SearchPoint

RIDGE = 1.0       # keeps the fit defined with fewer compiles than features


class Surrogate:
    def __init__(self, points: Sequence[SearchPoint]):
        columns: dict[tuple, int] = {}
        rows = []
        for p in points:
            feats = [("mesh", p.layout.mesh.sizes)] + [(i, t) for i, t in enumerate(p.key)]
            rows.append([columns.setdefault(f, len(columns)) for f in feats])
        self.x = np.zeros((len(points), len(columns) + 1))
        self.x[:, -1] = 1.0                                 # intercept
        for r, cols in enumerate(rows):
            self.x[r, cols] = 1.0
        self.position = {p.index: r for r, p in enumerate(points)}

    def _fit(self, indices: Sequence[int], values: Sequence[float]) -> np.ndarray:
        x = self.x[[self.position[i] for i in indices]]
        y = np.log(np.maximum(np.asarray(values, dtype=float), 1e-30))
        # Ridge in its dual form: the features outnumber the compiles.
        alpha = np.linalg.solve(x @ x.T + RIDGE * np.eye(len(indices)), y - y.mean())
        w = x.T @ alpha
        w[-1] += y.mean()               # the intercept column carries the mean
        return w

    def predict(self, indices: Sequence[int], seconds: Sequence[float],
                memory: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray | None]:
        """Predicted log seconds (and log memory, when `memory` is given) of every point, from
        the compiled `indices` and their results."""
        t = self.x @ self._fit(indices, seconds)
        m = self.x @ self._fit(indices, memory) if len(memory) else None
        return t, m

    def row(self, index: int) -> int:
        return self.position[index]


def fits(log_memory: float | None, capacity: float | None) -> bool:
    return capacity is None or log_memory is None or log_memory <= math.log(capacity)
