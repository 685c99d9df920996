"""The app's Cost page (planner/app/cost.py) through streamlit.testing."""

import re

import pytest

from planner.hardware.catalog import load_catalog
from tests.app.conftest import metrics

P5 = "aws:p5.48xlarge:us-east-1"  # 8 x h100-sxm
OLD_H200 = "runpod:8x H200 SXM (secure):secure-cloud"  # dated 2024-01
NEW_H200 = "aws:p5en.48xlarge:us-east-1"  # dated 2026-10-10


def _cost(app, **picks):
    app.sidebar.radio(key="page").set_value("Cost").run()
    for key, value in picks.items():
        app.selectbox(key=key).set_value(value).run()
    assert not app.exception, app.exception
    return app


def _text(elements) -> str:
    return " ".join(e.value for e in elements)


def _no_error(app):
    assert not app.exception, app.exception
    assert not app.error, _text(app.error)


def test_cost_page_break_even_moves_with_utilization(app):
    _cost(app, cost_device="h100-sxm", cost_instance=P5)
    before = metrics(app)["Break-even"]
    app.slider(key="cost_utilization").set_value(30).run()
    after = metrics(app)["Break-even"]
    assert not app.exception and before != after
    assert "price of" in _text(app.caption)


def test_an_override_is_said_and_the_catalog_date_is_not_shown_for_it(app):
    _cost(app, cost_device="h100-sxm", cost_instance=P5)
    date = load_catalog().instance(P5).price_dates["on_demand"]
    assert f"price of {date}" in _text(app.caption)
    app.number_input(key="cost_price").set_value(40.0).run()
    _no_error(app)
    captions = _text(app.caption)
    assert "Cloud price: your override, $40.00 per device-hour" in captions
    assert date not in captions
    app.number_input(key="cost_capex").set_value(250_000.0).run()
    captions = _text(app.caption)
    assert "server capex: your override, $250,000" in captions
    assert load_catalog().server("dgx-h100").date not in captions


def test_a_low_override_gives_an_explained_break_even_never_above_100_percent(app):
    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_site="us-virginia-colo")
    for price in (0.3, 1.0, 1.5, 2.0, 4.0):
        app.number_input(key="cost_price").set_value(price).run()
        _no_error(app)
        shown = metrics(app)["Break-even utilization"]
        percent = re.fullmatch(r"(\d+)%", shown)
        assert percent is None or int(percent.group(1)) <= 100, shown
    app.number_input(key="cost_price").set_value(0.5).run()
    assert metrics(app)["Break-even utilization"] == "none: renting is cheaper"
    assert metrics(app)["Break-even"] == "never"
    info = _text(app.info)
    assert "renting is cheaper at any utilization: owning costs $" in info and "/month at full use" in info
    assert "never pays off within the server's 3-year life" in info


def test_per_device_and_per_instance_overrides_of_one_price_agree(app):
    # $80 per instance-hour of p5.48xlarge (8 devices) = $10 per device-hour; x 8 devices of dgx-h100 = $80/h
    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_instance=P5)
    label = "Cloud $/h for the server's 8 devices"
    app.radio(key="cost_price_per").set_value("instance").run()
    app.number_input(key="cost_price").set_value(80.0).run()
    per_instance = metrics(app)[label]
    app.radio(key="cost_price_per").set_value("device").run()
    app.number_input(key="cost_price").set_value(10.0).run()
    _no_error(app)
    assert per_instance == metrics(app)[label] == "$80.00"
    assert "your override, $10.00 per device-hour" in _text(app.caption)
    app.radio(key="cost_price_per").set_value("instance").run()
    assert f"your override, $10.00 per instance-hour of {P5} (no catalog price or date applies)" in _text(app.caption)


def test_a_stale_price_warns(app, monkeypatch):
    monkeypatch.setenv("PLANNER_TODAY", "2026-11-23")  # hgx-h200's capex of 2026-10 is fresh then
    _cost(app, cost_device="h200-sxm", cost_server="hgx-h200", cost_instance=OLD_H200)
    assert "cloud price of runpod:8x H200 SXM" in _text(app.warning) and "2024-01" in _text(app.warning)
    app.selectbox(key="cost_instance").set_value(NEW_H200).run()
    assert not app.warning
    # dgx-h100's capex of 2023-05 is stale; a capex override is not
    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_instance=P5)
    assert "capex of dgx-h100 is dated 2023-05" in _text(app.warning)
    app.number_input(key="cost_capex").set_value(300_000.0).run()
    assert not app.warning


