"""Import torchvision where its compiled operators cannot load.

torchvision's Python package registers meta kernels for its C++ operators (torchvision::nms,
roi_align, ...) when it is imported; where its compiled library does not load (the torchvision wheel
built for a CUDA torch beside a CPU torch of the same version: libtorch_cuda.so is missing), that
registration fails with "operator torchvision::nms does not exist" and `import torchvision` (and timm,
which imports it) raises. Counting runs on meta tensors only, so the operators' schemas are all it
needs: they are defined here, as torchvision's csrc/ops/*.cpp declare them, when the library is absent,
and torchvision's own meta kernels (torchvision/_meta_registrations.py, which registers them only when
its library loads) are registered for them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, "
    "bool aligned) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, float rois_scale, "
    "int rois_zero_point, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
    "bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, "
    "SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
    "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
    "SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, "
    "SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)
"""torchvision's operator schemas (torchvision 0.2x, csrc/ops/*.cpp TORCH_LIBRARY_FRAGMENT)."""

_library = None  # the torch.library.Library holding the schemas; kept alive for the process
_meta_library = None  # the one holding the meta kernels registered for them


def _compiled_ops_load(package_dir: Path) -> bool:
    import torch

    for path in sorted(package_dir.glob("_C*.so")) + sorted(package_dir.glob("_C*.pyd")):
        try:
            torch.ops.load_library(str(path))
            return True
        except OSError:
            return False
    return False


def import_torchvision():
    """Return the torchvision module, defining its operator schemas first if its compiled library cannot
    load. Raises ImportError if torchvision is not installed."""
    global _library
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'torchvision'")
    import torch

    if _library is None and not _compiled_ops_load(Path(next(iter(spec.submodule_search_locations)))):
        try:
            torch.ops.torchvision.nms.default
        except (AttributeError, RuntimeError):
            _library = torch.library.Library("torchvision", "DEF")
            for schema in SCHEMAS:
                _library.define(schema)
    import torchvision

    if _library is not None:
        _register_meta_kernels()
    return torchvision


def _register_meta_kernels() -> None:
    """Register torchvision's meta functions (meta_<op>, e.g. meta_roi_align_backward for
    _roi_align_backward) for the schemas defined here. nms has none: its output size depends on data."""
    global _meta_library
    if _meta_library is not None:
        return
    import torch
    from torchvision import _meta_registrations as meta

    _meta_library = torch.library.Library("torchvision", "IMPL", "Meta")
    for schema in SCHEMAS:
        name = schema.split("(")[0]
        fn = getattr(meta, "meta_" + name.lstrip("_"), None)
        if fn is not None:
            _meta_library.impl(name, fn)


def prepare() -> None:
    """Import torchvision first where it is installed (timm, transformers and diffusers import it, and its
    import fails without the schemas above); nothing when it is not."""
    try:
        import_torchvision()
    except ImportError:
        pass
