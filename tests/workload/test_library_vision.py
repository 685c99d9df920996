"""torchvision detection/segmentation and timm classifiers built by their own libraries' code on meta
(planner_models.tv, planner_models.timm_models): exact parameter counts, FLOP against torchvision's
published figures, no unsupported op, config validation."""

import json

import pytest
import torch

from planner.errors import ConfigError
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import classify, count
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve
from planner_models.tv_ops import import_torchvision

try:
    torchvision = import_torchvision()  # before timm, which imports it
except ImportError:
    pytest.skip("torchvision is not installed (pip install 'planner[zoo]')", allow_module_level=True)
timm = pytest.importorskip("timm")

# Published parameter counts, exact: torchvision's weights metadata (`get_weight(w).meta["num_params"]`,
# the "Params" column of pytorch.org/vision/stable/models.html). The timm models are the architectures of
# these torchvision weights (timm's model cards give the same counts rounded to 0.1 M: 88.6, 5.3, 19.3, 87.8
# and 304.3 M at huggingface.co/timm/<model>).
PUBLISHED = {
    "fasterrcnn-resnet50-fpn": (41_755_286, "FasterRCNN_ResNet50_FPN_Weights.COCO_V1"),
    "retinanet-resnet50-fpn": (34_014_999, "RetinaNet_ResNet50_FPN_Weights.COCO_V1"),
    "maskrcnn-resnet50-fpn": (44_401_393, "MaskRCNN_ResNet50_FPN_Weights.COCO_V1"),
    "deeplabv3-resnet50": (42_004_074, "DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1"),
    "ssd300-vgg16": (35_641_826, "SSD300_VGG16_Weights.COCO_V1"),
    "convnext-base": (88_591_464, "ConvNeXt_Base_Weights.IMAGENET1K_V1"),
    "efficientnet-b0": (5_288_548, "EfficientNet_B0_Weights.IMAGENET1K_V1"),
    "efficientnet-b4": (19_341_616, "EfficientNet_B4_Weights.IMAGENET1K_V1"),
    "swin-base": (87_768_224, "Swin_B_Weights.IMAGENET1K_V1"),
    "vit-l-16": (304_326_632, "ViT_L_16_Weights.IMAGENET1K_V1"),
}
TIMM_CARD_MILLIONS = {"convnext-base": 88.6, "efficientnet-b0": 5.3, "efficientnet-b4": 19.3, "swin-base": 87.8,
                      "vit-l-16": 304.3}
DETECTION = ("fasterrcnn-resnet50-fpn", "retinanet-resnet50-fpn", "maskrcnn-resnet50-fpn", "deeplabv3-resnet50",
             "ssd300-vgg16")
CLASSIFIERS = ("convnext-base", "efficientnet-b0", "efficientnet-b4", "swin-base", "vit-l-16")


@pytest.fixture(scope="module")
def forward():
    """Zoo id -> (WorkloadGraph, Counts) of one image at the config's default size, captured once."""
    found = {}
    for model_id in PUBLISHED:
        wg = build_graph(resolve(model_id), Workload("forward", 1))
        found[model_id] = (wg, count(wg.graph))
    return found


def _weights(model_id: str):
    return torchvision.models.get_weight(PUBLISHED[model_id][1])


def _torchvision_pretrained(model_id: str, monkeypatch) -> torch.nn.Module:
    # torchvision's own builder on its published weights, with the weight download and loading stubbed
    # out: the module torchvision makes for those weights (FrozenBatchNorm2d, frozen layers, aux head)
    from torchvision.models._api import WeightsEnum

    monkeypatch.setattr(WeightsEnum, "get_state_dict", lambda self, *a, **k: {})
    monkeypatch.setattr(torch.nn.Module, "load_state_dict", lambda self, *a, **k: None)
    with torch.device("meta"):
        return torchvision.models.get_model(_raw(model_id)["model"], weights=_weights(model_id))


def _raw(model_id: str) -> dict:
    import planner_models

    return planner_models.zoo_config(model_id)


def _signature(module: torch.nn.Module) -> list:
    return sorted((name, tuple(p.shape), p.requires_grad) for name, p in module.named_parameters())


@pytest.mark.parametrize("model_id", DETECTION)
def test_detection_parameters_equal_torchvision_pretrained_build_and_published(model_id, forward, monkeypatch):
    wg, _ = forward[model_id]
    direct = _torchvision_pretrained(model_id, monkeypatch)
    published, _ = PUBLISHED[model_id]
    assert wg.params == sum(p.numel() for p in direct.parameters()) == published
    assert published == _weights(model_id).meta["num_params"]
    with torch.device("meta"):
        ours = resolve(model_id).build()
    assert _signature(ours) == _signature(direct)  # same names, shapes and frozen layers


def test_plain_batchnorm_would_not_match_the_published_count():
    # torchvision's builder without weights uses nn.BatchNorm2d (affine parameters): 53,120 more
    with torch.device("meta"):
        plain = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    assert sum(p.numel() for p in plain.parameters()) == 41_808_406


