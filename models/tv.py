"""Builder "torchvision": detection and segmentation models built by torchvision's own code, on meta.

    {"planner_builder": "torchvision", "model": "fasterrcnn_resnet50_fpn", "num_classes": 91, "image_size": 800}

Models (MODELS): fasterrcnn_resnet50_fpn, maskrcnn_resnet50_fpn, retinanet_resnet50_fpn, ssd300_vgg16 and
deeplabv3_resnet50, all family "detection". Each is built with torchvision's constructors and modules
(weights=None: nothing is downloaded) but with the layers torchvision builds when pretrained weights are
given, so that the parameter count is torchvision's published `num_params`: the R-CNNs and RetinaNet
use FrozenBatchNorm2d in the ResNet-50 (statistics are buffers, not parameters; eps 0 as the COCO_V1
weights), with conv1 and layer1 frozen (trainable_backbone_layers=3); SSD300 freezes the first VGG
stage (trainable_backbone_layers=4); DeepLabV3 has its auxiliary FCN head (aux_loss=True, 21 classes).

Inputs: `batch` images of `image_size` x `image_size` pixels (defaults: 800 for the R-CNNs and
RetinaNet, 300 for SSD300, which only takes 300, 520 for DeepLabV3): the image as the network sees it,
after GeneralizedRCNNTransform's resize to min_size 800 (the resize is not modelled: a square image of
800 pixels is what that resize makes of any square image). The transform's normalization and its
padding to a multiple of 32 (SSD: of 1) run, with torchvision's own code.

Detection on meta tensors. The dense parts run with torchvision's own submodules: the transform's
normalize and batch_images, the backbone and FPN, rpn.head and rpn.anchor_generator, the box coder,
roi_heads.box_head, box_predictor, mask_head and mask_predictor, RetinaNet's and SSD's heads and anchor
generators. The data-dependent selection (score thresholds, remove_small_boxes, non-maximum
suppression) cannot run without data and is replaced by fixed counts, torchvision's defaults read from
the built model:
- Faster/Mask R-CNN: the RPN keeps pre_nms_top_n per level by score (1000 at inference, 2000 in
  training: torchvision's topk), then post_nms_top_n proposals per image (1000 at inference, 2000 in
  training) are kept by top-k score in place of NMS. RoI pooling runs on every proposal at inference
  and on box_batch_size_per_image = 512 sampled RoIs per image in training. At inference the
  box_detections_per_img = 100 best (box, class) scores per image are kept (top-k in place of the
  score threshold and per-class NMS) and go into the mask head; in training the mask head takes the
  positive RoIs, 512 x positive_fraction 0.25 = 128 per image.
- RetinaNet: per FPN level the topk_candidates = 1000 best (anchor, class) scores per image (no score
  threshold: every candidate passes), then detections_per_img = 300 of them in place of NMS.
- SSD300: softmax over classes, the topk_candidates = 400 best anchors per class, then
  detections_per_img = 200 per image in place of NMS.
- DeepLabV3 has nothing data dependent: torchvision's forward runs as is (both heads, upsampled to the
  input size; its input normalization belongs to torchvision's transforms preset, not to the model).
NMS itself is not counted: its work depends on how many boxes pass the thresholds (torchvision's CUDA
kernel computes n^2/2 IoUs: about 0.1 GFLOP for the ~4,700 RPN candidates of an 800-pixel image, under
0.1% of Faster R-CNN).
MultiScaleRoIAlign assigns each RoI to an FPN level by its size (data dependent); every RoI is pooled
here from the finest level its pooler uses. The level does not change the work: torchvision::roi_align
costs the same per RoI (output bins x sampling_ratio^2 bilinear samples) whichever map it samples, and
the RoIs' level mapping (a few elementwise ops per RoI) is left out. The masks are not pasted into the
image (transform.postprocess: a per-detection loop of data-dependent sizes).

Training: torchvision's training path matches anchors and proposals to ground-truth boxes (data
dependent); here the forward takes the fixed counts above and returns the head outputs, and the loss
is the sum over them of output.float().pow(2).mean(), so that every trainable parameter gets its
gradient and the backward runs through the same ops (proposals are detached, as torchvision detaches
them). DeepLabV3 trains with torchvision's reference objective: per-pixel cross entropy on "out" plus
0.5 x that of "aux" (references/segmentation/train.py), on integer label maps of num_classes.

torchvision::roi_align runs as an autograd Function calling torchvision's operator and its
_roi_align_backward (what torchvision's C++ autograd kernel does), so that it runs where torchvision's
compiled library does not load (planner_models.tv_ops then defines its schema and registers
torchvision's own meta kernels). Its cost formulas are in planner/workload/counting_library.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

MODELS = {
    # name: (default num_classes, default image_size, fixed image size or None, torchvision weights)
    "fasterrcnn_resnet50_fpn": (91, 800, None, "FasterRCNN_ResNet50_FPN_Weights.COCO_V1"),
    "maskrcnn_resnet50_fpn": (91, 800, None, "MaskRCNN_ResNet50_FPN_Weights.COCO_V1"),
    "retinanet_resnet50_fpn": (91, 800, None, "RetinaNet_ResNet50_FPN_Weights.COCO_V1"),
    "ssd300_vgg16": (91, 300, 300, "SSD300_VGG16_Weights.COCO_V1"),
    "deeplabv3_resnet50": (21, 520, None, "DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1"),
}
"""The models this builder makes (an allowlist: a config picks one by name, never code)."""
FIELDS = ("planner_builder", "planner_source", "planner_date", "model", "num_classes", "image_size")
MIN_IMAGE, MAX_IMAGE, MAX_CLASSES = 32, 8192, 100_000



def check_fields(raw: dict[str, Any], fields: tuple[str, ...]) -> None:
    """Raise ValueError naming any field of `raw` not in `fields`, or a planner_source/planner_date that is
    not a string."""
    unknown = sorted(str(k) for k in raw if k not in fields)
    if unknown:
        raise ValueError(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)}; "
                         f"valid: {', '.join(fields)}")
    for key in ("planner_source", "planner_date"):
        if key in raw and not isinstance(raw[key], str):
            raise ValueError(f"field '{key}' must be a string, got {type(raw[key]).__name__}")


def int_field(raw: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """Field `name` of `raw` (or `default`): an integer in [low, high], else ValueError naming it."""
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"field '{name}' is {str(value)[:40]!r}; valid: an integer from {low} to {high:,}")
    return value


def model_field(raw: dict[str, Any], models: dict) -> str:
    """Field "model" of `raw`: one of `models`, else ValueError listing them."""
    name = raw.get("model")
    if not isinstance(name, str) or name not in models:
        raise ValueError(f"field 'model' is {str(name)[:60]!r}; valid: {', '.join(models)}")
    return name


def parse(raw: dict[str, Any], origin: str) -> TorchvisionConfig:
    """The config of a torchvision detection or segmentation model; ValueError names a bad field."""
    check_fields(raw, FIELDS)
    name = model_field(raw, MODELS)
    classes, image, fixed, _ = MODELS[name]
    num_classes = int_field(raw, "num_classes", classes, 2, MAX_CLASSES)
    image_size = int_field(raw, "image_size", image, MIN_IMAGE, MAX_IMAGE)
    if fixed is not None and image_size != fixed:
        raise ValueError(f"field 'image_size' is {image_size}; {name} takes only {fixed}-pixel images")
    return TorchvisionConfig(model=name, num_classes=num_classes, image_size=image_size)


def _torchvision():
    from planner_models.library import LibraryMissingError
    from planner_models.tv_ops import import_torchvision

    try:
        tv = import_torchvision()
    except ImportError as exc:
        from planner_models.library import EXTRA
        raise LibraryMissingError(f"torchvision models need the Python package 'torchvision' ({exc}); "
                                  f"{EXTRA}") from None
    return tv


@dataclass(frozen=True, slots=True)
class TorchvisionConfig:
    """A torchvision detection or segmentation model."""

    model: str
    """One of MODELS."""
    num_classes: int
    """Classes including the background (91 for COCO detection, 21 for DeepLabV3's VOC labels)."""
    image_size: int
    """Default image side in pixels, as the network sees it (after the transform's resize)."""
    family: str = "detection"
    repeats: bool = False

    def build(self):
        """The module on the current default device: torchvision's model, wrapped for the detectors."""
        _torchvision()
        return build_module(self.model, self.num_classes)

    def sizes(self, workload) -> dict[str, int]:
        """{"image_size": pixels}; ValueError naming image_size when the model cannot take it."""
        image = workload.image_size or self.image_size
        fixed = MODELS[self.model][2]
        if fixed is not None and image != fixed:
            raise ValueError(f"image_size {image}: {self.model} takes only {fixed}-pixel images")
        if image < MIN_IMAGE:
            raise ValueError(f"image_size must be at least {MIN_IMAGE} pixels, got {image}")
        if self.model == "deeplabv3_resnet50" and workload.mode == "training" and workload.batch < 2:
            raise ValueError("batch must be at least 2 to train deeplabv3_resnet50 (the BatchNorm of its ASPP "
                             "image-pooling branch sees one value per channel per image)")
        return {"image_size": image}

    def inputs(self, module, workload, device, dtype):
        """((images [B, 3, S, S] in `dtype`,), {}, labels): labels are DeepLabV3's [B, S, S] class maps in
        training, else None."""
        b, s = workload.batch, workload.image_size
        if device == "meta":
            images = torch.empty((b, 3, s, s), dtype=dtype, device=device)
        else:
            images = torch.rand((b, 3, s, s), dtype=dtype, device=device)
        labels = None
        if self.model == "deeplabv3_resnet50" and workload.mode == "training":
            labels = (torch.empty((b, s, s), dtype=torch.long, device=device) if device == "meta"
                      else torch.randint(0, self.num_classes, (b, s, s), device=device))
        return (images,), {}, labels

    def loss(self, output, labels):
        """The training objective, a 0-d fp32 tensor: DeepLabV3's cross entropy (out + 0.5 aux); for the
        detectors, the sum of mean squares of the head outputs (see the module docstring)."""
        if isinstance(output, dict):  # DeepLabV3
            return F.cross_entropy(output["out"].float(), labels) + 0.5 * F.cross_entropy(output["aux"].float(), labels)
        return sum(o.float().pow(2).mean() for o in output)


# ---------------------------------------------------------------- construction, as torchvision's builders

def _resnet_fpn(**extra):
    # torchvision's ResNet-50 FPN backbone as its detection builders make it when weights are given
    from torchvision.models import resnet50
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.ops import misc

    return _resnet_fpn_extractor(resnet50(weights=None, norm_layer=misc.FrozenBatchNorm2d), 3, **extra)


def _pretrained_eps(model):
    from torchvision.models.detection._utils import overwrite_eps

    overwrite_eps(model, 0.0)  # what the builders do for the COCO_V1 weights
    return model


def fasterrcnn(num_classes: int):
    """torchvision's fasterrcnn_resnet50_fpn as built for its COCO_V1 weights (41,755,286 parameters)."""
    from torchvision.models.detection import FasterRCNN

    return _pretrained_eps(FasterRCNN(_resnet_fpn(), num_classes=num_classes))


def maskrcnn(num_classes: int):
    """torchvision's maskrcnn_resnet50_fpn as built for its COCO_V1 weights (44,401,393 parameters)."""
    from torchvision.models.detection import MaskRCNN

    return _pretrained_eps(MaskRCNN(_resnet_fpn(), num_classes=num_classes))


def retinanet(num_classes: int):
    """torchvision's retinanet_resnet50_fpn as built for its COCO_V1 weights (34,014,999 parameters)."""
    from torchvision.models.detection import RetinaNet
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    backbone = _resnet_fpn(returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
    return _pretrained_eps(RetinaNet(backbone, num_classes))


def ssd300(num_classes: int):
    """torchvision's ssd300_vgg16 as built for its COCO_V1 weights (35,641,826 parameters)."""
    from torchvision.models import vgg16
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD, _vgg_extractor

    backbone = _vgg_extractor(vgg16(weights=None), False, 4)
    anchors = DefaultBoxGenerator([[2], [2, 3], [2, 3], [2, 3], [2], [2]],
                                  scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05], steps=[8, 16, 32, 64, 100, 300])
    return SSD(backbone, anchors, (300, 300), num_classes, image_mean=[0.48235, 0.45882, 0.40784],
               image_std=[1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0])


def deeplabv3(num_classes: int):
    """torchvision's deeplabv3_resnet50 as built for its COCO_WITH_VOC_LABELS_V1 weights, auxiliary head
    included (42,004,074 parameters)."""
    from torchvision.models.segmentation import deeplabv3_resnet50

    return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=num_classes, aux_loss=True)


