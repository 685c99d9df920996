"""planner/memo.py: results keyed by object identity and plain values, bounded."""

from planner.memo import IdentityMemo


def test_computes_once_per_objects_and_values():
    memo, calls = IdentityMemo(), []
    a, b = {"x": 1}, {"x": 1}  # equal but distinct (and unhashable): two keys
    compute = lambda tag: (lambda: calls.append(tag) or tag)  # noqa: E731
    assert memo.get((a,), (1,), compute("a1")) == "a1"
    assert memo.get((a,), (1,), compute("again")) == "a1"  # stored: not computed again
    assert memo.get((b,), (1,), compute("b1")) == "b1"
    assert memo.get((a,), (2,), compute("a2")) == "a2"
    assert calls == ["a1", "b1", "a2"]


def test_starts_over_at_its_limit():
    memo, calls = IdentityMemo(limit=2), []
    objs = [object() for _ in range(3)]
    for o in objs:
        memo.get((o,), (), lambda: calls.append(1))
    memo.get((objs[0],), (), lambda: calls.append(1))  # cleared when the third arrived: computed again
    assert len(calls) == 4