@pytest.mark.parametrize("model_id", CLASSIFIERS)
def test_timm_parameters_equal_timm_build_and_published(model_id, forward):
    wg, _ = forward[model_id]
    raw = _raw(model_id)
    with torch.device("meta"):
        direct = timm.create_model(raw["model"], pretrained=False, num_classes=raw["num_classes"])
    published, _ = PUBLISHED[model_id]
    assert wg.params == sum(p.numel() for p in direct.parameters()) == published
    assert published == _weights(model_id).meta["num_params"]
    assert round(published / 1e6, 1) == TIMM_CARD_MILLIONS[model_id]


def test_fasterrcnn_flop_within_5_percent_of_torchvision(forward):
    """torchvision publishes 134.38 "GFLOPS" for FasterRCNN_ResNet50_FPN_Weights.COCO_V1 (weights meta
    "_ops"; pytorch.org/vision/stable/models.html), computed by the script of pytorch/vision PR #6936 with
    a dispatch-level FLOP counter. Its unit is giga multiply-adds: ResNet50_Weights.IMAGENET1K_V1 has
    "_ops" 4.089, the 4.09 G multiply-adds of ResNet-50 at 224 pixels, which planner (2 FLOP per
    multiply-add) counts as 8.18 GFLOP (checked below). The image is 800 x 800, what the transform makes
    of a square image (min_size 800), with 1000 RPN proposals (rpn_post_nms_top_n_test):
        ResNet-50 body: 4.09 G x (800 / 224)^2                                           = 52.2 G
        FPN: 3x3 256->256 on 200^2 + 100^2 + 50^2 + 25^2 = 53,125 positions x 589,824 = 31.3 G
             plus the 1x1 laterals (256, 512, 1024, 2048 -> 256)                           =  4.9 G
        RPN head: 3x3 256->256 on 53,125 + 13^2 positions (+ its 1x1 outputs)             = 31.6 G
        box head: 1000 RoIs x (12,544 x 1024 + 1024 x 1024 + 1024 x 455)                   = 14.4 G
                                                                                     total = 134.4 G
    so planner should count 2 x 134.38 = 268.76 GFLOP (plus elementwise work and roi_align, < 1%).
    """
    _, counts = forward["fasterrcnn-resnet50-fpn"]
    published = 2 * _weights("fasterrcnn-resnet50-fpn").meta["_ops"] * 1e9
    assert published == pytest.approx(268.76e9)
    assert abs(counts.total.flop / published - 1) < 0.05
    resnet = count(build_graph(resolve("resnet50"), Workload("forward", 1)).graph).total.flop
    resnet_ops = torchvision.models.get_weight("ResNet50_Weights.IMAGENET1K_V1").meta["_ops"]  # 4.089
    assert abs(resnet / (2 * resnet_ops * 1e9) - 1) < 0.01


@pytest.mark.parametrize("model_id", [m for m in PUBLISHED if m != "fasterrcnn-resnet50-fpn"])
def test_flop_within_5_percent_of_torchvision(model_id, forward):
    """2 x torchvision's "_ops" (giga multiply-adds, see above) at the config's image size: RetinaNet and
    Mask R-CNN at 800, SSD300 at 300, DeepLabV3 at 520 (its preset's resize), the classifiers at their
    crop (EfficientNet-B4: 380). torchvision's Mask R-CNN figure equals Faster R-CNN's, 134.38: measured on
    an input with no detection, the mask head never ran; planner runs it on 100 detections per image,
    so it is compared without the mask head's modules."""
    _, counts = forward[model_id]
    flop = counts.total.flop
    if model_id == "maskrcnn-resnet50-fpn":
        table = counts.table("module")
        mask = table[table.index.str.startswith("roi_heads.mask_")]["flop"].sum()
        assert mask > 0.25 * flop
        flop -= mask
    published = 2 * _weights(model_id).meta["_ops"] * 1e9
    assert abs(flop / published - 1) < 0.05, (flop, published)


@pytest.mark.parametrize("model_id", list(PUBLISHED))
def test_forward_has_no_unsupported_op(model_id, forward):
    assert forward[model_id][1].unsupported == ()


@pytest.mark.parametrize("model_id", list(DETECTION) + list(CLASSIFIERS))
def test_training_step_has_no_unsupported_op(model_id):
    # DeepLabV3 trains on >= 2 images (its ASPP pooling BatchNorm); small images keep this quick
    batch, image = (2, 128) if model_id == "deeplabv3-resnet50" else (1, None)
    wg = build_graph(resolve(model_id), Workload("training", batch, image_size=image, optimizer="fused"))
    counts = count(wg.graph)
    assert counts.unsupported == ()
    phases = {r.phase for r in wg.graph.records}
    assert phases == {"forward", "backward", "optimizer"}
    if model_id in ("fasterrcnn-resnet50-fpn", "maskrcnn-resnet50-fpn"):
        packets = {r.packet for r in wg.graph.records}
        assert "torchvision._roi_align_backward" in packets  # gradients flow through RoI pooling


