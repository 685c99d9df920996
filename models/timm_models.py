"""Builder "timm": image classifiers built by timm's own modeling code, on meta.

    {"planner_builder": "timm", "model": "convnext_base", "num_classes": 1000, "image_size": 224}

Models (MODELS): convnext_base, efficientnet_b0, efficientnet_b4, swin_base_patch4_window7_224 and
vit_large_patch16_224, made by `timm.create_model(model, pretrained=False, num_classes=...)` (nothing is
downloaded). Family "vision": a forward takes `batch` images [B, 3, S, S] and returns logits [B, classes];
training takes integer labels of num_classes and minimizes the cross entropy of logits.float(), as
planner's own vision models do.

image_size is the side in pixels; the config's is the default (timm's pretrained_cfg input_size, but 380
for efficientnet_b4: the EfficientNet paper's B4 resolution and torchvision's crop for its weights, the
size published B4 results use; timm's efficientnet_b4.ra2_in1k trains at 320 and tests at 384). The
convolutional models take any size of at least 32 pixels; Swin and ViT here are built for 224-pixel
images (their position tables and attention windows are fixed) and take only that size.

torchvision is imported through planner_models.tv_ops before timm, which imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from planner_models.tv import MAX_CLASSES, MAX_IMAGE, MIN_IMAGE, check_fields, int_field, model_field

MODELS = {
    # name: (default image_size, fixed image size or None)
    "convnext_base": (224, None),
    "efficientnet_b0": (224, None),
    "efficientnet_b4": (380, None),
    "swin_base_patch4_window7_224": (224, 224),
    "vit_large_patch16_224": (224, 224),
}
"""The models this builder makes (an allowlist: a config picks one by name, never code)."""
FIELDS = ("planner_builder", "planner_source", "planner_date", "model", "num_classes", "image_size")


def parse(raw: dict[str, Any], origin: str) -> TimmConfig:
    """The config of a timm classifier; ValueError names a bad field."""
    check_fields(raw, FIELDS)
    name = model_field(raw, MODELS)
    image, fixed = MODELS[name]
    num_classes = int_field(raw, "num_classes", 1000, 1, MAX_CLASSES)
    image_size = int_field(raw, "image_size", image, MIN_IMAGE, MAX_IMAGE)
    if fixed is not None and image_size != fixed:
        raise ValueError(f"field 'image_size' is {image_size}; {name} takes only {fixed}-pixel images")
    return TimmConfig(model=name, num_classes=num_classes, image_size=image_size)


@dataclass(frozen=True, slots=True)
class TimmConfig:
    """A timm image classifier."""

    model: str
    """One of MODELS."""
    num_classes: int
    """Classes of the classifier head (1000 for ImageNet-1k)."""
    image_size: int
    """Default image side in pixels."""
    family: str = "vision"
    repeats: bool = False

    def build(self) -> nn.Module:
        """timm's model on the current default device (random initialization, no download)."""
        from planner_models.library import require
        from planner_models.tv_ops import prepare

        prepare()  # before timm, which imports torchvision
        timm = require("timm", f"timm model {self.model}")
        return timm.create_model(self.model, pretrained=False, num_classes=self.num_classes)

    def sizes(self, workload) -> dict[str, int]:
        """{"image_size": pixels}; ValueError naming image_size when the model cannot take it."""
        image = workload.image_size or self.image_size
        fixed = MODELS[self.model][1]
        if fixed is not None and image != fixed:
            raise ValueError(f"image_size {image}: {self.model} is built for {fixed}-pixel images (its position "
                             "table and attention windows are fixed)")
        if image < MIN_IMAGE:
            raise ValueError(f"image_size must be at least {MIN_IMAGE} pixels, got {image}")
        return {"image_size": image}

    def inputs(self, module, workload, device, dtype):
        """((images [B, 3, S, S] in `dtype`,), {}, labels [B] class ids, int64)."""
        b, s = workload.batch, workload.image_size
        if device == "meta":
            images = torch.empty((b, 3, s, s), dtype=dtype, device=device)
            labels = torch.empty((b,), dtype=torch.long, device=device)
        else:
            images = torch.randn((b, 3, s, s), dtype=dtype, device=device)
            labels = torch.randint(0, self.num_classes, (b,), device=device)
        return (images,), {}, labels

    def loss(self, output, labels):
        """Cross entropy of the logits in fp32: a 0-d tensor (nats per image, averaged)."""
        return F.cross_entropy(output.float(), labels)
