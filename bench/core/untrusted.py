"""Stored results are data from elsewhere (commits, merges, other machines): the rules that keep what
they say from acting on whoever reads them. A record or manifest whose strings hold control
characters (a terminal's escape sequences, a carriage return, the bidirectional overrides that
reorder a line) or run past a sane length is refused whole; the captured output of a case's
processes (stderr lines, a traceback) is cleaned instead, since real tools colour their output."""
from __future__ import annotations

import re

MAX_STRING_CHARS = 4096
"""Longer than any string the suite writes (a failure's reason is cut at 500 characters, a stored
command line runs to a few hundred)."""
CAPTURED_FIELDS = frozenset({"stderr_tail", "traceback_tail"})
"""Lists of lines a case's processes printed, kept as they came: cleaned on the way in and out."""

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls but the newline and the tab, and the bidirectional marks and overrides."""


PATH_FIELDS = ("machine", "commit_folder", "sweep", "case_id", "run_id")
"""A record's fields the reader turns into folder names (REPORT.md beside a commit, a machine's page, its
plots): each must be one plain folder name, never a way out of the results tree."""


def path_part_problem(name, field: str) -> str | None:
    """Why `name` cannot be a folder name the suite writes under, or None."""
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name:
        return f"{field} {str(name)[:60]!r} is not a plain folder name"
    return None


def clean(text: str) -> str:
    """The text with terminal escape sequences removed and any other control character shown as `?`."""
    return CONTROL.sub("?", ANSI.sub("", text))


def problem(data, where: str = "") -> str | None:
    """The first string (or key) of `data` that is too long or holds a control character, named by its
    place (`env.gpu_model`), or None. Captured output is cleaned in place instead of refused."""
    if isinstance(data, str):
        if len(data) > MAX_STRING_CHARS:
            return f"{where or 'a string'} is {len(data):,} characters long (at most {MAX_STRING_CHARS:,})"
        if CONTROL.search(data):
            return f"{where or 'a string'} holds control characters"
        return None
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, str):
                continue
            here = f"{where}.{k}" if where else k
            if k in CAPTURED_FIELDS and isinstance(v, list):
                data[k] = [clean(x)[:MAX_STRING_CHARS] if isinstance(x, str) else x for x in v]
                continue
            found = problem(k, f"a key in {where or 'the record'}") or problem(v, here)
            if found:
                return found
        return None
    if isinstance(data, list):
        for i, v in enumerate(data):
            if isinstance(v, (str, dict, list)):  # the many numbers of step times cost a type check alone
                found = problem(v, f"{where}[{i}]")
                if found:
                    return found
    return None
