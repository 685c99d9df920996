"""Every control of every page, over its choices and edge values: the page may show a message, never a
Python traceback (AppTest's `exception`). One control changes at a time from the page's defaults; a
radio or select box that reveals more controls (training, a set layout) has those swept under it.

Long lists are sampled (first, last and every k-th choice, so at most SAMPLE runs per control): the
zoo's 41 models and the catalog's 40 devices are predicted elsewhere (tests/predict, tests/workload)."""

import pytest
from streamlit.testing.v1 import AppTest

from planner.app.main import PAGES
from tests.app.conftest import APP

SAMPLE = 8
KINDS = ("selectbox", "radio", "number_input", "slider", "multiselect", "checkbox", "toggle", "text_input",
         "text_area", "select_slider")
SKIP = {"page"}
"""The sidebar's page picker: each page is swept by its own test."""


def _sample(options: list) -> list:
    if len(options) <= SAMPLE:
        return list(options)
    step = max(1, len(options) // (SAMPLE - 1))
    return list(dict.fromkeys([*options[::step], options[-1]]))


def _widgets(at) -> dict:
    found = {}
    for kind in KINDS:
        for w in at.get(kind):
            if w.key and w.key not in SKIP and not w.key.startswith("FormSubmitter"):
                found[w.key] = (kind, w)
    return found


def _values(kind: str, w) -> list:
    """The values to try: every (sampled) choice, the edges of a range, empty and long text. A select box
    is set by index (its options are shown through format_func, which AppTest cannot invert)."""
    if kind == "selectbox":
        return [("index", i) for i in _sample(list(range(len(w.options))))]
    if kind in ("radio", "select_slider"):
        return _sample(list(w.options))
    if kind == "multiselect":
        options = list(w.options)
        return [[], options[:1], _sample(options)]
    if kind in ("checkbox", "toggle"):
        return [not w.value, w.value]
    if kind in ("number_input", "slider"):
        lo, hi = w.min, w.max
        values = [v for v in (lo, hi) if v is not None]
        if isinstance(w.value, (list, tuple)):  # a range slider
            return [(lo, lo), (lo, hi)]
        return values
    if kind == "text_input":
        return ["", "x" * 300, "-1", "1e400"]
    if kind == "text_area":
        return ["", "[", "a: [1, 2\n", "name: x\n" * 3]
    return []


def _set(at, kind: str, key: str, value) -> None:
    for w in at.get(kind):
        if w.key == key:
            if isinstance(value, tuple) and value and value[0] == "index":
                if value[1] < len(w.options):
                    w.select_index(value[1]).run()
            elif kind in ("radio", "select_slider") and value not in list(w.options):
                return
            else:
                w.set_value(value).run()
            for b in at.button:  # a control inside a form takes effect when the form is submitted
                if b.key and b.key.startswith("FormSubmitter"):
                    b.click().run()
            return


def _buttons(at, page: str) -> int:
    """Press every button once (a preset opens another page: come back after it)."""
    runs = 0
    for key in [b.key for b in at.button if b.key]:
        for b in at.button:
            if b.key == key:
                b.click().run()
                runs += 1
                assert not at.exception, f"{page}: button {key}: {at.exception}"
                break
        if at.sidebar.radio(key="page").value != page:
            at.sidebar.radio(key="page").set_value(page).run()
    return runs


def _sweep(at, page: str, depth: int = 0, seen: frozenset = frozenset()) -> int:
    runs = _buttons(at, page) if depth == 0 else 0
    base = _widgets(at)
    for key, (kind, w) in base.items():
        if key in seen:
            continue
        try:
            original = ("index", w.index) if kind == "selectbox" else w.value
        except ValueError:  # a select box with no choice made (AppTest cannot index None)
            continue
        except KeyError:  # a control another choice hid (fixed lengths under a preset): no longer drawn
            continue
        if original == ("index", None):
            continue
        for value in _values(kind, w):
            _set(at, kind, key, value)
            runs += 1
            assert not at.exception, f"{page}: {key}={value!r}: {at.exception}"
            if depth == 0 and kind in ("radio", "selectbox") and not isinstance(value, list):
                revealed = set(_widgets(at)) - set(base)
                if revealed:  # controls this choice shows (training inputs, a set layout): sweep them too
                    runs += _sweep(at, page, 1, frozenset(base))
        _set(at, kind, key, original)
        assert not at.exception, f"{page}: {key} back to {original!r}: {at.exception}"
    return runs


def _opened(page: str) -> AppTest:
    """A fresh app session on `page`, drawn without a traceback."""
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.sidebar.radio(key="page").set_value(page).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
@pytest.mark.parametrize("page", list(PAGES))
def test_no_control_value_gives_a_traceback(page):
    at = _opened(page)
    runs = _sweep(at, page)
    assert runs >= (1 if page != "Calibration and accuracy" else 0)


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_says_what_it_answers_and_every_control_has_help(page):
    at = _opened(page)
    assert at.header and at.caption, f"{page}: a title and its one-line purpose"
    missing = [f"{kind} {w.label!r}" for kind in KINDS for w in at.get(kind)
               if w.key not in SKIP and not (getattr(w, "help", None) or "").strip()]
    assert not missing, f"{page}: controls without help: {missing}"
