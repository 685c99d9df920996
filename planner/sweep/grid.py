"""A sweep grid: axes of `--configs` keys, constraints between them, filters on the results.

GRID.yaml (read as data: planner/plan/safe_yaml.py; nothing in it runs):

    axes:                                  # every key a --configs key (planner predict --configs)
      model: [llama-3.1-8b, mistral-7b]    # a list of values ...
      device: [h100-sxm, a100-sxm-80gb]
      output_len: 256                      # ... one value ...
      batch: {from: 1, to: 256, times: 2}  # ... or a range: 1, 2, 4, ..., 256 (geometric)
      input_len: {from: 512, to: 2048, step: 512}   # 512, 1024, 1536, 2048 (arithmetic)
      tp: [1, 2, 4, 8]
      gpus: [1, 2, 4, 8]
    where:                                 # constraints over the axes: + - * / // % and comparisons,
      - tp <= gpus                         # and, or, not; names are axis keys
      - gpus % tp == 0
    keep:                                  # filters on the results: rows whose column equals the value
      fits: true
    chunk: 200                             # points per chunk (the unit of work, progress and resume)

The grid expands lazily in the order of its axes (the last axis varies fastest) and in that order
points get their ids 0, 1, 2, ... once the constraints have dropped what they drop. Put the axes that
change the captured graph (model, batch, lengths, tp) first and the cheap ones (device, pricing, dp)
last: a chunk then reuses the graphs it captured.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.files import read_text
from planner.plan.safe_yaml import load_yaml

MAX_POINTS = 10**8
CHECK_REPORT = 2**20
"""Grid points looked at between two progress calls of Grid.points (a few seconds of constraints)."""
"""Largest grid accepted (points before constraints): about three hours of one core at the 10,000
points/s benchmarks/sweep_speed.py measures over cached graphs."""
MAX_AXIS_VALUES = 100_000
"""Most values one axis may take."""
MAX_EXPR_CHARS = 500
"""Longest constraint."""
DEFAULT_CHUNK = 200
MAX_CHUNK = 100_000

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}


@dataclass(frozen=True, slots=True)
class Constraint:
    """One `where` line: its text and its parsed expression (evaluated by `holds`, never by eval)."""

    text: str
    tree: ast.Expression

    def holds(self, point: dict) -> bool:
        """Whether `point` satisfies the constraint. A division by zero does not satisfy it."""
        try:
            return bool(_evaluate(self.tree.body, point))
        except ZeroDivisionError:
            return False
        except (TypeError, ValueError, OverflowError, MemoryError):
            raise ConfigError(f"where '{self.text}': cannot compare or compute with the values of point "
                              f"{json.dumps(point, default=str)} (arithmetic takes numbers; a text is only "
                              "compared)") from None


@dataclass(frozen=True, slots=True)
class Grid:
    """A parsed sweep grid."""

    axes: tuple[tuple[str, tuple], ...]
    """(--configs key, its values) in the file's order."""
    where: tuple[Constraint, ...]
    keep: tuple[tuple[str, object], ...]
    """(result column, value): only rows where the column equals the value are written."""
    chunk: int
    digest: str
    """sha256 of the grid's canonical JSON: a resumed sweep must be of the same grid."""

    @property
    def texts(self) -> tuple[str, ...]:
        """Axes whose values mix texts and numbers (batch: [1, 8, auto]): their `in.<key>` column is
        written as text, as one Parquet column holds one type."""
        return tuple(k for k, values in self.axes
                     if len({isinstance(v, str) for v in values}) > 1)

    @property
    def size(self) -> int:
        """Points before the constraints."""
        return math.prod(len(values) for _, values in self.axes)

    def points(self, checked: Callable[[int], None] | None = None) -> Iterator[tuple[int, dict]]:
        """(id, point) of every point that satisfies the constraints, lazily, in grid order; `checked(n)` is
        called after every CHECK_REPORT points of the grid looked at (kept or not), for a progress line."""
        keys = [k for k, _ in self.axes]
        ident = 0
        for seen, values in enumerate(itertools.product(*(v for _, v in self.axes)), 1):
            point = dict(zip(keys, values))
            if all(c.holds(point) for c in self.where):
                yield ident, point
                ident += 1
            if checked is not None and seen % CHECK_REPORT == 0:
                checked(seen)

    def chunks(self) -> Iterator[tuple[int, list[tuple[int, dict]]]]:
        """(chunk number, its points) in order; chunk k holds the points with ids k*chunk .. (k+1)*chunk - 1."""
        batch: list[tuple[int, dict]] = []
        number = 0
        for item in self.points():
            batch.append(item)
            if len(batch) == self.chunk:
                yield number, batch
                number, batch = number + 1, []
        if batch:
            yield number, batch


