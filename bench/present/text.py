"""Plain-text layout shared by the report's sections: lines within a terminal's width (Chinese
characters take two columns), markdown tables, numbers with thousands separators."""
from __future__ import annotations

import textwrap

from tabulate import tabulate

try:  # optional: a machine without it (the GPU images) measures a Chinese character as one column
    from wcwidth import wcswidth
except ImportError:
    wcswidth = len

WIDTH = 120  # every default line fits a terminal of this many columns


def display_width(line: str) -> int:
    """Terminal columns a line takes: a Chinese character takes two."""
    return max(wcswidth(line), len(line))


def wrap(text: str, indent: str = "  ") -> list[str]:
    """Lines of at most WIDTH terminal columns."""
    width = WIDTH
    while True:
        lines = textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
        if width <= 40 or all(display_width(ln) <= WIDTH for ln in lines):
            return lines
        width -= 8


def table(rows, headers, align=None, max_widths=None) -> str:
    """A markdown table; `max_widths` wraps long cells (a long label takes two lines, not 20 columns)."""
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=align or ("left",) * len(headers), maxcolwidths=max_widths)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"
