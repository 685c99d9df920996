"""The roofline chart of a device with a workload's ops as points, drawn with Pillow into a PNG.

x: arithmetic intensity (FLOP/byte), y: achieved FLOP/s, both log10. The roof is min(peak,
intensity x bandwidth) for the workload dtype's peak and the fp32 vector peak; each distinct op is
a point at (its intensity, its FLOP / predicted time), coloured by what bounds it. The file is
written atomically.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

from planner.errors import ConfigError
from planner.files import new_file_mode, write_error
from planner.hardware.catalog import Device
from planner.predict.roofline import vector_peak
from planner.predict.timing import OpRow
from planner.workload.quant import precision

COLOURS = {"compute": (214, 39, 40), "memory": (31, 119, 180), "overhead": (127, 127, 127)}
W, H, LEFT, RIGHT, TOP, BOTTOM = 960, 640, 90, 30, 50, 70


def check_target(path: str, flag: str = "--roofline") -> Path:
    """`path` as a Path when a PNG can be written there; ConfigError naming why not otherwise."""
    target = Path(path)
    shown = path if len(path) <= 80 else f"{path[:80]}... ({len(path):,} characters)"
    try:
        if target.is_dir():
            raise ConfigError(f"{flag}: '{shown}' is a directory; give a file name such as plot.png")
        if not target.parent.is_dir():
            raise ConfigError(f"{flag}: the folder of '{shown}' does not exist")
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        raise ConfigError(f"{flag}: cannot write '{shown}': {exc.__class__.__name__}") from None
    if len(target.name.encode("utf-8", "surrogatepass")) > 255:
        raise ConfigError(f"{flag}: file name of {len(target.name):,} characters; the limit is 255 bytes")
    return target


def draw_roofline(path: str, device: Device, rows: list[OpRow], dtype: str, title: str) -> Path:
    """Write the roofline PNG to `path`; return the path."""
    gemm = precision(dtype).gemm  # a quantization recipe's roof is the peak its GEMMs run at
    peak = device.peak(gemm)
    vector = vector_peak(device, dtype)
    bw = device.mem_bytes_per_s
    points = [(r.flop / r.bytes, r.flop / r.time_s, r.bound) for r in rows if r.flop > 0 and r.bytes > 0 and r.time_s > 0]
    x_lo, x_hi = -2.0, 4.0
    y_hi = math.ceil(math.log10(peak)) + 0.2
    y_lo = y_hi - 8
    for x, y, _ in points:
        x_lo, x_hi = min(x_lo, math.floor(math.log10(x))), max(x_hi, math.ceil(math.log10(x)))
        y_lo = min(y_lo, math.floor(math.log10(y)))

    def px(x: float, y: float) -> tuple[float, float]:
        u = LEFT + (math.log10(x) - x_lo) / (x_hi - x_lo) * (W - LEFT - RIGHT)
        v = H - BOTTOM - (math.log10(y) - y_lo) / (y_hi - y_lo) * (H - TOP - BOTTOM)
        return u, v

    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([LEFT, TOP, W - RIGHT, H - BOTTOM], outline=(0, 0, 0))
    for e in range(int(x_lo), int(x_hi) + 1):
        u, _ = px(10.0**e, 10.0**y_lo)
        d.line([u, TOP, u, H - BOTTOM], fill=(230, 230, 230))
        d.text((u - 12, H - BOTTOM + 6), f"1e{e}", fill=(0, 0, 0))
    for e in range(int(y_lo), int(math.floor(y_hi)) + 1):
        _, v = px(10.0**x_lo, 10.0**e)
        d.line([LEFT, v, W - RIGHT, v], fill=(230, 230, 230))
        d.text((8, v - 6), f"1e{e} FLOP/s", fill=(0, 0, 0))
    for roof, label in ((peak, f"{gemm} peak"), (vector, "fp32 vector peak")):
        xs = [10 ** (x_lo + i * (x_hi - x_lo) / 200) for i in range(201)]
        line = [px(x, min(roof, x * bw)) for x in xs]
        d.line(line, fill=(0, 0, 0) if roof == peak else (150, 150, 150), width=2)
        d.text((W - RIGHT - 140, px(10.0**x_hi, roof)[1] - 14), label, fill=(0, 0, 0))
    for x, y, bound in points:
        u, v = px(x, y)
        d.ellipse([u - 4, v - 4, u + 4, v + 4], fill=COLOURS.get(bound, (0, 0, 0)))
    d.text((LEFT, 15), title, fill=(0, 0, 0))
    d.text((W // 2 - 120, H - 30), "arithmetic intensity (FLOP/byte)", fill=(0, 0, 0))
    for i, (bound, colour) in enumerate(COLOURS.items()):
        d.ellipse([LEFT + 10, TOP + 10 + 16 * i, LEFT + 18, TOP + 18 + 16 * i], fill=colour)
        d.text((LEFT + 24, TOP + 8 + 16 * i), f"{bound}-bound", fill=(0, 0, 0))
    return _save(img, check_target(path))


def _save(img: Image.Image, target: Path, flag: str = "--roofline") -> Path:
    """Write `img` as a PNG atomically (a temporary file renamed over the target); ConfigError when the folder
    refuses it (read-only, full, not a real folder such as /proc/self), nothing left behind."""
    try:
        fd, tmp = tempfile.mkstemp(suffix=".png", dir=target.parent)
    except OSError as exc:
        raise write_error(target, exc, flag) from None
    os.close(fd)
    try:
        os.chmod(tmp, new_file_mode())  # mkstemp's 0600 -> what open() would give
        img.save(tmp, format="PNG")
        os.replace(tmp, target)
    except OSError as exc:
        raise write_error(target, exc, flag) from None
    finally:
        with contextlib.suppress(OSError):
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target


SERIES = ((214, 39, 40), (31, 119, 180), (44, 160, 44), (255, 127, 14))


def draw_curve(path: str, series: list[tuple[str, list[tuple[float, float]]]], x_label: str, y_label: str,
               title: str, slo: float | None = None, slo_label: str = "SLO", flag: str = "--curve") -> Path:
    """Write a line chart (linear axes) of `series` [(name, [(x, y)])] to `path`, with a dashed horizontal
    line at `slo` when given; return the path."""
    target = check_target(path, flag)
    xs = [x for _, pts in series for x, _ in pts] or [0.0, 1.0]
    ys = [y for _, pts in series for _, y in pts] + ([slo] if slo else []) or [0.0, 1.0]
    x_hi, y_hi = max(xs) * 1.05 or 1.0, max(ys) * 1.1 or 1.0

    def px(x: float, y: float) -> tuple[float, float]:
        return LEFT + x / x_hi * (W - LEFT - RIGHT), H - BOTTOM - min(y, y_hi) / y_hi * (H - TOP - BOTTOM)

    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([LEFT, TOP, W - RIGHT, H - BOTTOM], outline=(0, 0, 0))
    for i in range(6):
        u, _ = px(x_hi * i / 5, 0)
        _, v = px(0, y_hi * i / 5)
        d.line([u, TOP, u, H - BOTTOM], fill=(230, 230, 230))
        d.line([LEFT, v, W - RIGHT, v], fill=(230, 230, 230))
        d.text((u - 12, H - BOTTOM + 6), _tick(x_hi * i / 5), fill=(0, 0, 0))
        d.text((8, v - 6), _tick(y_hi * i / 5), fill=(0, 0, 0))
    for k, (name, pts) in enumerate(series):
        colour = SERIES[k % len(SERIES)]
        line = [px(x, y) for x, y in pts]
        if len(line) > 1:
            d.line(line, fill=colour, width=2)
        for u, v in line:
            d.ellipse([u - 3, v - 3, u + 3, v + 3], fill=colour)
        d.line([LEFT + 10, TOP + 14 + 16 * k, LEFT + 30, TOP + 14 + 16 * k], fill=colour, width=3)
        d.text((LEFT + 36, TOP + 8 + 16 * k), name, fill=(0, 0, 0))
    if slo:
        _, v = px(0, slo)
        for u in range(LEFT, W - RIGHT, 12):
            d.line([u, v, min(u + 6, W - RIGHT), v], fill=(0, 0, 0), width=2)
        d.text((W - RIGHT - 200, v - 16), slo_label, fill=(0, 0, 0))
    d.text((LEFT, 15), title, fill=(0, 0, 0))
    d.text((W // 2 - 100, H - 30), x_label, fill=(0, 0, 0))
    d.text((8, TOP - 20), y_label, fill=(0, 0, 0))
    return _save(img, target)


def _tick(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
