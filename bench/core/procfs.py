"""A process's line in /proc/<pid>/stat, read past its command name (which may hold spaces and
parentheses), for the worker's CPU accounting and the harness's registry of runs alike; and the
processes a process started, for what a rank's loader workers used."""
from __future__ import annotations

from pathlib import Path


def stat_fields(text: str) -> list[str]:
    """The fields after the command name: the state first, so proc(5)'s field N is at [N - 3]."""
    return text[text.rindex(")") + 2:].split()


def process_table(proc: Path = Path("/proc")) -> dict[int, list[str]]:
    """Every visible process's stat fields, by pid (one gone since the listing is left out)."""
    table = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                table[int(entry.name)] = stat_fields((entry / "stat").read_text())
            except OSError:
                continue
    return table


def tree(root_pid: int, table: dict[int, list[str]]) -> list[int]:
    """root_pid and every live process it started, at any depth ([] where root_pid is not in the table)."""
    if root_pid not in table:
        return []
    children: dict[int, list[int]] = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found
