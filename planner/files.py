"""Writing files so that they are never half written: a temporary file beside the target, flushed
to disk, then renamed over it (os.replace is atomic on one filesystem)."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically; return the path."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return target
