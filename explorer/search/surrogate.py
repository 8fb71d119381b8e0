"""Which candidate to compile next: a cheap model of the step time, learnt from the candidates
compiled so far.

The bounds (explorer.search.bounds) decide what may be skipped; they do not say which of the
candidates left is likely best, and on a small model they prune little. The order does matter
as soon as the search is cut short by its budget, and it decides how soon the bounds can prune.
So every candidate is described by where each of its tensors lives (one feature per tensor and
Tiling, plus one per mesh shape: the same layout facts the equivalence check uses) and by three
numbers read from its shard shapes, standardised: log bytes per device of its inputs, log of the
number of devices its specs split work over, and log bytes per device of its constrained
activations. A ridge regression of log(predicted seconds) on those features, refitted after each
compile, predicts the candidates not yet compiled. The next compile is the lowest prediction.
Memory per device gets the same model, and candidates predicted not to fit the chip go last.

This is an additive model of the step time in the placement of each tensor, which is how the
costs arise (each collective moves one tensor for one layout conflict), but it is only an order:
it never skips a candidate, so a search that runs to completion is exact whatever it predicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from explorer.search.space import Point

RIDGE = 1.0       # keeps the fit defined with fewer compiles than features


# Weight of the standardised shard-shape numbers against the one-hot layout features, and the
# ridge above: chosen on three exhaustive searches of transformer_train (docs/performance.md),
# where scales 1 to 2 with ridge 0.01 to 1 all found the optimum within 17 compiles of about 150
# (this setting: 3, 12 and 14), and larger scales overfit the numbers (56 on one).
NUMERIC_SCALE = 2.0


def shape_numbers(p: Point) -> tuple[float, float, float]:
    """log input bytes per device, log devices the work is split over, log constrained
    activation bytes per device."""
    inputs = sum(p.shard_bytes.values())
    split = math.prod(p.layout.mesh.size(a) for a in p.axes_used)
    return math.log(inputs + 1), math.log(split), math.log(p.point_bytes + 1)


class Surrogate:
    def __init__(self, points: Sequence[Point]):
        columns: dict[tuple, int] = {}
        rows = []
        for p in points:
            feats = [("mesh", p.layout.mesh.sizes)] + [(i, t) for i, t in enumerate(p.key)]
            rows.append([columns.setdefault(f, len(columns)) for f in feats])
        onehot = np.zeros((len(points), len(columns)))
        for r, cols in enumerate(rows):
            onehot[r, cols] = 1.0
        numbers = np.array([shape_numbers(p) for p in points], dtype=float).reshape(-1, 3)
        numbers = (numbers - numbers.mean(0)) / (numbers.std(0) + 1e-9) * NUMERIC_SCALE
        self.x = np.concatenate([onehot, numbers, np.ones((len(points), 1))], axis=1)
        self.position = {p.index: r for r, p in enumerate(points)}

    def _fit(self, indices: Sequence[int], values: Sequence[float]) -> np.ndarray | None:
        if not indices:
            return None
        x = self.x[[self.position[i] for i in indices]]
        y = np.log(np.maximum(np.asarray(values, dtype=float), 1e-30))
        # Ridge in its dual form: the features outnumber the compiles early on.
        gram = x @ x.T + RIDGE * np.eye(len(indices))
        alpha = np.linalg.solve(gram, y - y.mean())
        return _weights(x, alpha, y.mean())

    def predict(self, indices: Sequence[int], seconds: Sequence[float],
                memory: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray | None]:
        """Predicted log seconds (and log memory, when `memory` is given) of every point, from
        the compiled `indices` and their results."""
        w = self._fit(indices, seconds)
        t = self.x @ w if w is not None else np.zeros(len(self.x))
        m = None
        if memory:
            wm = self._fit(indices, memory)
            m = self.x @ wm if wm is not None else None
        return t, m

    def row(self, index: int) -> int:
        return self.position[index]


def _weights(x: np.ndarray, alpha: np.ndarray, mean: float) -> np.ndarray:
    w = x.T @ alpha
    w[-1] += mean                   # the intercept column carries the mean
    return w


def fits(log_memory: float | None, capacity: float | None) -> bool:
    return capacity is None or log_memory is None or log_memory <= math.log(capacity)
