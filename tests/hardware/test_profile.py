"""The fitted efficiency model: reproduces its measurements, interpolates, transfers, reports tiers."""

import math

import numpy as np
import pytest

from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import DatasheetEfficiency, load_defaults, wave_efficiency
from planner.hardware.fit_report import fit_report
from planner.hardware.interpolate import Interpolator
from planner.hardware.profile import Profile, load_profiles, profile_device
from planner.hardware.profile_select import efficiency_for
from planner.predict.context import Context, default_context
from planner.predict.ops import gemm_record
from planner.predict.roofline import op_time
from planner.workload.engines import get_engine

ETA = 0.7  # the synthetic device runs every GEMM at 70% of peak after wave quantization


def _synthetic(device_id: str, eta: float = ETA) -> Profile:
    """A profile of a catalog GPU whose GEMMs take exactly ideal / (eta x wave efficiency)."""
    cat = load_catalog()
    dev = cat.device(device_id)
    kind = load_defaults().kinds["gpu"]
    peak, bw = dev.peak("bf16"), dev.mem_bytes_per_s
    ms = []
    for m in (64, 256, 1024, 4096):
        for n in (256, 1024, 4096, 16384):
            for k in (256, 1024, 4096):
                flop, nbytes = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
                ideal = max(flop / peak, nbytes / bw)
                t = ideal / (eta * wave_efficiency((1, m, n, k), kind, dev))
                ms.append({"kind": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "flop": flop, "bytes": nbytes,
                           "time_s": t})
    for e in (20, 24, 28):
        ms.append({"kind": "copy", "dtype": "fp32", "bytes": 2.0**e, "warm": False, "flop": 0.0,
                   "time_s": 2.0**e / (0.9 * bw)})
    raw = {"device_id": dev.id, "device_name": dev.name, "kind": "gpu", "properties": {},
           "ceilings": {"copy_bytes_per_s": 0.9 * bw, "gemm_bf16_flop_per_s": eta * peak, "launch_overhead_s": 0.0},
           "measurements": ms, "date": "2026-11-21T00:00:00+00:00"}
    raw["leave_one_out"] = fit_report(raw)
    return Profile(raw["device_id"], raw["device_name"], "gpu", {}, raw["ceilings"], tuple(ms), raw["date"], "test", raw)


def _ctx(*profiles: Profile) -> Context:
    base = default_context()
    return Context(base.catalog, base.defaults, base.power, {p.device_id: p for p in profiles})


def test_measured_tier_reproduces_measurements_and_interpolates():
    ctx = _ctx(_synthetic("h100-sxm"))
    h100 = ctx.device("h100-sxm")
    eff = ctx.efficiency(h100)
    assert eff.tier == "measured"
    kind = load_defaults().kinds["gpu"]
    for m, n, k in ((1024, 4096, 1024), (700, 3000, 1500), (100, 20000, 300)):
        rec, cat, cost = gemm_record(m, n, k, "bf16")
        ideal = max(cost.flop / h100.peak("bf16"), cost.bytes / h100.mem_bytes_per_s)
        expected = ideal / (ETA * wave_efficiency((1, m, n, k), kind, h100))
        assert op_time(rec, cat, cost, "bf16", h100, eff).time_s == pytest.approx(expected, rel=1e-6)


def test_leave_one_out_of_a_constant_efficiency_is_near_zero():
    report = _synthetic("h100-sxm").raw["leave_one_out"]
    assert report["n"] > 40 and report["p90_abs_error"] < 1e-6