def load_grid(path: str) -> Grid:
    """Read and check GRID.yaml; raise ConfigError naming the problem and what would be valid."""
    data = load_yaml(read_text(path, "grid file"), path)
    return parse_grid(data, path)


def parse_grid(data, where: str = "grid") -> Grid:
    """A Grid from the mapping a grid file holds (see the module docstring)."""
    from planner.predict.api import PRECISION_KEYS, Request

    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping with 'axes' (and optionally 'where', 'keep', 'chunk')")
    unknown = sorted(set(map(str, data)) - {"axes", "where", "keep", "chunk"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid: axes, where, keep, chunk")
    axes_in = data.get("axes")
    if not isinstance(axes_in, dict) or not axes_in:
        raise ConfigError(f"{where}: 'axes' must be a mapping of --configs keys to values, e.g. "
                          "{model: [llama-3.1-8b], device: [h100-sxm, h200-sxm], batch: [1, 8, 64]}")
    valid = sorted(set(Request.__dataclass_fields__) | set(PRECISION_KEYS))
    axes = []
    for key, spec in axes_in.items():
        if not isinstance(key, str) or key not in valid:
            raise ConfigError(f"{where}: axis '{key}' is not a --configs key; valid: {', '.join(valid)}")
        axes.append((key, _values(key, spec, where)))
    missing = [k for k in ("model", "device") if k not in dict(axes)]
    if missing:
        raise ConfigError(f"{where}: axes must include {' and '.join(missing)}")
    size = math.prod(len(v) for _, v in axes)
    if size > MAX_POINTS:
        raise ConfigError(f"{where}: {size:,} points; the limit is {MAX_POINTS:,}")
    constraints = _constraints(data.get("where", []), [k for k, _ in axes], where)
    keep = data.get("keep", {}) or {}
    if not isinstance(keep, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                             for k, v in keep.items()):
        raise ConfigError(f"{where}: 'keep' must map result columns to a value each, e.g. {{fits: true}}")
    chunk = data.get("chunk", DEFAULT_CHUNK)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= MAX_CHUNK:
        raise ConfigError(f"{where}: 'chunk' must be a whole number in 1..{MAX_CHUNK:,}, got {chunk!r}")
    canonical = json.dumps({"axes": [[k, list(v)] for k, v in axes], "where": [c.text for c in constraints],
                            "keep": sorted(keep.items()), "chunk": chunk}, sort_keys=True, default=str)
    return Grid(tuple(axes), tuple(constraints), tuple(sorted(keep.items())), chunk,
                hashlib.sha256(canonical.encode()).hexdigest())


def check_names(grid: Grid, where: str = "grid") -> None:
    """Refuse a grid naming a model or a device planner does not know, before any point is predicted:
    a misspelt name would otherwise fail every point it takes part in. ConfigError names the axis, the
    value and what would be valid (zoo ids, config.json paths; catalog devices and aliases)."""
    from planner.errors import PlannerError
    from planner.predict.context import default_context
    from planner.workload.zoo import resolve

    ctx = default_context()
    axes = dict(grid.axes)
    for key, check in (("model", resolve), ("device", ctx.device)):
        for value in axes.get(key, ()):
            try:
                check(str(value))
            except PlannerError as exc:
                raise ConfigError(f"{where}: axis '{key}': {' '.join(str(exc).split())}") from None


def _values(key: str, spec, where: str) -> tuple:
    """An axis's values: a list, one scalar, or {from, to, step} / {from, to, times}."""
    if isinstance(spec, dict):
        return _range(key, spec, where)
    values = spec if isinstance(spec, list) else [spec]
    if not values:
        raise ConfigError(f"{where}: axis '{key}' has no values")
    if len(values) > MAX_AXIS_VALUES:
        raise ConfigError(f"{where}: axis '{key}' has {len(values):,} values; the limit is {MAX_AXIS_VALUES:,}")
    for v in values:
        if not isinstance(v, (str, int, float, bool)) or (not isinstance(v, (str, bool)) and not _finite(v)):
            raise ConfigError(f"{where}: axis '{key}': value {_short_value(v)} is not a text or a finite number "
                              f"(numbers up to {MAX_NUMBER:.0e})")
    if len(set(map(repr, values))) != len(values):
        raise ConfigError(f"{where}: axis '{key}' lists a value twice")
    return tuple(values)


MAX_NUMBER = 1e300
"""Largest magnitude of a number in a grid: a 401-digit integer would overflow float arithmetic."""


def _finite(v) -> bool:
    """True for a float or int of magnitude at most MAX_NUMBER (an int of 400 digits cannot become a float)."""
    if isinstance(v, int):
        return abs(v) <= MAX_NUMBER
    return math.isfinite(v) and abs(v) <= MAX_NUMBER


def _short_value(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def _range(key: str, spec: dict, where: str) -> tuple:
    extra = sorted(set(map(str, spec)) - {"from", "to", "step", "times"})
    start, stop = spec.get("from"), spec.get("to")
    step, times = spec.get("step"), spec.get("times")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
                  for v in (start, stop) + tuple(v for v in (step, times) if v is not None))
    if extra or not numbers or (step is None) == (times is None):
        raise ConfigError(f"{where}: axis '{key}': a range is {{from: A, to: B, step: S}} (A, A+S, ..., up to B) or "
                          f"{{from: A, to: B, times: F}} (A, A*F, ..., up to B), finite numbers up to "
                          f"{MAX_NUMBER:.0e}, got {_short_value(spec)}")
    values = []
    v = start
    if step is not None:
        if step <= 0 or start > stop:
            raise ConfigError(f"{where}: axis '{key}': a step range needs from <= to and step > 0")
        while v <= stop + 1e-9 * abs(stop) and len(values) <= MAX_AXIS_VALUES:
            values.append(v)
            v = start + len(values) * step
    else:
        if times <= 1 or start <= 0 or start > stop:
            raise ConfigError(f"{where}: axis '{key}': a times range needs 0 < from <= to and times > 1")
        while v <= stop * (1 + 1e-9) and len(values) <= MAX_AXIS_VALUES:
            values.append(v)
            v = v * times
    if len(values) > MAX_AXIS_VALUES:
        raise ConfigError(f"{where}: axis '{key}': the range has more than {MAX_AXIS_VALUES:,} values")
    whole = all(isinstance(x, int) for x in (start, step or 1, times or 2))
    return tuple(int(x) if whole else x for x in values)


def _constraints(items, names: list[str], where: str) -> list[Constraint]:
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise ConfigError(f"{where}: 'where' must be a list of constraints such as 'tp * pp <= gpus'")
    out = []
    for text in items:
        if len(text) > MAX_EXPR_CHARS:
            raise ConfigError(f"{where}: a constraint of {len(text):,} characters; the limit is {MAX_EXPR_CHARS}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise ConfigError(f"{where}: constraint '{text}' is not an expression such as 'tp * pp <= gpus'") from None
        _check(tree.body, text, names, where)
        out.append(Constraint(text, tree))
    return out


def _check(node: ast.AST, text: str, names: list[str], where: str) -> None:
    """Refuse any node but numbers, texts, axis names, arithmetic, comparisons and and/or/not."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ConfigError(f"{where}: constraint '{text}' names '{node.id}', which is not an axis; axes: "
                              f"{', '.join(names)}")
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _check(node.left, text, names, where) or _check(node.right, text, names, where)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
        return _check(node.operand, text, names, where)
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, text, names, where)
        return
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for v in (node.left, *node.comparators):
            _check(v, text, names, where)
        return
    raise ConfigError(f"{where}: constraint '{text}': only numbers, texts, axis names, + - * / // %, comparisons "
                      f"and and/or/not are allowed")


def _evaluate(node: ast.AST, point: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return point[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, point), _evaluate(node.right, point)
        if isinstance(left, str) or isinstance(right, str):  # 'x' * 10**12 or '%s' % ... would build texts
            raise TypeError("arithmetic on a text")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, point)
        return (not value) if isinstance(node.op, ast.Not) else (-value if isinstance(node.op, ast.USub) else +value)
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_evaluate(v, point) for v in node.values)
        return any(_evaluate(v, point) for v in node.values)
    left = _evaluate(node.left, point)
    for op, right_node in zip(node.ops, node.comparators):
        right = _evaluate(right_node, point)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True
