"""Models built by another library's own modeling code (torchvision, timm, diffusers, transformers) or by
a builder of this package that is not a language model (DLRM), chosen by a config's "planner_builder".

A config.json names its builder and the builder's fields, e.g.
    {"planner_builder": "torchvision", "model": "fasterrcnn_resnet50_fpn", ...}
The builder is looked up in BUILDERS, a fixed table: a data file picks one of these modules by name and
never names code of its own. Each builder module has

    parse(raw: dict, origin: str) -> config

and the config it returns (a frozen dataclass) provides

    family: str                       one of FAMILIES
    build() -> nn.Module              the module, on the current default device (meta when counting)
    sizes(workload) -> dict           Workload fields to fill or check (image_size, seq_len, steps);
                                      raises ValueError naming the field when a size is impossible
    inputs(module, workload, device, dtype) -> (args, kwargs, labels)
                                      inputs of one forward for a resolved workload; labels may be None
    loss(output, labels) -> Tensor    the training objective (only if the family trains)
    repeats: bool                     True when forward accepts `repeat=` (a context manager factory
                                      taking a count: ops run inside it count that many times, so a
                                      50-step denoising loop is captured once and counted 50 times)

Library imports are deferred to build(): listing or parsing the zoo never imports torchvision,
diffusers or transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

BUILDERS = {"torchvision": "planner_models.tv", "timm": "planner_models.timm_models",
            "diffusers": "planner_models.diffusion", "transformers": "planner_models.transformers_hf",
            "dlrm": "planner_models.dlrm"}
"""Builder name -> module implementing parse()."""

FAMILIES = ("vision", "detection", "diffusion", "recommender", "speech", "multimodal", "text")
"""Families a library-built model may have (besides the decoder, encoder and vision families of the
package's own builders)."""

EXTRA = "pip install 'planner[zoo]' (torchvision, timm, diffusers, transformers)"
"""What to run when a builder's library is missing."""


class LibraryMissingError(ImportError):
    """The library a builder needs is not installed."""


def parse(raw: dict[str, Any], origin: str, error: type[Exception]) -> Any:
    """The config of a library-built model; errors are raised as `error` (ConfigFieldError)."""
    builder = raw.get("planner_builder")
    if not isinstance(builder, str) or builder not in BUILDERS:
        raise error(f"{origin}: field 'planner_builder' is {builder!r}; valid: {', '.join(BUILDERS)}")
    module = importlib.import_module(BUILDERS[builder])
    try:
        config = module.parse(raw, origin)
    except error:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise error(f"{origin}: {exc}") from None
    if config.family not in FAMILIES:  # a builder bug, not bad input
        raise AssertionError(f"{builder} returned family {config.family!r}")
    return config


def require(module_name: str, what: str):
    """Import `module_name` (a library a builder needs) or raise LibraryMissingError saying how to get it."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise LibraryMissingError(f"{what} needs the Python package '{module_name}' ({exc}); {EXTRA}") from None
