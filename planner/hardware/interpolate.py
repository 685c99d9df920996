"""Interpolation of log efficiency against log-shape features (planner/hardware/profile.py fits one per op kind):
multilinear on a grid, linear on a Delaunay mesh or inverse-distance weighted for scattered points, piecewise
linear in log bytes for memory-bound kernels, with the lower envelope of their time."""

from __future__ import annotations

import bisect
import itertools
import math

import numpy as np
from scipy.interpolate import LinearNDInterpolator


class IDW:
    """Inverse-distance weighting of the k nearest points (features standardized)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, k: int = 4):
        std = x.std(axis=0)
        self.scale = np.where(std > 0, std, 1.0)
        self.x, self.y, self.k = x / self.scale, y, min(k, len(y))
        # the standardized features by column: a query's squared distance accumulates one feature at a
        # time over arrays of n values (72 kB for a published attention curve's 9,000 points) instead of
        # an n x d temporary (430 kB, past malloc's mmap threshold: 190 -> 38 us a query). Summed in the
        # same order as .sum(axis=1) over d < 8 features, so the distances are equal to the last bit.
        self.columns = [np.ascontiguousarray(self.x[:, j]) for j in range(self.x.shape[1])]

    def __call__(self, q: np.ndarray) -> float:
        scaled = q / self.scale
        squared = (self.columns[0] - scaled[0]) ** 2
        for column, value in zip(self.columns[1:], scaled[1:]):
            squared += (column - value) ** 2
        d = np.sqrt(squared)
        near = np.argpartition(d, self.k - 1)[: self.k] if len(d) > self.k else np.arange(len(d))
        idx = near[np.argsort(d[near])]
        if d[idx[0]] < 1e-9:
            return float(self.y[idx[0]])
        w = 1.0 / d[idx] ** 2
        return float((w * self.y[idx]).sum() / w.sum())


_LAZY = object()


class Grid:
    """Multilinear interpolation on a regular grid at one point inside it: what scipy's
    RegularGridInterpolator(method="linear") returns, without its ~0.1 ms of per-call set-up (a cold
    `compare` looks up some 1,500 new GEMM shapes)."""

    def __init__(self, axes: list[np.ndarray], values: np.ndarray):
        self.axes = [[float(v) for v in a] for a in axes]
        self.values = values
        self.corners = list(itertools.product((0, 1), repeat=len(axes)))

    def __call__(self, point) -> float:
        index, frac = [], []
        for axis, p in zip(self.axes, point):
            # the cell [axis[i], axis[i + 1]] holding p (the last cell for p on the upper edge)
            i = min(max(bisect.bisect_left(axis, p) - 1, 0), len(axis) - 2)
            index.append(i)
            frac.append((p - axis[i]) / (axis[i + 1] - axis[i]))
        total = 0.0
        for corner in self.corners:
            weight = 1.0
            for bit, f in zip(corner, frac):
                weight *= f if bit else 1.0 - f
            if weight:
                total += weight * float(self.values[tuple(i + b for i, b in zip(index, corner))])
        return total


class Interpolator:
    """log η against log-shape features.

    Points on a grid (GEMM): multilinear interpolation over the grid's axes, the holes of a grid
    cut short by the budget filled from the scattered interpolator, queries clamped to the grid's
    edges. Scattered points: linear on a Delaunay mesh where possible, else IDW. 1-D kinds:
    piecewise-linear in log bytes, constant beyond the ends; with `monotone_bytes` (memory-bound
    kinds), the lower envelope of their time: see `_bytes_envelope`."""

    def __init__(self, x: np.ndarray, y: np.ndarray, linear: bool, monotone_bytes: bool = False):
        self.dims = x.shape[1]
        self.idw = IDW(x, y)
        self.linear = None
        self.grid = None
        if self.dims == 1:
            order = np.argsort(x[:, 0])
            self.x1, self.y1 = x[order, 0], y[order]
            self.x1_list = self.x1.tolist()
            self.suffix_min = self._bytes_envelope() if monotone_bytes else None
            return
        if linear and len(y) > self.dims + 1:
            self._points = (x, y)  # the Delaunay mesh is built on first use: a full grid never needs it
            self.linear = _LAZY
            axes = [np.unique(x[:, d]) for d in range(self.dims)]
            if all(len(a) >= 2 for a in axes) and math.prod(len(a) for a in axes) <= 4 * len(y):
                self.grid = self._grid(x, y, axes)

    def _bytes_envelope(self) -> list[float]:
        """Suffix minima of log2 time at the knots (x = log2 bytes, y = ln η: time ∝ 2^x / η, so
        ln time = x ln 2 - y up to a constant).

        A memory-bound kernel given fewer bytes has fewer blocks to stream: it takes at most what the
        kernel of a larger measured size took. Interpolating η between measurements at neighbouring
        sizes can still make time fall as bytes grow (a curve whose η more than doubles in one octave:
        a residual add of 24.6 kB read 2.61 us where 12.3 kB read 3.03 us on a B200). The lower envelope
        min over x' >= x of time(x') is non-decreasing by construction; the curve is piecewise linear
        in ln time, so that minimum is at x itself or at a knot past it (past the last knot η is
        constant and time grows), and the envelope is exact at the knots' values. Returns M with
        M[k] = min over knots j >= k of x_j ln 2 - y_j (`__call__` reads it)."""
        log_time = (self.x1 * math.log(2.0) - self.y1).tolist()
        suffix, low = [0.0] * len(log_time), math.inf
        for k in range(len(log_time) - 1, -1, -1):
            low = min(low, log_time[k])
            suffix[k] = low
        return suffix

    def _grid(self, x: np.ndarray, y: np.ndarray, axes: list[np.ndarray]):
        values = np.full([len(a) for a in axes], np.nan)
        index = tuple(np.searchsorted(axes[d], x[:, d]) for d in range(self.dims))
        values[index] = y
        for hole in zip(*np.nonzero(np.isnan(values))):
            values[hole] = self._scattered(np.array([axes[d][i] for d, i in enumerate(hole)]))
        self.lo, self.hi = np.array([a[0] for a in axes]), np.array([a[-1] for a in axes])
        return Grid(axes, values)

    def _scattered(self, point: np.ndarray) -> float:
        if self.linear is _LAZY:
            try:
                self.linear = LinearNDInterpolator(*self._points)
            except Exception:  # degenerate (coplanar) points: IDW alone
                self.linear = None
        if self.linear is not None:
            value = float(self.linear(point.reshape(1, -1))[0])
            if not math.isnan(value):
                return value
        return self.idw(point)

    def __call__(self, q: tuple[float, ...]) -> float:
        if self.dims == 1:
            y = float(np.interp(q[0], self.x1, self.y1))
            if self.suffix_min is not None:
                k = bisect.bisect_right(self.x1_list, q[0])  # the first knot past the query
                if k < len(self.suffix_min):
                    # ln η the time of a larger size allows: ln time = x ln 2 - y <= M[k]
                    y = max(y, q[0] * math.log(2.0) - self.suffix_min[k])
            return y
        point = np.asarray(q, dtype=float)
        if self.grid is not None:
            return self.grid(np.clip(point, self.lo, self.hi))
        return self._scattered(point)
