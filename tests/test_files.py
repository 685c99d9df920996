"""planner/files.py: json_depth, the bound parse_json checks before parsing, on both of its paths (numpy
for text without a backslash, regular expressions otherwise)."""

import json
import random

from planner.files import json_depth


def _depth(value) -> int:
    """Nesting depth of parsed JSON, by recursion (the reference)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def test_depths_in_closed_form():
    assert json_depth("") == 0
    assert json_depth("3") == 0
    assert json_depth("[]") == 1
    assert json_depth('{"a": [1, {"b": []}]}') == 4  # { [ { [
    assert json_depth("[" * 100_000 + "]" * 100_000) == 100_000  # no recursion


def test_brackets_inside_strings_do_not_count():
    assert json_depth('"[[[{{{"') == 0
    assert json_depth('{"k[": "]]]]", "v": ["{"]}') == 2
    assert json_depth('["é[", "日本{"]') == 1  # multi-byte characters hold no ASCII byte


def test_escaped_quotes_take_the_other_path():
    # "a\"[[[" is one string: the escaped quote does not close it
    assert json_depth('[{"a\\"[[[": 1}]') == 2
    assert json_depth('["\\\\", [[]]]') == 3  # an escaped backslash, then the string closes


def test_random_json_matches_a_recursive_walk():
    rng = random.Random(7)

    def value(level: int):
        pick = rng.random()
        if level > 6 or pick < 0.3:
            return rng.choice([1, 2.5, None, True, "x[", "]{", 'q"uote', "back\\slash", "ü"])
        if pick < 0.65:
            return [value(level + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "[b", "c}"]) + str(i): value(level + 1) for i in range(rng.randint(0, 3))}

    for _ in range(300):
        v = value(0)
        text = json.dumps(v, ensure_ascii=rng.random() < 0.5)
        assert json_depth(text) == _depth(v), text
