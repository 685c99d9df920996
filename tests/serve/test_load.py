"""The serving load: arrival processes in closed form, length presets, trace files, round-robin split."""

import math
from pathlib import Path

import numpy as np
import pytest

from planner.errors import ConfigError, UnknownNameError
from planner.serve.load import (
    MAX_LEN_TOKENS,
    MAX_REQUESTS,
    Arrivals,
    fixed_lengths,
    gamma,
    poisson,
    preset_lengths,
    presets,
    read_trace,
    split_round_robin,
)

HEADER = ("name,input_dist,input_mean,input_std,input_min,input_max,"
          "output_dist,output_mean,output_std,output_min,output_max,source,date,notes")
ROWS = ["chat,lognormal,1000,500,1,1000000,lognormal,200,300,1,1000000,test row,2025-01,loose clip bounds",
        "tight,lognormal,1000,500,900,1100,fixed,64,,,,test row,2025-01-02,",
        "pinned,fixed,128,0,128,128,fixed,16,0,16,16,test row,2025-01,"]


def lengths_csv(folder: Path, rows=ROWS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lengths.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return folder


def one_line_error(call, *needles, kind=ConfigError) -> str:
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


# ---------- arrival processes ----------

def test_poisson_mean_gap_is_one_over_rate():
    # rate 4 rps: gaps of mean 1/4 = 0.25 s; the standard error of the mean of 20,000 exponential gaps is
    # 0.25 / sqrt(20,000) = 0.0018 s (0.7 %), so 3 % is more than 4 standard errors
    a = poisson(4.0, 20_000, fixed_lengths(100, 10), seed=7)
    gaps = np.diff(np.concatenate([[0.0], a.arrival_s]))
    assert len(a) == 20_000
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    assert a.arrival_s[0] > 0  # the first request comes at the first gap, not at 0
    assert np.all(np.diff(a.arrival_s) >= 0)


def test_gamma_mean_gap_and_cv():
    # rate 10 rps, cv 2: shape k = 1/2^2 = 0.25, scale = 1/(10 * 0.25) = 0.4 s;
    # mean = k * scale = 0.1 s, std = sqrt(k) * scale = 0.5 * 0.4 = 0.2 s, cv = 0.2 / 0.1 = 2
    a = gamma(10.0, 2.0, 50_000, fixed_lengths(100, 10), seed=3)
    gaps = np.diff(np.concatenate([[0.0], a.arrival_s]))
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.05)


def test_gamma_with_cv_1_is_poisson_draw_for_draw(tmp_path):
    # a gamma of shape 1 is the exponential: numpy draws it as one, so the same seed gives the same arrivals
    lengths = preset_lengths("chat", root=lengths_csv(tmp_path))
    p, g = poisson(3.0, 1000, lengths, seed=11), gamma(3.0, 1.0, 1000, lengths, seed=11)
    assert np.array_equal(p.arrival_s, g.arrival_s)
    assert np.array_equal(p.input_len, g.input_len) and np.array_equal(p.output_len, g.output_len)


def test_gamma_below_1_is_more_regular_than_poisson():
    # cv 0.5: k = 4, gaps cluster around the mean; the cv of the gaps is 0.5 (closed form 1/sqrt(k))
    a = gamma(2.0, 0.5, 20_000, fixed_lengths(1, 1), seed=0)
    gaps = np.diff(np.concatenate([[0.0], a.arrival_s]))
    assert gaps.std() / gaps.mean() == pytest.approx(0.5, rel=0.05)