def test_a_device_without_a_cloud_instance_asks_for_a_price(app):
    _cost(app, cost_device="gb200")
    _no_error(app)
    assert "enter a price per device-hour" in _text(app.info) and not app.metric
    app.number_input(key="cost_price").set_value(6.0).run()
    _no_error(app)
    # $6 per device-hour x 72 devices of the NVL72 rack
    assert metrics(app)["Cloud $/h for the server's 72 devices"] == "$432.00"
    assert "your override" in _text(app.caption)


def test_every_device_and_every_control_at_its_extremes(app):
    _cost(app)
    for device in app.selectbox(key="cost_device").options:
        app.selectbox(key="cost_device").set_value(device).run()
        for server in app.selectbox(key="cost_server").options:
            app.selectbox(key="cost_server").set_value(server).run()
            _no_error(app)
    app.selectbox(key="cost_device").set_value("h100-sxm").run()
    for site in app.selectbox(key="cost_site").options:
        app.selectbox(key="cost_site").set_value(site).run()
        _no_error(app)
    for key in ("cost_months", "cost_utilization", "cost_discount"):
        for end in (app.slider(key=key).min, app.slider(key=key).max):
            app.slider(key=key).set_value(end).run()
            _no_error(app)
    for per in ("device", "instance"):
        app.radio(key="cost_price_per").set_value(per).run()
        for key in ("cost_price", "cost_capex"):
            for value in (0.01, app.number_input(key=key).max, 0.0):
                app.number_input(key=key).set_value(value).run()
                _no_error(app)
                assert not re.search(r"\d{3,}%", " ".join(m.value for m in app.metric))


@pytest.mark.parametrize("price", [2.0, 0.0])
def test_a_device_of_your_own_with_a_server(app, price):
    from planner.app.hardware import STATE, _device_row, _instance_rows, _server_row
    from planner.hardware.custom import shipped_row
    row = shipped_row("device", "h100-sxm") | {"id": "my-h100", "name": "My H100", "aliases": ""}
    app.session_state[STATE] = {"device": [_device_row(row)],
                                "instance": _instance_rows("my-h100", price, 1) if price else [],
                                "server": [_server_row("my-h100", 4, 150_000.0, 4_000.0)]}
    _cost(app, cost_device="my-h100")
    _no_error(app)
    if not price:  # no instance: a price per device-hour is asked for
        assert "enter a price per device-hour" in _text(app.info)
        app.number_input(key="cost_price").set_value(2.0).run()
        _no_error(app)
    # $2 per device-hour x 4 devices in its server
    assert metrics(app)["Cloud $/h for the server's 4 devices"] == "$8.00"
    assert "my-h100-server" in _text(app.caption)


def test_every_control_has_help_and_a_unit_and_the_chart_marks_the_break_even(app):
    from tests.app.conftest import chart_specs
    _cost(app, cost_device="h100-sxm", cost_instance=P5)
    controls = [*app.selectbox, *app.slider, *app.number_input, *app.radio]
    assert all(w.help for w in controls if w.key != "page"), [w.label for w in controls if not w.help]
    quantities = [w.label for w in (*app.slider, *app.number_input)]
    assert all(re.search(r"\((\$|%|months|TB|GB)", label) for label in quantities), quantities  # the unit first
    [spec] = chart_specs(app)
    assert "Month from purchase" in spec and "Cumulative cost (USD)" in spec and '"type": "rule"' in spec
    # the rule's label, in the chart's data: the month the Break-even metric shows
    [chart] = app.get("vega_lite_chart")
    label = f"break-even: {metrics(app)['Break-even'].removeprefix('after ')}".encode()
    assert any(label in d.data.data for d in chart.proto.datasets)