TORCHVISION = {"fasterrcnn_resnet50_fpn": fasterrcnn, "maskrcnn_resnet50_fpn": maskrcnn,
               "retinanet_resnet50_fpn": retinanet, "ssd300_vgg16": ssd300, "deeplabv3_resnet50": deeplabv3}
"""Name -> the torchvision module as torchvision builds it (what the wrappers below run)."""


# ---------------------------------------------------------------- the dense forward of each detector

class _RoIAlign(torch.autograd.Function):
    """torchvision::roi_align and, backward, torchvision::_roi_align_backward (as torchvision's C++
    autograd kernel runs them)."""

    @staticmethod
    def forward(ctx, x, rois, spatial_scale: float, output_size: tuple[int, int], sampling_ratio: int):
        ctx.save_for_backward(rois)
        ctx.args = (spatial_scale, output_size, sampling_ratio, tuple(x.shape))
        return torch.ops.torchvision.roi_align(x, rois, spatial_scale, *output_size, sampling_ratio, False)

    @staticmethod
    def backward(ctx, grad):
        (rois,) = ctx.saved_tensors
        spatial_scale, output_size, sampling_ratio, (b, c, h, w) = ctx.args
        grad_x = torch.ops.torchvision._roi_align_backward(grad, rois, spatial_scale, *output_size, b, c, h, w,
                                                           sampling_ratio, False)
        return grad_x, None, None, None, None


