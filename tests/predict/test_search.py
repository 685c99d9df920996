"""planner.predict.search: the smallest deployment that fits, checked against an exhaustive search."""

import pytest

from planner.predict import Request, predict
from planner.predict.search import PP_DEPTHS, smallest_fit, throughput_of


def _every_layout_fails(req: Request, gpus: int) -> bool:
    """Brute force: no (tp, pp) on `gpus` devices fits (tp up to the node, powers of two)."""
    for tp in (1, 2, 4, 8):
        for pp in PP_DEPTHS:
            if tp * pp > gpus or gpus % (tp * pp):
                continue
            try:
                p = predict(Request(req.model, req.device, req.mode, gpus=gpus, tp=tp, pp=pp, batch=req.batch,
                                    input_len=req.input_len, output_len=req.output_len, seq_len=req.seq_len,
                                    micro_batch=req.micro_batch, recompute=req.recompute, zero=req.zero))
            except Exception:  # noqa: BLE001 - a layout the model does not allow is not a fit
                continue
            if p.fits:
                return False
    return True


def test_a_model_that_fits_on_one_device_stays_on_one():
    found = smallest_fit(Request("llama-3.1-8b", "h100-sxm", batch=8, input_len=1024, output_len=256))
    assert found is not None and found.request.gpus == 1 and found.prediction.fits


def test_llama_70b_on_l4_needs_eight_and_no_layout_of_four_fits():
    # 70.6e9 parameters x 2 bytes = 141 GB of bf16 weights: over 4 L4s (4 x 23.2 GB usable) they cannot fit
    # whatever the layout; over 8 (17.6 GB of weights each) they do
    req = Request("llama-3.1-70b", "l4", batch=8, input_len=1024, output_len=256)
    found = smallest_fit(req)
    assert found is not None and found.request.gpus == 8 and found.prediction.fits
    assert found.request.tp * found.request.pp == 8
    assert _every_layout_fails(req, 4)


def test_training_70b_count_is_minimal_by_brute_force():
    req = Request("llama-3.1-70b", "h100-sxm", "training", seq_len=4096, micro_batch=1, recompute="full", zero=1)
    found = smallest_fit(req)
    assert found is not None and found.prediction.fits
    assert _every_layout_fails(req, found.request.gpus // 2)
    # the fastest fitting layout at that count is returned
    gpus = found.request.gpus
    others = []
    for tp in (1, 2, 4, 8):
        for pp in PP_DEPTHS:
            if tp * pp <= gpus and gpus % (tp * pp) == 0:
                p = predict(Request(req.model, req.device, "training", gpus=gpus, tp=tp, pp=pp, seq_len=4096,
                                    micro_batch=1, recompute="full", zero=1))
                if p.fits:
                    others.append(throughput_of(p))
    assert throughput_of(found.prediction) == pytest.approx(max(others))


def test_nothing_fits_below_the_limit_is_none():
    assert smallest_fit(Request("llama-3.1-405b", "l4", batch=1, input_len=512, output_len=16), max_gpus=8) is None


def test_filled_copies_use_every_device_of_the_rented_instance():
    # llama-3.1-70b fits on 2 H100s (tp 2); the cheapest instance holding 2 has 8: 8 // 2 = 4 copies,
    # 4x the tokens/s at the same $/h, so no billed device sits idle
    from planner.predict.search import filled
    fit = smallest_fit(Request("llama-3.1-70b", "h100-sxm", batch=8, input_len=1024, output_len=256))
    wide = filled(fit)
    assert fit.request.gpus == 2 and fit.request.tp == 2
    assert wide.request.gpus == 8 and wide.request.tp == 2
    assert wide.prediction.cost.usd_per_h == fit.prediction.cost.usd_per_h
    assert throughput_of(wide.prediction) == pytest.approx(4 * throughput_of(fit.prediction), rel=1e-9)
    training = smallest_fit(Request("llama-3.1-8b", "h100-sxm", "training", seq_len=2048, micro_batch=1))
    assert filled(training) is training  # training is priced as whole nodes instead (planner/predict/training.py)