def test_the_totals_over_the_term_are_printed_and_are_the_table_s_last_month(app):
    """Job (b) of issue 43: buy H100 servers or rent for 3 years: the 36-month totals are the cumulative costs
    of compare_tco's table at month 36, and the cheaper side is their difference."""
    from planner.plan.tco import compare_tco

    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_site="us-virginia-colo", cost_instance=P5)
    app.slider(key="cost_months").set_value(36).run()
    _no_error(app)
    shown = metrics(app)
    r = compare_tco("h100-sxm", "us-virginia-colo", P5, 36, 0.8, server="dgx-h100")
    cloud, onprem = r.table.iloc[-1]["cloud_usd"], r.table.iloc[-1]["onprem_usd"]
    assert r.table.iloc[-1]["month"] == 36
    assert shown["Renting over 36 months"] == f"${cloud:,.0f}"
    assert shown["Owning over 36 months"] == f"${onprem:,.0f}"
    side = "owning" if onprem < cloud else "renting"
    assert shown["Cheaper over the term"] == side
    delta = next(m.proto.delta for m in app.metric if m.label == "Cheaper over the term")
    assert delta == f"by ${abs(cloud - onprem):,.0f}"



def test_the_term_s_bill_is_itemized_with_sources_and_adds_up(app):
    """Issue 43 item 7: each cloud and on-prem line over the term, formatted money, its source, a caption
    with the scroll hint; each side's lines add up to the totals shown above."""
    from planner.plan.tco import compare_tco
    from tests.app.conftest import table

    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_site="us-virginia-colo", cost_instance=P5)
    app.slider(key="cost_months").set_value(36).run()
    _no_error(app)
    frame = table(app, "source")
    money = "USD over 36 months"
    assert list(frame.columns) == ["side", "line", money, "source"]
    assert all(re.fullmatch(r"-?\$\d{1,3}(,\d{3})*", v) for v in frame[money]), list(frame[money])
    items = " ".join(frame["line"])
    for item in ("compute", "storage", "egress", "network fabric", "power", "colocation", "staff", "support contract",
                 "residual value"):
        assert item in items, item
    r = compare_tco("h100-sxm", "us-virginia-colo", P5, 36, 0.8, server="dgx-h100")
    assert list(frame[money]) == [(f"-${-x.usd:,.0f}" if x.usd < 0 else f"${x.usd:,.0f}") for x in r.lines]
    staff = frame[frame["line"].str.startswith("staff")]["source"].iloc[0]
    assert "Hedgehog" in staff and "2026-05" in staff
    assert "scroll the table sideways" in _text(app.caption) and "line by line" in _text(app.caption)


def test_a_line_overridden_or_excluded_changes_the_bill(app):
    from tests.app.conftest import table

    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100", cost_site="us-virginia-colo", cost_instance=P5)
    before = metrics(app)["Owning over 36 months"]
    app.number_input(key="cost_network").set_value(0.0).run()
    _no_error(app)
    frame = table(app, "source")
    network = frame[frame["line"].str.startswith("network")]
    assert network["USD over 36 months"].iloc[0] == "$0" and network["source"].iloc[0] == "excluded (0)"
    assert metrics(app)["Owning over 36 months"] != before
    # 100 TB kept: the cloud's storage line is 100 x $23 x 36 = $82,800
    app.number_input(key="cost_storage_tb").set_value(100.0).run()
    frame = table(app, "source")
    assert frame[(frame.side == "cloud") & (frame["line"] == "storage")]["USD over 36 months"].iloc[0] == "$82,800"
    app.number_input(key="cost_staff").set_value(12_000.0).run()
    frame = table(app, "source")
    staff = frame[frame["line"].str.startswith("staff")]
    assert staff["USD over 36 months"].iloc[0] == "$36,000" and staff["source"].iloc[0] == "your override"


def test_every_other_line_at_its_extremes(app):
    from planner.app.cost import LINES
    _cost(app, cost_device="h100-sxm", cost_server="dgx-h100")
    for key, *_ in LINES:
        widget = app.number_input(key=key)
        assert widget.help and widget.value is None  # empty: the sourced default
        for value in (widget.max, 0.0, None):
            app.number_input(key=key).set_value(value).run()
            _no_error(app)