def _pool(pooler, features: dict, rois, images):
    """MultiScaleRoIAlign of `rois` [K, 5] with every RoI on the finest of the pooler's levels (see the
    module docstring): [K, C, h, w]."""
    fmap = features[pooler.featmap_names[0]]
    scale = 2.0 ** round(math.log2(fmap.shape[-1] / images.shape[-1]))  # torchvision's _infer_scale
    return _RoIAlign.apply(fmap, rois, scale, tuple(pooler.output_size), pooler.sampling_ratio)


def _batch(transform, images):
    """GeneralizedRCNNTransform without its resize: normalize, then pad into one batch (an ImageList)."""
    from torchvision.models.detection.image_list import ImageList

    x = transform.normalize(images)
    size = (x.shape[-2], x.shape[-1])
    return ImageList(transform.batch_images(list(x.unbind(0)), size_divisible=transform.size_divisible),
                     [size] * x.shape[0])


def _take(x, index):
    """x [B, N, ...] gathered at index [B, K] along N: [B, K, ...]."""
    return x[torch.arange(x.shape[0], device=x.device)[:, None], index]


def _rois(boxes):
    """[B, K, 4] boxes as roi_align's [B*K, 5] (batch index first), by torchvision's own conversion."""
    from torchvision.ops.poolers import _convert_to_roi_format

    return _convert_to_roi_format(list(boxes.unbind(0)))