def test_transfer_prefers_the_same_vendor_and_generation_and_widens_the_band():
    ctx = _ctx(_synthetic("h100-sxm"), _synthetic("mi300x", eta=0.4))
    h200 = ctx.device("h200-sxm")
    eff = ctx.efficiency(h200)
    assert eff.tier == "transferred" and eff.profile.device_id == "h100-sxm"
    measured = ctx.efficiency(ctx.device("h100-sxm"))
    assert measured.band_fraction < eff.band_fraction <= ctx.defaults.datasheet_band_fraction
    # the transferred efficiency (0.7 x wave) applies to the H200's own peak and SM count
    rec, cat, cost = gemm_record(4096, 4096, 4096, "bf16")
    kind = load_defaults().kinds["gpu"]
    ideal = max(cost.flop / h200.peak("bf16"), cost.bytes / h200.mem_bytes_per_s)
    assert op_time(rec, cat, cost, "bf16", h200, eff).time_s == pytest.approx(
        ideal / (ETA * wave_efficiency((1, 4096, 4096, 4096), kind, h200)), rel=1e-6)


def test_unprofiled_kind_is_datasheet_with_the_widest_band():
    ctx = _ctx(_synthetic("h100-sxm"))
    tpu = ctx.efficiency(ctx.device("tpu-v5e"))
    assert isinstance(tpu, DatasheetEfficiency) and tpu.tier == "datasheet"
    assert tpu.band_fraction >= ctx.efficiency(ctx.device("h200-sxm")).band_fraction


def test_op_predictions_on_unprofiled_devices_carry_a_wider_band():
    from planner.predict.ops import predict_op

    ctx = _ctx(_synthetic("h100-sxm"))
    own = predict_op("gemm", "h100-sxm", m=2048, n=2048, k=2048, dtype="bf16", ctx=ctx)
    near = predict_op("gemm", "h200-sxm", m=2048, n=2048, k=2048, dtype="bf16", ctx=ctx)
    far = predict_op("gemm", "mi300x", m=2048, n=2048, k=2048, dtype="bf16", ctx=ctx)
    # a transfer crosses no architecture: an MI300X is not predicted from a Hopper profile
    assert (own.tier, near.tier, far.tier) == ("measured", "transferred", "datasheet")
    assert own.band_fraction < near.band_fraction <= far.band_fraction


def test_committed_profiles_load_and_predict_in_their_own_tier():
    profiles = load_profiles()
    assert profiles, "a calibration profile is committed under hardware_specs/calibration/"
    ctx = default_context()
    for device_id, profile in profiles.items():
        device = profile_device(profile)
        assert device is not None and device.mem_bytes_per_s > 0
        eff = efficiency_for(device, ctx.defaults, ctx.profiles, DatasheetEfficiency(ctx.defaults))
        assert eff.tier == profile.tier == profiles.tier_of(device_id)
        assert 0 < eff.band_fraction < 1
        if profile.tier == "measured":
            for key in ("device_name", "properties", "versions", "date", "duration_s"):
                assert key in profile.raw, (device_id, key)
            assert math.isfinite(profile.raw["leave_one_out"]["median_abs_error"])
        else:  # published: provenance and the held-back band
            src = profile.raw["source"]
            assert src["license"] in ("Apache-2.0", "MIT") and len(src["commit"]) == 40 and src["tables"]
            # the held-back p90; the datasheet band where the profile lacks GEMM, attention or memory curves
            kinds = profile.raw["held_out"]["by_kind"]
            full = all(any(k.startswith(f) for k in kinds) for f in ("gemm", "attention", "memory"))
            assert eff.band_fraction == (profile.raw["held_out"]["p90_abs_error"] if full else
                                         max(profile.raw["held_out"]["p90_abs_error"], ctx.defaults.datasheet_band_fraction))


