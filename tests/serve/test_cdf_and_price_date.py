"""What a ServeResult keeps beyond its percentiles: the CDF of each request's TTFT and TPOT
(ServeMetrics.ttft_quantiles_s, tpot_quantiles_s) and the date of the price behind its cost
(ServeResult.price_date), against the percentiles and the catalog row they come from."""

import json
from dataclasses import replace

import numpy as np
import pytest

from planner.predict.api import Request
from planner.predict.context import default_context
from planner.predict.cost import cheapest_instance
from planner.serve.api import Load, serve
from planner.serve.metrics import CDF_POINTS, _cdf
from planner.units import json_safe

# the lengths and load of tests/serve/test_api.py: the same step-time grid when both files run together
REQ = Request("llama-3.1-8b", "h100-sxm", input_len=512, output_len=128)


@pytest.fixture(scope="module")
def run():
    return serve(REQ, Load(rate_rps=10.0, requests=200))


def test_the_cdf_holds_the_percentiles_it_is_summarized_by(run):
    m = run.metrics
    for cdf, p in ((m.ttft_quantiles_s, m.ttft_s), (m.tpot_quantiles_s, m.tpot_s)):
        assert len(cdf) == CDF_POINTS == 201
        assert all(a <= b for a, b in zip(cdf, cdf[1:]))  # a CDF never goes down
        # quantile i / 200: entry 100 is the median, 180 the 90th percentile, 198 the 99th
        assert cdf[100] == pytest.approx(p.p50, rel=1e-12)
        assert cdf[180] == pytest.approx(p.p90, rel=1e-12)
        assert cdf[198] == pytest.approx(p.p99, rel=1e-12)
        assert cdf[0] > 0 and cdf[0] <= p.p50 <= cdf[-1]


def test_the_cdf_spans_the_fastest_and_slowest_request():
    # 0, 1, ..., 9 s: quantile 0 is the least, 1 the largest, 1/2 the median 4.5 s
    cdf = _cdf(np.arange(10.0))
    assert (cdf[0], cdf[100], cdf[-1]) == (0.0, 4.5, 9.0)
    assert _cdf(np.array([])) == ()


def test_a_one_token_output_has_a_ttft_cdf_and_no_tpot_cdf():
    m = serve(replace(REQ, output_len=1), Load(rate_rps=10.0, requests=50)).metrics
    assert len(m.ttft_quantiles_s) == CDF_POINTS and m.tpot_quantiles_s == ()


def test_the_price_date_is_the_catalog_row_of_the_instance_priced(run):
    # one H100 at on-demand prices: the cheapest instance holding one (planner.predict.cost), its row's date
    ctx = default_context()
    instance = cheapest_instance(ctx.catalog, ctx.device("h100-sxm"), "on_demand", 1, 1)
    assert run.usd_per_h is not None and instance is not None
    assert run.price_date == instance.price_dates["on_demand"]
    assert any(instance.key in note for note in run.notes)
    back = json.loads(json.dumps(json_safe(run.as_dict()), allow_nan=False))
    assert back["price_date"] == run.price_date