def _clip(boxes, size):
    from torchvision.ops.boxes import clip_boxes_to_image

    return clip_boxes_to_image(boxes, size)


class RCNN(nn.Module):
    """Faster or Mask R-CNN with fixed proposal and detection counts (torchvision's submodules).

    forward(images [B, 3, S, S]) returns, at inference, (boxes [B, D, 4], scores [B, D], labels [B, D]) and
    for Mask R-CNN the mask probabilities [B*D, 1, 28, 28]; in training the head outputs (RPN objectness
    and box deltas per level, class logits, box deltas and Mask R-CNN's mask logits).
    """

    def __init__(self, model):
        super().__init__()
        self.transform, self.backbone, self.rpn, self.roi_heads = (model.transform, model.backbone, model.rpn,
                                                                   model.roi_heads)

    def proposals(self, objectness, deltas, anchors, per_level, size):
        """post_nms_top_n proposals per image [B, P, 4]: pre_nms_top_n per level by score, as torchvision's
        filter_proposals, then the top scores in place of NMS."""
        rpn, n = self.rpn, len(anchors)
        boxes = rpn.box_coder.decode(deltas.detach(), anchors).view(n, -1, 4)
        objectness = objectness.detach().reshape(n, -1)
        top = rpn._get_top_n_idx(objectness, per_level)
        scores = torch.sigmoid(_take(objectness, top))
        boxes = _clip(_take(boxes, top), size)
        keep = scores.topk(min(rpn.post_nms_top_n(), scores.shape[1]), dim=1).indices
        return _take(boxes, keep)

    def detections(self, class_logits, box_deltas, proposals, size):
        """(boxes [B, D, 4], scores [B, D], labels [B, D]): the detections_per_img best (box, class) scores,
        as roi_heads.postprocess_detections without its threshold and NMS."""
        heads, (b, p) = self.roi_heads, proposals.shape[:2]
        boxes = _clip(heads.box_coder.decode(box_deltas, list(proposals.unbind(0))), size)
        scores = F.softmax(class_logits, -1)
        c = scores.shape[-1]
        boxes = boxes.view(b, p, c, 4)[:, :, 1:].reshape(b, -1, 4)  # background dropped
        scores = scores.view(b, p, c)[:, :, 1:].reshape(b, -1)
        scores, index = scores.topk(min(heads.detections_per_img, scores.shape[1]), dim=1)
        return _take(boxes, index), scores, index % (c - 1) + 1

    def masks(self, features, rois, images):
        """Mask logits [K, classes, 28, 28] of `rois` [K, 5]."""
        heads = self.roi_heads
        return heads.mask_predictor(heads.mask_head(_pool(heads.mask_roi_pool, features, rois, images)))

    def forward(self, images):
        from torchvision.models.detection.roi_heads import maskrcnn_inference
        from torchvision.models.detection.rpn import concat_box_prediction_layers

        batch = _batch(self.transform, images)
        features = self.backbone(batch.tensors)
        maps = list(features.values())
        objectness, deltas = self.rpn.head(maps)
        anchors = self.rpn.anchor_generator(batch, maps)
        per_level = [o[0].numel() for o in objectness]
        outputs = [*objectness, *deltas]
        size = batch.image_sizes[0]
        proposals = self.proposals(*concat_box_prediction_layers(objectness, deltas), anchors, per_level, size)
        heads, sampler = self.roi_heads, self.roi_heads.fg_bg_sampler
        if self.training:
            proposals = proposals[:, :sampler.batch_size_per_image]  # the sampled RoIs
        x = heads.box_head(_pool(heads.box_roi_pool, features, _rois(proposals), batch.tensors))
        class_logits, box_deltas = heads.box_predictor(x)
        if self.training:
            outputs += [class_logits, box_deltas]
            if heads.has_mask():
                positive = int(sampler.batch_size_per_image * sampler.positive_fraction)
                outputs.append(self.masks(features, _rois(proposals[:, :positive]), batch.tensors))
            return tuple(outputs)
        boxes, scores, labels = self.detections(class_logits, box_deltas, proposals, size)
        if not heads.has_mask():
            return boxes, scores, labels
        logits = self.masks(features, _rois(boxes), batch.tensors)
        return boxes, scores, labels, torch.cat(maskrcnn_inference(logits, list(labels.unbind(0))))


