"""planner/files.py: json_depth, the bound parse_json checks before parsing, on both of its paths (numpy
for text without a backslash, regular expressions otherwise); parse_json's two parsers (orjson, and
json for whatever orjson refuses) giving json's values and json's messages."""

import json
import math
import os
import random
import stat

import pytest

from planner.errors import ConfigError
from planner.files import json_depth, parse_json


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


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5, -0.0, 1e-300, "x\\u00e9", null, true]}',
    "18446744073709551615",  # 2^64 - 1: orjson's largest integer, kept an int
    "123456789012345678901234567890",  # beyond 64 bits: orjson would give a float, json an int
    "-9999999999999999999",  # 19 digits below -2^63
    '[0.1234567890123456789]',  # 19 digits of a float: read by json, the same float
    '{"a": 1, "a": 2}',  # the last of a repeated key, as json
])
def test_parse_json_gives_json_s_values_and_types(text):
    got, want = parse_json(text, "t"), json.loads(text)
    assert repr(got) == repr(want)  # repr: an int stays an int, -0.0 stays -0.0


def test_parse_json_overflow_is_infinity_unless_finite():
    # 1e400 overflows a double: json reads it as infinity; with finite=True it is refused
    assert parse_json("[1e400]", "t") == [math.inf]
    with pytest.raises(ConfigError, match="beyond the range of a float"):
        parse_json("[1e400]", "t", finite=True)


@pytest.mark.parametrize("text, message", [
    ("[NaN]", "NaN is not a number JSON allows"),
    ("[1, 2", "not valid JSON"),
    ('"\ud800x', "not valid JSON"),
])
def test_parse_json_refusals_are_worded_by_json(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_json(text, "t")


def test_parse_json_accepts_a_lone_surrogate_escape_as_json_does():
    # an escaped lone surrogate is valid JSON text that orjson refuses; json reads it
    assert parse_json('"\\ud800"', "t") == json.loads('"\\ud800"')


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_file_written_gets_the_permissions_open_would_give(tmp_path, umask):
    # tempfile.mkstemp creates its file 0600; the file renamed into place gets 0666 less the umask, as open() gives
    from planner.files import write_text_atomic

    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "a.json", "{}")
        write_text_atomic(tmp_path / "a.json", "[]")  # replacing a file
        with open(tmp_path / "b.txt", "w"):
            pass
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"a.json": 0o666 & ~umask, "b.txt": 0o666 & ~umask}
