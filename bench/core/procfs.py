"""A process's line in /proc/<pid>/stat, read past its command name (which may hold spaces and
parentheses), for the worker's CPU accounting and the harness's registry of runs alike."""
from __future__ import annotations


def stat_fields(text: str) -> list[str]:
    """The fields after the command name: the state first, so proc(5)'s field N is at [N - 3]."""
    return text[text.rindex(")") + 2:].split()