class _SingleShot(nn.Module):
    """A one-stage detector's modules (RetinaNet, SSD): transform, backbone, anchor generator, head."""

    def __init__(self, model):
        super().__init__()
        self.transform, self.backbone, self.anchor_generator, self.head = (
            model.transform, model.backbone, model.anchor_generator, model.head)
        self.box_coder, self.topk_candidates, self.detections_per_img = (
            model.box_coder, model.topk_candidates, model.detections_per_img)

    def dense(self, images):
        """(batch, feature maps, head outputs, anchors per image)."""
        batch = _batch(self.transform, images)
        maps = list(self.backbone(batch.tensors).values())
        return batch, maps, self.head(maps), self.anchor_generator(batch, maps)


class Retina(_SingleShot):
    """RetinaNet with fixed candidate and detection counts. forward(images [B, 3, S, S]) returns, at
    inference, (boxes [B, D, 4], scores [B, D], labels [B, D]); in training (class logits, box deltas)."""

    def forward(self, images):
        batch, maps, out, anchors = self.dense(images)
        logits, deltas = out["cls_logits"], out["bbox_regression"]
        if self.training:
            return logits, deltas
        hw = [m.shape[-2] * m.shape[-1] for m in maps]
        a = logits.shape[1] // sum(hw)
        levels = [n * a for n in hw]
        b, c = logits.shape[0], logits.shape[-1]
        found = []
        per_level = zip(logits.split(levels, 1), deltas.split(levels, 1), torch.stack(anchors).split(levels, 1))
        for cls, reg, anc in per_level:
            scores, index = torch.sigmoid(cls).flatten(1).topk(min(self.topk_candidates, cls[0].numel()), dim=1)
            anchor = torch.div(index, c, rounding_mode="floor")
            boxes = self.box_coder.decode_single(_take(reg, anchor).reshape(-1, 4), _take(anc, anchor).reshape(-1, 4))
            found.append((_clip(boxes.view(b, -1, 4), batch.image_sizes[0]), scores, index % c))
        boxes, scores, labels = (torch.cat(t, 1) for t in zip(*found))
        scores, keep = scores.topk(min(self.detections_per_img, scores.shape[1]), dim=1)  # in place of NMS
        return _take(boxes, keep), scores, _take(labels, keep)


