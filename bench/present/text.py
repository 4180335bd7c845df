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


SHARED_ZH = {"GPU shared": "GPU 被共享", "host shared": "主机被共享"}


def marked(r, lang: str = "en") -> str:
    """` (GPU shared)` or ` (host shared)` after a record's figure measured beside someone else's work."""
    label = r.shared_label if r is not None else ""
    return "" if not label else f" ({label})" if lang == "en" else f"（{SHARED_ZH[label]}）"


def fit(rows: list[list], headers: list[str], col: int = 0, align=None, wide: bool = False) -> tuple[str, list[str]]:
    """A Markdown table within WIDTH columns: where a row would be wider, the cells of column `col` (case
    ids) become `[n] <recipe name>` and each full id is listed under the table, whole, on a line of its
    own; `wide` keeps them in the table."""
    text = table(rows, headers, align)
    if wide or max(display_width(ln) for ln in text.splitlines()) <= WIDTH:
        return text, []
    keyed, short = [], []
    for row in rows:
        if row[col] == "-":  # nothing to key
            short.append(row)
            continue
        key = f"[{len(keyed) + 1}]"
        keyed.append(f"{key} {row[col]}")
        short.append([*row[:col], f"{key} {str(row[col]).split('-resnet')[0]}", *row[col + 1:]])
    return table(short, headers, align), keyed