def test_same_seed_same_load_other_seed_other_load(tmp_path):
    lengths = preset_lengths("chat", root=lengths_csv(tmp_path))
    a, b, c = (gamma(5.0, 1.5, 500, lengths, seed=s) for s in (1, 1, 2))
    for field in ("arrival_s", "input_len", "output_len"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
        assert not np.array_equal(getattr(a, field), getattr(c, field))


def test_fixed_lengths_are_exact():
    a = poisson(1.0, 100, fixed_lengths(512, 128), seed=0)
    assert a.input_len.dtype == np.int64 and a.output_len.dtype == np.int64
    assert np.all(a.input_len == 512) and np.all(a.output_len == 128)
    lengths = fixed_lengths(512, 128)
    assert (lengths.name, lengths.input_len, lengths.output_len) == ("fixed", 512, 128)


def test_arrivals_are_read_only_copies():
    given = np.array([0.0, 1.0, 2.0])
    a = Arrivals(given, np.array([1, 2, 3]), np.array([4, 5, 6]))
    given[0] = 9.0
    assert a.arrival_s[0] == 0.0
    with pytest.raises(ValueError):
        a.arrival_s[0] = 5.0


@pytest.mark.parametrize("call,needle", [
    (lambda L: poisson(0.0, 10, L), "rate_rps"),
    (lambda L: poisson(-1.0, 10, L), "rate_rps"),
    (lambda L: poisson(math.nan, 10, L), "rate_rps"),
    (lambda L: poisson(math.inf, 10, L), "rate_rps"),
    (lambda L: poisson(2e6, 10, L), "rate_rps"),
    (lambda L: poisson(True, 10, L), "rate_rps"),  # a bool is not a number
    (lambda L: poisson("5", 10, L), "rate_rps"),
    (lambda L: poisson(10**400, 10, L), "rate_rps"),
    (lambda L: poisson(1.0, 0, L), "n must"),
    (lambda L: poisson(1.0, 1.5, L), "n must"),
    (lambda L: poisson(1.0, True, L), "n must"),
    (lambda L: poisson(1.0, MAX_REQUESTS + 1, L), "n must"),
    (lambda L: poisson(1.0, 10, L, seed=-1), "seed"),
    (lambda L: poisson(1.0, 10, "chat"), "lengths must"),
    (lambda L: gamma(1.0, 0.0, 10, L), "cv must"),
    (lambda L: gamma(1.0, 101.0, 10, L), "cv must"),
    (lambda L: gamma(1.0, math.nan, 10, L), "cv must"),
    (lambda L: fixed_lengths(0, 5), "input_len"),
    (lambda L: fixed_lengths(5, 0), "output_len"),
    (lambda L: fixed_lengths(MAX_LEN_TOKENS + 1, 5), "input_len"),
    (lambda L: fixed_lengths(5.0, 5), "input_len"),
    (lambda L: L.sample(10, np.random.RandomState(0)), "rng"),
    (lambda L: Arrivals([0.0, 1.0], [1], [1]), "input_len"),
    (lambda L: Arrivals([1.0, 0.0], [1, 1], [1, 1]), "request 1"),
    (lambda L: Arrivals([0.0, math.nan], [1, 1], [1, 1]), "request 1"),
    (lambda L: Arrivals([0.0, 1.0], [1, 0], [1, 1]), "input_len of request 1"),
    (lambda L: Arrivals([0.0, 1.0], [1, 1], [1.5, 1]), "output_len"),
])
def test_bad_arguments_give_one_line_errors(call, needle):
    one_line_error(lambda: call(fixed_lengths(10, 10)), needle)


# ---------- length presets ----------

def test_lognormal_preset_mean_and_median(tmp_path):
    # input: mean 1000, std 500 tokens -> sigma^2 = ln(1 + 500^2/1000^2) = ln 1.25 = 0.2231,
    # mu = ln 1000 - 0.2231/2 = 6.7960, median = e^mu = 894.4; clip bounds [1, 1e6] barely bite
    # output: mean 200, std 300 -> sigma^2 = ln(1 + 2.25) = 1.1787; the mean's standard error at n = 20,000
    # is 1.5 / sqrt(20,000) = 1.1 %, so 5 % is 4.7 standard errors
    lengths = preset_lengths("chat", root=lengths_csv(tmp_path))
    assert lengths.input.dist == "lognormal" and lengths.input_len is None
    inp, out = lengths.sample(20_000, np.random.default_rng(5))
    assert inp.dtype == np.int64 and out.dtype == np.int64
    assert inp.mean() == pytest.approx(1000, rel=0.05)
    assert np.median(inp) == pytest.approx(1000 * math.exp(-math.log(1.25) / 2), rel=0.03)  # 894.4
    assert out.mean() == pytest.approx(200, rel=0.05)
    assert inp.min() >= 1 and out.min() >= 1


def test_clip_bounds_and_fixed_sides(tmp_path):
    table = presets(root=lengths_csv(tmp_path))
    assert sorted(table) == ["chat", "pinned", "tight"]
    inp, out = table["tight"].sample(5000, np.random.default_rng(0))
    assert inp.min() >= 900 and inp.max() <= 1100  # clipped to [input_min, input_max]
    assert inp.min() == 900 and inp.max() == 1100  # std 500 around 1000 reaches both bounds
    assert np.all(out == 64)  # fixed with std, min and max left empty: 0, 64, 64
    assert table["tight"].output.min_tokens == table["tight"].output.max_tokens == 64
    inp, out = table["pinned"].sample(10, np.random.default_rng(0))
    assert np.all(inp == 128) and np.all(out == 16)


def test_preset_lookup_is_case_insensitive_and_unknown_lists_valid(tmp_path):
    root = lengths_csv(tmp_path)
    assert preset_lengths(" CHAT ", root=root).name == "chat"
    message = one_line_error(lambda: preset_lengths("chta", root=root), "chat", "pinned", "tight",
                             kind=UnknownNameError)
    assert "Did you mean: chat" in message


def test_presets_folder_from_environment(tmp_path, monkeypatch):
    lengths_csv(tmp_path / "serving", ROWS[:1])
    monkeypatch.setenv("PLANNER_HARDWARE_SPECS", str(tmp_path))
    assert list(presets()) == ["chat"]


def test_shipped_presets_load_and_sample():
    root = Path(__file__).resolve().parents[2] / "hardware_specs" / "serving"
    if not (root / "lengths.csv").is_file():
        pytest.skip("hardware_specs/serving/lengths.csv not written yet")
    for name, lengths in presets(root).items():
        inp, out = lengths.sample(100, np.random.default_rng(0))
        assert inp.min() >= lengths.input.min_tokens and inp.max() <= lengths.input.max_tokens, name
        assert out.min() >= lengths.output.min_tokens and out.max() <= lengths.output.max_tokens, name


BAD_ROWS = [
    ("chat,lognormal,1000,500,1,500,lognormal,200,300,1,1000,src,2025-01,", "input_mean"),  # mean above max
    ("chat,lognormal,1000,500,900,800,lognormal,200,300,1,1000,src,2025-01,", "input_max"),  # min above max
    ("chat,weibull,1000,500,1,5000,lognormal,200,300,1,1000,src,2025-01,", "input_dist"),
    ("chat,lognormal,nan,500,1,5000,lognormal,200,300,1,1000,src,2025-01,", "input_mean"),
    ("chat,lognormal,1000,inf,1,5000,lognormal,200,300,1,1000,src,2025-01,", "input_std"),
    ("chat,lognormal,1000,500,1,5000,lognormal,200,,1,1000,src,2025-01,", "output_std"),  # empty: not fixed
    ("chat,lognormal,1000,500,0,5000,lognormal,200,300,1,1000,src,2025-01,", "input_min"),
    ("chat,lognormal,1000,500,1,5000,lognormal,200,300,1,1000.5,src,2025-01,", "output_max"),
    ("chat,lognormal,1000,500,1,5000,fixed,200.5,0,1,1000,src,2025-01,", "output_mean"),  # fixed: whole
    ("chat,lognormal,1000,500,1,5000,fixed,200,5,1,1000,src,2025-01,", "output_std"),  # fixed: std 0
    ("chat,lognormal,1000,500,1,5000,lognormal,200,300,1,1000,,2025-01,", "source"),
    ("chat,lognormal,1000,500,1,5000,lognormal,200,300,1,1000,src,2025-13,", "date"),
    ("Chat Preset,lognormal,1000,500,1,5000,lognormal,200,300,1,1000,src,2025-01,", "name"),
    ("fixed,lognormal,1000,500,1,5000,lognormal,200,300,1,1000,src,2025-01,", "name"),
    ("chat,lognormal,1000,500,1,5000,lognormal,200,300,1,1000,src,2025-01", "(no cell)"),
]


@pytest.mark.parametrize("row,column", BAD_ROWS)
def test_bad_preset_rows_name_file_row_and_column(tmp_path, row, column):
    root = lengths_csv(tmp_path, [ROWS[2], row])
    one_line_error(lambda: presets(root), "lengths.csv", "row 3", column)


def test_duplicate_preset_name_and_missing_file(tmp_path):
    one_line_error(lambda: presets(lengths_csv(tmp_path / "a", [ROWS[0], ROWS[0]])), "row 3", "'name'")
    one_line_error(lambda: presets(tmp_path / "nowhere"), "lengths.csv")


# ---------- trace files ----------

def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_trace_is_relative_and_sorted_stably(tmp_path):
    path = write(tmp_path, "t.csv", "arrival_s,input_len,output_len\n"
                                    "102.5,10,1\n100.5,20,2\n\n101.0,30,3\n101.0,40,4\n")
    a = read_trace(path)
    # sorted: 100.5, 101.0, 101.0, 102.5; minus the first 100.5 -> 0, 0.5, 0.5, 2.0; the tie keeps file order
    assert a.arrival_s.tolist() == [0.0, 0.5, 0.5, 2.0]
    assert a.input_len.tolist() == [20, 30, 40, 10]
    assert a.output_len.tolist() == [2, 3, 4, 1]


def test_jsonl_trace_with_alias_keys(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"timestamp_s": 5, "prompt_tokens": 100, "output_tokens": 7}\n\n'
                                      '{"timestamp_s": 3.25, "prompt_tokens": 50, "output_tokens": 9, "x": [1]}\n')
    a = read_trace(path)
    assert a.arrival_s.tolist() == [0.0, 1.75]  # 3.25 - 3.25, 5 - 3.25
    assert a.input_len.tolist() == [50, 100] and a.output_len.tolist() == [9, 7]