def test_fasterrcnn_training_fixed_counts_and_frozen_layers():
    # 512 sampled RoIs per image (box_batch_size_per_image) into the box head; conv1 and layer1 frozen
    wg = build_graph(resolve("fasterrcnn-resnet50-fpn"), Workload("training", 2, optimizer="fused"))
    pools = [r for r in wg.graph.records if r.packet == "torchvision.roi_align"]
    assert [p.outputs[0].shape for p in pools] == [(2 * 512, 256, 7, 7)]
    updated = sum(t.numel for r in wg.graph.records if r.packet == "aten._fused_adamw_" for t in r.arg("self"))
    with torch.device("meta"):
        module = resolve("fasterrcnn-resnet50-fpn").build()
    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    assert updated == trainable < wg.params


def test_rcnn_inference_fixed_counts(forward):
    # 1000 proposals into the box head, 100 detections into the mask head (14x14 RoIs)
    wg, _ = forward["maskrcnn-resnet50-fpn"]
    pools = [r.outputs[0].shape for r in wg.graph.records if r.packet == "torchvision.roi_align"]
    assert pools == [(1000, 256, 7, 7), (100, 256, 14, 14)]


def test_roi_align_formula():
    # out [1000, 256, 7, 7] with sampling_ratio 2: 4 samples x 4 taps (8 FLOP) + a divide per element
    x, rois, out = TensorMeta((1, 256, 200, 200), "bfloat16", 16, 256 * 200 * 200), \
        TensorMeta((1000, 5), "bfloat16", 16, 5000), TensorMeta((1000, 256, 7, 7), "bfloat16", 16, 1000 * 256 * 49)
    rec = OpRecord("torchvision.roi_align.default", "torchvision.roi_align", "", "forward",
                   (("input", x), ("rois", rois), ("spatial_scale", 0.25), ("pooled_height", 7), ("pooled_width", 7),
                    ("sampling_ratio", 2), ("aligned", False)), (out,), (), False)
    category, cost = classify(rec, False)
    n = 1000 * 256 * 49
    assert category == "pool"
    assert cost.flop == n * 33
    assert cost.bytes_read == min(4 * n, 256 * 200 * 200) * 2 + 5000 * 2
    assert cost.bytes_written == n * 2


def test_images_are_padded_to_a_multiple_of_32():
    # GeneralizedRCNNTransform's batch_images: 1000 pixels -> a 1024-pixel batch into the backbone
    wg = build_graph(resolve("retinanet-resnet50-fpn"), Workload("forward", 1, image_size=1000))
    first = next(r for r in wg.graph.records if r.packet == "aten.convolution")
    assert first.arg("input").shape == (1, 3, 1024, 1024)


@pytest.mark.parametrize("model_id,size", [("swin-base", 256), ("vit-l-16", 384), ("ssd300-vgg16", 512)])
def test_fixed_size_models_refuse_other_sizes(model_id, size):
    with pytest.raises(ConfigError, match="image_size"):
        build_graph(resolve(model_id), Workload("forward", 1, image_size=size))


def test_deeplabv3_training_needs_two_images():
    with pytest.raises(ConfigError, match="batch"):
        build_graph(resolve("deeplabv3-resnet50"), Workload("training", 1, image_size=64))


def test_image_size_follows_the_workload():
    wg = build_graph(resolve("efficientnet-b4"), Workload("forward", 1, image_size=320))
    assert wg.workload.image_size == 320
    first = next(r for r in wg.graph.records if r.packet == "aten.convolution")
    assert first.arg("input").shape == (1, 3, 320, 320)


@pytest.mark.parametrize("builder,raw,field", [
    ("torchvision", {"model": "os.system"}, "model"),
    ("torchvision", {"model": "fasterrcnn_resnet50_fpn", "num_classes": 1}, "num_classes"),
    ("torchvision", {"model": "fasterrcnn_resnet50_fpn", "num_classes": True}, "num_classes"),
    ("torchvision", {"model": "fasterrcnn_resnet50_fpn", "image_size": 8}, "image_size"),
    ("torchvision", {"model": "ssd300_vgg16", "image_size": 512}, "image_size"),
    ("torchvision", {"model": "fasterrcnn_resnet50_fpn", "weights": "COCO_V1"}, "weights"),
    ("timm", {"model": "resnet50d"}, "model"),
    ("timm", {"model": "convnext_base", "num_classes": "1000"}, "num_classes"),
    ("timm", {"model": "vit_large_patch16_224", "image_size": 384}, "image_size"),
    ("timm", {"model": "convnext_base", "pretrained": True}, "pretrained"),
    ("timm", {"model": "convnext_base", "planner_source": 3}, "planner_source"),
])
def test_bad_fields_are_named_with_valid_values(tmp_path, builder, raw, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"planner_builder": builder, **raw}))
    with pytest.raises(ConfigError, match=f"'{field}'") as info:
        resolve(str(path))
    if field == "model":
        assert ("fasterrcnn_resnet50_fpn" if builder == "torchvision" else "convnext_base") in str(info.value)


def test_zoo_configs_carry_source_date_and_builder():
    for model_id in PUBLISHED:
        raw = _raw(model_id)
        assert raw["planner_builder"] in ("torchvision", "timm")
        assert raw["planner_source"].startswith("https://")
        assert raw["planner_date"] == "2026-11-26"