class SSD(_SingleShot):
    """SSD300 with fixed candidate and detection counts. forward(images [B, 3, 300, 300]) returns, at
    inference, (boxes [B, D, 4], scores [B, D], labels [B, D]); in training (box deltas, class logits)."""

    def forward(self, images):
        batch, maps, out, anchors = self.dense(images)
        deltas, logits = out["bbox_regression"], out["cls_logits"]
        if self.training:
            return deltas, logits
        b, n, _ = logits.shape
        boxes = self.box_coder.decode_single(deltas.reshape(-1, 4), torch.cat(anchors)).view(b, n, 4)
        boxes = _clip(boxes, batch.image_sizes[0])
        scores = F.softmax(logits, dim=-1)[:, :, 1:].transpose(1, 2)  # [B, C-1, N], background dropped
        scores, index = scores.topk(min(self.topk_candidates, n), dim=-1)  # per class, as torchvision
        k = index.shape[-1]
        scores, keep = scores.flatten(1).topk(min(self.detections_per_img, scores[0].numel()), dim=1)
        return _take(boxes, _take(index.flatten(1), keep)), scores, torch.div(keep, k, rounding_mode="floor") + 1


WRAPPERS = {"fasterrcnn_resnet50_fpn": RCNN, "maskrcnn_resnet50_fpn": RCNN, "retinanet_resnet50_fpn": Retina,
            "ssd300_vgg16": SSD}
"""Name -> the module that runs a detector's dense forward (DeepLabV3 runs torchvision's own)."""


def build_module(name: str, num_classes: int) -> nn.Module:
    """The module of MODELS entry `name` on the current default device."""
    model = TORCHVISION[name](num_classes)
    wrapper = WRAPPERS.get(name)
    return model if wrapper is None else wrapper(model)