def test_azure_trace_format(tmp_path):
    # the Azure LLM inference trace (AzureLLMInferenceTrace_conv.csv): 7-digit fractions, cut to 6
    path = write(tmp_path, "AzureLLMInferenceTrace_conv.csv",
                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n"
                 "2023-11-16 18:16:01.0000000,879,143\n")
    a = read_trace(path)
    # 50.995169 - 46.680590 = 4.314579 s; 61.000000 - 46.680590 = 14.319410 s (exact in microseconds)
    assert a.arrival_s == pytest.approx([0.0, 4.314579, 14.319410], abs=1e-9)
    assert a.input_len.tolist() == [374, 396, 879] and a.output_len.tolist() == [44, 109, 143]


def test_azure_timestamps_across_midnight_and_zones(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"TIMESTAMP": "2023-11-16T23:59:59.5+00:00", "input_len": 1, "output_len": 1}\n'
                                      '{"TIMESTAMP": "2023-11-17 00:00:00.25", "input_len": 2, "output_len": 1}\n')
    assert read_trace(path).arrival_s.tolist() == [0.0, 0.75]


def test_max_requests_bounds_the_trace(tmp_path):
    path = write(tmp_path, "t.csv", "arrival_s,input_len,output_len\n" + "0,1,1\n" * 4)
    assert len(read_trace(path, max_requests=4)) == 4
    one_line_error(lambda: read_trace(path, max_requests=3), "more than 3 requests")
    one_line_error(lambda: read_trace(path, max_requests=0), "max_requests")