def test_the_grid_interpolation_is_scipys_multilinear_one():
    """interpolate.Grid returns what scipy's RegularGridInterpolator(method="linear") returns, at grid points
    and between them: on a 3 x 4 x 2 grid of f = 2a + 3b - c + ab (bilinear terms are reproduced exactly
    by multilinear interpolation), and at 500 random points of a random grid."""
    import numpy as np
    from scipy.interpolate import RegularGridInterpolator

    from planner.hardware.interpolate import Grid

    axes = [np.array([0.0, 1.0, 3.0]), np.array([-1.0, 0.0, 2.0, 5.0]), np.array([10.0, 12.0])]
    a, b, c = np.meshgrid(*axes, indexing="ij")
    grid = Grid(axes, 2 * a + 3 * b - c + a * b)
    # f(2, 1, 11) = 4 + 3 - 11 + 2 = -2, inside a cell
    assert grid((2.0, 1.0, 11.0)) == pytest.approx(-2.0)
    assert grid((3.0, 5.0, 12.0)) == pytest.approx(2 * 3 + 3 * 5 - 12 + 15)  # the upper corner
    rng = np.random.default_rng(1)
    axes = [np.sort(rng.uniform(0, 10, n)) for n in (5, 6, 4)]
    values = rng.normal(size=(5, 6, 4))
    grid, ref = Grid(axes, values), RegularGridInterpolator(axes, values, method="linear")
    for _ in range(500):
        q = np.array([rng.uniform(ax[0], ax[-1]) for ax in axes])
        assert grid(q) == pytest.approx(float(ref(q.reshape(1, -1))[0]), abs=1e-12)


def test_a_curve_read_for_one_device_is_carried_to_another_with_that_devices_wave_factor():
    """predict_eta reads the interpolated η of (key, features) once for every device (curve_memo_) and puts
    back each device's own wave factor: on the synthetic H100 profile a GEMM of 1000 x 3000 x 1500 gives
    η = 0.7 x wave(device) on the H100 (132 SMs) and on the L4 (58 SMs), whichever is asked first, and
    equal to a freshly fitted model's answer."""
    from planner.hardware.profile import ProfileModel

    profile, kind = _synthetic("h100-sxm"), load_defaults().kinds["gpu"]
    cat = load_catalog()
    h100, l4 = cat.device("h100-sxm"), cat.device("l4")
    assert h100.compute_units != l4.compute_units
    feats, shape = (math.log2(1000), math.log2(3000), math.log2(1500)), (1, 1000, 3000, 1500)
    first_h100 = ProfileModel(kind).fit(profile, h100)
    first_l4 = ProfileModel(kind).fit(profile, h100)
    a = [first_h100.predict_eta("gemm:bf16", feats, shape, d) for d in (h100, l4)]
    b = [first_l4.predict_eta("gemm:bf16", feats, shape, d) for d in (l4, h100)][::-1]
    assert a == b
    for eta, dev in zip(a, (h100, l4)):
        assert eta == pytest.approx(ETA * wave_efficiency(shape, kind, dev), rel=1e-6)
    assert a[0] != pytest.approx(a[1], rel=1e-3)  # the wave factors differ: the memo did not carry one over


@pytest.mark.parametrize("dims", [2, 3, 4, 5, 6])
def test_idw_distances_by_column_equal_the_row_sums_to_the_last_bit(dims):
    # IDW accumulates squared distances one feature at a time; numpy sums a row of fewer than 8 values in
    # the same order, so the interpolated values equal those of sqrt(((x - q)^2).sum(axis=1)) exactly
    from planner.hardware.interpolate import IDW

    rng = np.random.default_rng(dims)
    x, y = rng.random((3000, dims)) * 12, rng.random(3000)
    idw = IDW(x, y)

    def reference(q):
        d = np.sqrt(((idw.x - q / idw.scale) ** 2).sum(axis=1))
        near = np.argpartition(d, idw.k - 1)[: idw.k]
        idx = near[np.argsort(d[near])]
        w = 1.0 / d[idx] ** 2
        return float((w * idw.y[idx]).sum() / w.sum())

    for _ in range(300):
        q = rng.random(dims) * 12
        assert idw(q) == reference(q)


