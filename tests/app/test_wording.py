"""The library's command-line wording in the app's words (planner/app/wording.py app_words)."""

import re

import pytest

from planner.app.wording import FLAGS, app_words
from planner.predict import Request
from planner.predict.api import predict

IDLE = ("cost pays for 4 idle h100-sxm of the whole instance rented (1 x lambda:gpu_8x_h100_sxm5:all on_demand); "
        "more replicas (--dp) or `planner compare`, which fills the instance, use them")


def test_a_half_used_instance_says_plainly_that_the_other_gpus_sit_idle_but_are_paid_for():
    text = app_words(IDLE)
    assert text.startswith("the other 4 GPUs of the instance sit idle but are paid for")
    assert "1 x lambda:gpu_8x_h100_sxm5:all on_demand" in text and "data parallel" in text
    assert "--" not in text and "planner compare" not in text


def test_idle_devices_over_several_instances_and_one_idle_device_read_right():
    many = app_words(IDLE.replace("instance rented", "instances rented").replace("4 idle", "12 idle"))
    assert many.startswith("12 GPUs of the instances sit idle but are paid for")
    one = app_words(IDLE.replace("4 idle", "1 idle"))
    assert one.startswith("the other 1 GPU of the instance sits idle but is paid for") and "use it," in one


@pytest.mark.parametrize("note, words", [
    ("no catalog instance holds 3 x l4: no cost (pass --site for on-prem)", "choose an on-prem site"),
    ("engine megatron (from --engine; --engine to change): fusions pointwise", "engine megatron (the Engine chosen)"),
    ("engine vllm (the default for LLM inference on a GPU; --engine to change): fusions",
     "the Engine input changes it"),
    ("mixed precision master (--mixed-precision): 16-bit weights", "mixed precision master (Mixed precision)"),
    ("--tp 3 does not divide the 32 attention heads; valid: 1, 2, 4", "TP 3 does not divide"),
    ("--gpus 12 != tp x pp x dp = 8", "GPUs 12 != tp x pp x dp = 8"),
    ("1 accumulation step per optimizer step; set --micro-batch to override", "set the Micro-batch to override"),
    ("a 2-device group cannot be timed; give the network per device with --scaleout-gbps (Gb/s per direction)",
     "per device with scale-out bandwidth (Gb/s per direction)"),
    ("grid: axis 'x' is not a --configs key; valid: batch", "is not a sweep axis"),
])
def test_notes_name_the_pages_controls_not_flags(note, words):
    text = app_words(note)
    assert words in text and not re.search(r"--[a-z]", text), text


def test_other_tools_flags_and_plain_text_are_left_as_they_are():
    megatron = "the updated master cast back each step (Megatron-LM --bf16, FSDP MixedPrecision)"
    assert app_words(megatron) == megatron  # Megatron's own flag, not planner's
    assert app_words("vLLM (--dtype half) runs them") == "vLLM (its dtype half) runs them"
    plain = "memory-bound: 75% of each decode step in ops bound by memory bandwidth"
    assert app_words(plain) == plain
    assert app_words("") == ""


def test_every_note_of_real_predictions_loses_planners_flags():
    # the rewrites follow the library's own text: a note reworded there and not here fails this test
    notes = [*predict(Request("llama-3.1-8b", "h100-sxm", gpus=4, tp=4, batch=8, input_len=1024)).notes,
             *predict(Request("llama-3.1-8b", "h100-sxm", "training", gpus=8, seq_len=2048, micro_batch=1,
                              engine="megatron", train_tokens=1e9)).notes]
    assert any(n.startswith("cost pays for 4 idle") for n in notes)
    flags = re.compile(r"--(" + "|".join(map(re.escape, FLAGS)) + r")\b|`planner [a-z]+`")
    for note in notes:
        assert not flags.search(app_words(note)), app_words(note)
    assert any(app_words(n).startswith("the other 4 GPUs of the instance sit idle but are paid for") for n in notes)
