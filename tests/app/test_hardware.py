"""The app's Your hardware page (planner/app/hardware.py) through streamlit.testing."""

from tests.app.conftest import table


def _add_h100_variant(app):
    app.sidebar.radio(key="page").set_value("Your hardware").run()
    app.selectbox(key="hw_start").set_value("h100-sxm").run()
    app.button[0].click().run()  # the form's Add device


def test_a_variant_of_a_catalog_device_is_predicted_and_priced_everywhere(app):
    _add_h100_variant(app)
    assert not app.exception and not app.error
    assert any("Added h100-sxm-custom" in s.value for s in app.success)
    app.sidebar.radio(key="page").set_value("Workload").run()
    assert not app.exception and not app.error
    frame = table(app, "device").set_index("device")
    # the same figures as the H100 it copies: its profile stands, tier and all (the transfer is the identity)
    assert frame.loc["h100-sxm-custom", "latency (ms)"] == frame.loc["h100-sxm", "latency (ms)"]
    assert frame.loc["h100-sxm-custom", "tier"] == frame.loc["h100-sxm", "tier"] == "published"
    assert frame.loc["h100-sxm-custom", "$/h"] == 2.5  # one device at the $2.50 per device-hour entered


def test_a_bad_figure_is_one_line_and_adds_nothing(app):
    app.sidebar.radio(key="page").set_value("Your hardware").run()
    field = next(t for t in app.text_input if t.label == "Memory bandwidth (GB/s)")
    field.set_value("fast")
    app.button[0].click().run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert "your device 'my-gpu': column 'mem_bw_gb_per_s': bad value 'fast'" in box
    assert any("No device of your own yet" in i.value for i in app.info)


def test_added_rows_export_as_catalog_csv_and_can_be_removed(app):
    _add_h100_variant(app)
    assert [b.proto.label for b in app.get("download_button")] == ["devices.csv rows", "instances.csv rows"]
    app.selectbox(key="hw_remove").set_value("h100-sxm-custom").run()
    app.button(key="hw_remove_button").click().run()
    assert not app.exception and any("No device of your own yet" in i.value for i in app.info)


def test_adding_the_same_id_again_edits_it_and_a_node_is_rentable(app):
    _add_h100_variant(app)
    field = next(t for t in app.text_input if t.label == "Memory bandwidth (GB/s)")
    field.set_value("4800")
    app.button[0].click().run()
    assert not app.exception and not app.error
    devices = table(app, "mem_bw_gb_per_s")
    assert list(devices["id"]) == ["h100-sxm-custom"] and list(devices["mem_bw_gb_per_s"]) == ["4800"]
    instances = table(app, "price_usd_per_h")
    # one device, and a whole node of 8 (the catalog row's devices_per_node) at 8 x $2.50 per device-hour
    assert dict(zip(instances["device_count"], instances["price_usd_per_h"])) == {"1": "2.5", "8": "20"}


def test_an_accelerator_of_a_vendor_no_engine_lists_is_predicted_and_says_how(app):
    app.sidebar.radio(key="page").set_value("Your hardware").run()
    app.text_input(key="hw_id_(blank)").set_value("acme-x1")
    app.text_input(key="hw_name_(blank)").set_value("Acme X1")
    app.text_input(key="hw_vendor_(blank)").set_value("Acme")
    app.selectbox(key="hw_kind_(blank)").set_value("accelerator")
    app.button[0].click().run()
    assert not app.exception and not app.error
    assert any("Added acme-x1" in s.value for s in app.success)
    assert any("acme-x1 is predicted on tier datasheet" in c.value and "Acme is a vendor no engine file lists"
               in c.value for c in app.caption)
    app.sidebar.radio(key="page").set_value("Workload").run()
    assert not app.exception and not app.error
    frame = table(app, "device").set_index("device")
    assert frame.loc["acme-x1", "tier"] == "datasheet" and frame.loc["acme-x1", "latency (ms)"] > 0
    # the H100 beside it is on a profile's tier: the page says the tiers differ
    assert any("devices on different tiers" in c.value for c in app.caption)