def test_a_memory_bound_curve_takes_the_lower_envelope_of_its_time_in_bytes():
    # knots at 1, 2 and 4 kiB (x = log2 bytes 10, 11, 12) with eta 0.1, 0.3, 0.35: time in units of bytes / eta
    # 10,240, 6,826.7 and 11,702.9 -- the 1 kiB kernel read slower than the 2 kiB one. The envelope gives every
    # size at most the least time of a knot above it:
    #   x 10:   eta 1,024 / 6,826.7 = 0.15 (raw 0.1)
    #   x 10.5: raw eta sqrt(0.1 x 0.3) = 0.1732, time 1,448.2 / 0.1732 = 8,361 > 6,826.7: 1,448.2 / 6,826.7 = 0.2121
    #   x 11.5: raw eta sqrt(0.3 x 0.35) = 0.3240, time 2,896.3 / 0.3240 = 8,938 < 11,702.9: raw
    x = np.array([[10.0], [11.0], [12.0]])
    y = np.log([0.1, 0.3, 0.35])
    curve = Interpolator(x, y, linear=False, monotone_bytes=True)
    assert math.exp(curve((10.0,))) == pytest.approx(1024 / (2048 / 0.3))
    assert math.exp(curve((10.5,))) == pytest.approx(2 ** 10.5 / (2048 / 0.3))
    assert math.exp(curve((11.0,))) == pytest.approx(0.3)
    assert math.exp(curve((11.5,))) == pytest.approx(math.sqrt(0.3 * 0.35))
    assert math.exp(Interpolator(x, y, linear=False)((10.0,))) == pytest.approx(0.1)  # a curve without: raw
    times = [2 ** q / math.exp(curve((q,))) for q in np.linspace(8, 14, 601)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:]))


def test_a_batched_gemv_without_a_bmm_curve_reads_the_gemm_curve_at_its_own_bytes():
    # DeepSeek's latent attention at decode: [16, 1, 128] x [16, 128, 512] bf16, 16 weight matrices of 128 x 512.
    # A profile without a bmm curve reads it as one GEMM of 1 row against their concatenation [128, 16 x 512]:
    # features log2 (1, 8,192, 128) = (0, 13, 7), the same FLOP (2 x 16 x 128 x 512) and weight bytes. Read as
    # 16 rows against one [128, 512] it took a B200 69 us for 599 kB (an efficiency of a GEMM 1/16 its bytes).
    from planner.hardware.profile_select import _op_key
    from planner.workload.capture import OpRecord, TensorMeta
    from planner.workload.counting import classify

    def t(*shape):
        return TensorMeta(shape, "bfloat16", 16, math.prod(shape))

    rec = OpRecord("aten.bmm.default", "aten.bmm", "", "decode", (("self", t(16, 1, 128)), ("mat2", t(16, 128, 512))),
                   (t(16, 1, 512),), (), False)
    category, _ = classify(rec, False)
    key, feats, wave = _op_key(rec, category, "bf16", {"gemm:bf16": None})
    assert key == "gemm:bf16" and feats == (0.0, 13.0, 7.0) and wave == (1, 1, 8192, 128)
    # with a bmm curve it is read there, at (b, m, n, k)
    assert _op_key(rec, category, "bf16", {"bmm": None, "gemm:bf16": None})[0] == "bmm"
    # a prefill bmm of 1,024 rows ([16, 1,024, 128] x [16, 128, 512]) the same way: log2 (1,024, 8,192, 128)
    rec2 = OpRecord("aten.bmm.default", "aten.bmm", "", "forward",
                    (("self", t(16, 1024, 128)), ("mat2", t(16, 128, 512))), (t(16, 1024, 512),), (), False)
    assert _op_key(rec2, category, "bf16", {"gemm:bf16": None})[1] == (10.0, 13.0, 7.0)
    # and a B200 times the decode bmm at no less than its roofline, within a few microseconds
    ctx = default_context()
    device = ctx.device("b200")
    eff = ctx.efficiency(device, (("aiconfigurator",), ()))
    cost = classify(rec, False)[1]
    time_s = op_time(rec, category, cost, "bf16", device, eff).time_s
    assert cost.bytes / device.mem_bytes_per_s <= time_s < 20e-6


