"""A process's line in /proc/<pid>/stat, read past its command name (which may hold spaces and
parentheses), for the worker's CPU accounting and the harness's registry of runs alike; and the
processes a process started, for what a rank's loader workers used; and whether the CPU computes bf16
itself, for where `bench recommend` starts on a CPU."""
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


# x86's AVX-512 BF16 and AMX-BF16, Arm's BF16 extension (in "Features" there)
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The first processor's feature flags; empty where /proc/cpuinfo cannot be read."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    return bool(cpu_flags(cpuinfo) & NATIVE_BF16_FLAGS)