CSV_HEAD = "arrival_s,input_len,output_len\n"
BAD_TRACES = [
    ("t.csv", CSV_HEAD + "0,1,1\nnan,1,1\n", "line 3"),
    ("t.csv", CSV_HEAD + "0,1,1\n-1,1,1\n", "line 3"),
    ("t.csv", CSV_HEAD + "0,1,1\n1,1,0\n", "line 3"),  # zero output tokens
    ("t.csv", CSV_HEAD + "0,1,1\n1,1.5,1\n", "line 3"),
    ("t.csv", CSV_HEAD + "0,1,1\n1,abc,1\n", "line 3"),
    ("t.csv", CSV_HEAD + f"0,{MAX_LEN_TOKENS + 1},1\n", "line 2"),
    ("t.csv", CSV_HEAD + "0,1,1\n1,1\n", "line 3"),  # a cell short
    ("t.csv", "arrival_s,input_len\n0,1\n", "header"),  # no output column
    ("t.csv", "arrival_s,timestamp_s,input_len,output_len\n0,0,1,1\n", "header"),  # two arrival columns
    ("t.csv", "arrival_s,input_len,input_len,output_len\n0,1,1,1\n", "line 1"),  # a column twice
    ("t.csv", "", "no requests"),
    ("t.csv", CSV_HEAD, "no requests"),
    ("t.csv", "\x00\x01garbage\x7f,\x02\n\x03,,\n", "line 2"),
    ("t.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": 1, "input_len": "12", '
                '"output_len": 1}\n', "line 2"),  # a string where a number is needed
    ("t.jsonl", '{"arrival_s": 0, "input_len": true, "output_len": 1}\n', "line 1"),
    ("t.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": 1, "output_len": 1}\n',
     "line 2"),  # a missing key
    ("t.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n\n[1, 2, 3]\n', "line 3"),
    ("t.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": NaN}\n', "line 2"),
    ("t.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": 1,\n', "line 2"),
    ("t.jsonl", '{"arrival_s": 1e999, "input_len": 1, "output_len": 1}\n', "line 1"),
    ("t.jsonl", '{"TIMESTAMP": "yesterday", "input_len": 1, "output_len": 1}\n', "line 1"),
    ("t.jsonl", '{"TIMESTAMP": 1700000000, "input_len": 1, "output_len": 1}\n', "line 1"),
    ("t.jsonl", '{"input_len": 1, "output_len": 1}\n', "line 1"),
    ("t.txt", CSV_HEAD + "0,1,1\n", ".jsonl"),  # unknown suffix: both valid ones listed
]


@pytest.mark.parametrize("name,text,needle", BAD_TRACES)
def test_bad_traces_give_one_line_errors_with_file_and_line(tmp_path, name, text, needle):
    path = write(tmp_path, name, text)
    one_line_error(lambda: read_trace(path), f"'{path}'", needle)


def test_binary_and_missing_traces(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"arrival_s,input_len,output_len\n\xff\xfe\x00\x81\n")
    one_line_error(lambda: read_trace(path), "t.csv", "not UTF-8")
    one_line_error(lambda: read_trace(tmp_path / "none.csv"), "none.csv", "does not exist")


# ---------- round-robin split ----------

def test_split_round_robin_sizes_and_order():
    a = Arrivals(np.arange(7) * 0.5, np.arange(1, 8), np.full(7, 3))
    parts = split_round_robin(a, 3)
    # 7 requests over 3 replicas: 0,3,6 / 1,4 / 2,5 -> sizes 3, 2, 2; arrival times unchanged
    assert [len(p) for p in parts] == [3, 2, 2]
    assert parts[0].input_len.tolist() == [1, 4, 7]
    assert parts[1].arrival_s.tolist() == [0.5, 2.0]
    assert parts[2].input_len.tolist() == [3, 6]
    assert sum(len(p) for p in parts) == len(a)
    assert [len(p) for p in split_round_robin(a, 9)] == [1] * 7 + [0, 0]
    assert np.array_equal(split_round_robin(a, 1)[0].arrival_s, a.arrival_s)


@pytest.mark.parametrize("parts", [0, -1, 1.0, True, 10**6])
def test_split_round_robin_bad_parts(parts):
    a = poisson(1.0, 5, fixed_lengths(1, 1))
    one_line_error(lambda: split_round_robin(a, parts), "parts")
    one_line_error(lambda: split_round_robin([1, 2], 2), "arrivals must")