def _conv_record(cin: int, cout: int, k: int, stride: int, n: int = 32, hw: int = 56):
    """The aten.convolution record of a bf16 conv at inference, captured on meta tensors."""
    import torch
    from torch import nn

    from planner.workload.capture import capture
    conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False).to(device="meta", dtype=torch.bfloat16)
    x = torch.empty(n, cin, hw, hw, device="meta", dtype=torch.bfloat16)

    def run(_cap):
        with torch.no_grad():
            conv(x)

    graph = capture(run, torch.bfloat16, 16, "bf16", parameters=tuple(conv.parameters()))
    return next(r for r in graph.records if r.packet == "aten.convolution")


def test_a_channels_last_conv_read_off_an_nchw_profile_sheds_its_layout_transforms():
    # The H100's eager ResNet-50 training trace (batch 32, bf16; benchmarks/data/traces, summarized in
    # planner/hardware/profile_select.py) runs the 3x3 64 -> 64 conv on 56x56 maps as 24 us of sm90 NHWC fprop
    # kernel between 22 us of nchwToNhwc / nhwcToNchw transforms: 46 us as eager calls it, 24 us channels-last.
    # Eager's profile predicts the first; the same record named "[NHWC]" (as kernel_rules names compile's
    # convolutions) the second, each within the profile tier's band
    from dataclasses import replace

    from planner.workload.counting import classify
    ctx = default_context()
    h100 = ctx.catalog.device("h100-sxm")
    eff = ctx.efficiency(h100, get_engine("compile").libraries)
    assert eff.profile.library == "pytorch-eager"
    rec = _conv_record(64, 64, 3, 1)
    nhwc = replace(rec, op=rec.op.replace("convolution", "convolution[NHWC]"))
    cost = classify(rec, False)[1]
    eager_s = op_time(rec, "conv", cost, "bf16", h100, eff).time_s
    nhwc_s = op_time(nhwc, "conv", cost, "bf16", h100, eff).time_s
    assert eager_s == pytest.approx(46e-6, rel=eff.band_fraction)
    assert nhwc_s == pytest.approx(24e-6, rel=eff.band_fraction)
    # never faster than the roofline: max(FLOP / peak, bytes / bandwidth)
    assert nhwc_s >= max(cost.flop / h100.peak("bf16"), cost.bytes / h100.mem_bytes_per_s)
    # a 1x1 stride-1 conv runs as a GEMM on NCHW tensors (no transform to shed); a datasheet-tier device is
    # untouched
    one = _conv_record(256, 64, 1, 1)
    one_nhwc = replace(one, op=one.op.replace("convolution", "convolution[NHWC]"))
    assert eff.efficiencies(one_nhwc, "conv", h100) == eff.efficiencies(one, "conv", h100)
    l4 = ctx.catalog.device("l4")
    sheet = ctx.efficiency(l4, get_engine("compile").libraries)
    assert sheet.efficiencies(nhwc, "conv", l4) == sheet.efficiencies(rec, "conv", l4)


def test_compiled_norms_stream_at_the_datasheet_rate_not_eagers_batch_norm_kernels():
    # compile's cross-library scope leaves out "norm": Inductor's Triton reductions are not eager's NCHW
    # batch norm kernels; a norm takes the datasheet tier (half the vector peak, 0.90 of the bandwidth)
    ctx = default_context()
    h100 = ctx.catalog.device("h100-sxm")
    compiled = ctx.efficiency(h100, get_engine("compile").libraries)
    eager = ctx.efficiency(h100, get_engine("eager").libraries)
    rec = _conv_record(64, 64, 3, 1)  # stands in for any record: the category decides
    assert compiled.efficiencies(rec, "norm", h100) == DatasheetEfficiency(ctx.defaults).efficiencies(rec, "norm", h100)
    assert compiled.efficiencies(rec, "elementwise", h100) == eager.efficiencies(rec, "elementwise", h100)
