"""Matplotlib set-up for the book: a Korean font, so the figures' labels read as the prose does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

FONT_FAMILY = "NanumGothic"


def korean_font_path() -> Path | None:
    """NanumGothic from the koreanize-matplotlib package (found without importing it)."""
    spec = importlib.util.find_spec("koreanize_matplotlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / "NanumGothic.ttf"
    return path if path.exists() else None


def use_korean_font() -> bool:
    """Register NanumGothic with matplotlib and make it the default; False if it is missing."""
    import matplotlib
    from matplotlib import font_manager

    path = korean_font_path()
    if path is None:
        return False
    font_manager.fontManager.addfont(str(path))
    # DejaVu Sans (matplotlib's own) fills in what NanumGothic lacks: arrows, ᵀ, the minus sign
    matplotlib.rcParams["font.family"] = [FONT_FAMILY, "DejaVu Sans"]
    matplotlib.rcParams["axes.unicode_minus"] = False
    return True


def png_bytes(fig, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (for an ipywidgets Image), and the figure closed."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()
