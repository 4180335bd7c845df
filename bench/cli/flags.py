"""Flags several commands share, each turned into checked values before any work starts."""
from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import inspect
import re

from ..core import case as case_module
from ..core import models
from ..core.case import Case
from ..core.errors import CaseError
from ..harness.dist import DistArgs
from ..store.tree import DEFAULT_ROOT

TEST_ONLY = {"fault", "fault_rank"}
RESOLVED = {"model_source", "model_path"}  # set from --model, never by hand


def _field_docs() -> dict[str, str]:
    """The docstring under each Case field: its help text."""
    body = ast.parse(inspect.getsource(case_module.Case)).body[0].body
    return {stmt.target.id: nxt.value.value for stmt, nxt in zip(body, body[1:])
            if isinstance(stmt, ast.AnnAssign) and isinstance(getattr(stmt, "target", None), ast.Name)
            and isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)}


def add_case_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("case (defaults: one H200-style case; see bench/core/case.py)")
    docs = _field_docs()
    for f in dataclasses.fields(Case):
        if f.name in RESOLVED:
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = argparse.SUPPRESS if f.name in TEST_ONLY else docs.get(f.name, "")
        if f.type == "bool":
            shown = help_text if f.name in TEST_ONLY else help_text + f" (default {'on' if f.default else 'off'})"
            g.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=shown)
        elif f.name == "nccl_env":
            g.add_argument(flag, action="append", metavar="NCCL_NAME=VALUE", default=None,
                           help=help_text + " (repeatable; default none)")
        else:
            kind = {"int": int, "float": float}.get(f.type, str)
            g.add_argument(flag, type=kind, default=None,
                           help=help_text if f.name in TEST_ONLY else help_text + f" (default {f.default!r})")


def case_from_args(a: argparse.Namespace, base: Case = Case()) -> Case:
    changes = {}
    for f in dataclasses.fields(Case):
        v = getattr(a, f.name, None)
        if v is None:
            continue
        if f.name == "nccl_env":
            pairs = []
            for item in v:
                if "=" not in item:
                    raise CaseError(f"--nccl-env {item!r} must look like NCCL_NAME=VALUE")
                pairs.append(tuple(item.split("=", 1)))
            v = tuple(pairs)
        changes[f.name] = v
    if "model" in changes:
        changes.update(models.model_fields(changes["model"]))
    return base.replace(**changes)


def add_dist_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("multi-node (passed to torchrun for ddp cases)")
    g.add_argument("--nnodes", type=int, default=1, help="machines one ddp case spans (default 1)")
    g.add_argument("--node-rank", type=int, default=0, help="this machine's index among them, 0 to nnodes-1 (default 0)")
    g.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of torchrun's c10d rendezvous (default none)")
    g.add_argument("--master-addr", default="", help="static rendezvous address, with --master-port (default none)")
    g.add_argument("--master-port", type=int, default=0, help="its port (default 29500 when --master-addr is set)")


def dist_from_args(a) -> DistArgs:
    if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        raise CaseError(f"--nnodes={a.nnodes} --node-rank={a.node_rank}: need nnodes >= 1 and 0 <= node-rank < nnodes")
    if a.nnodes > 1 and not (a.rdzv_endpoint or a.master_addr):
        raise CaseError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT or --master-addr/--master-port")
    return DistArgs(a.nnodes, a.node_rank, a.rdzv_endpoint, a.master_addr, a.master_port)


def add_noise_flags(p: argparse.ArgumentParser, floor_default: int) -> None:
    g = p.add_argument_group("noise (README: How it judges)")
    g.add_argument("--processes", type=int, default=1, metavar="K",
                   help="fresh processes per case; the figure is their median (default 1)")
    g.add_argument("--floor-processes", type=int, default=floor_default, metavar="N",
                   help="fresh processes of the reference case that measure this run's noise floor at its "
                        f"start; 0 = none (default {floor_default})")
    g.add_argument("--floor-end-processes", type=int, default=min(floor_default, 2), metavar="M",
                   help="more of them at the run's end, a check that the machine did not drift; 0 = none "
                        f"(default {min(floor_default, 2)})")


def add_shared_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shared-gpu", action="store_true",
                   help="measure even where another process holds or uses the GPUs (NVML shows it); every figure "
                        "is then marked shared and no verdict is judged from it. Without it such a run is refused "
                        "(exit 2), and one that finds another process between its cases stops there")


def check_processes(a) -> None:
    if a.processes < 1:
        raise CaseError(f"--processes={a.processes} must be >= 1 (fresh processes per case)")
    check_floor_count("--floor-processes", a.floor_processes)
    check_floor_count("--floor-end-processes", a.floor_end_processes)


def check_floor_count(flag: str, n: int) -> None:
    """Processes whose spread is a noise (a floor, a confirmation): none, or at least two fresh ones."""
    if n == 1 or n < 0:
        raise CaseError(f"{flag}={n} must be 0 (none) or >= 2")


def add_results_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default=str(DEFAULT_ROOT), help="results root folder (default: results/ of this checkout)")


def add_selection_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("which results (default: the latest run of each case)")
    g.add_argument("--machine", default="", help="only this machine folder, e.g. 1x-nvidia-h200")
    g.add_argument("--commit", default="", help="only this exact tree: a commit id or prefix; -dirty names a dirty one")
    g.add_argument("--run", default="", help="only this run id (see `history` or the report's 'runs used' line)")


def patterns(only: str) -> list[str]:
    return [p.strip() for p in only.split(",") if p.strip()]


def matches(case_id: str, only: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(case_id, p) for p in only)


def select_cases(plans: list[tuple[str, list[Case]]], only: str) -> list[tuple[str, list[Case]]]:
    """Keep the cases whose id matches one of the comma-separated shell patterns (re-run one case,
    or split a long sweep); a pattern that matches nothing is an error before anything runs."""
    wanted = patterns(only)
    kept = [(n, [c for c in cs if matches(c.case_id, wanted)]) for n, cs in plans]
    unmatched = [p for p in wanted if not any(matches(c.case_id, [p]) for _, cs in plans for c in cs)]
    if unmatched:
        ids = [c.case_id for _, cs in plans for c in cs]
        raise CaseError(f"--only {', '.join(unmatched)} matches no case id of this sweep; "
                        f"ids look like {ids[0] if ids else '(none)'} (shell patterns, e.g. 'ddp-*-g2-*')")
    return [(n, cs) for n, cs in kept if cs]


def state_defaults(p: argparse.ArgumentParser) -> None:
    """Every option's help ends with its default, said once: where a command's own text does not say
    it, `(default: off)` for a switch, `(default: none)` for an empty value, else the value."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for nested in a.choices.values():
                state_defaults(nested)
        if not a.option_strings or a.help in (None, argparse.SUPPRESS) or isinstance(a, argparse._HelpAction):
            continue
        if "default" in a.help or "required" in a.help:
            continue
        if a.required:
            a.help += " (required)"
        elif isinstance(a, argparse._StoreTrueAction):
            a.help += " (default: off)"
        elif a.default in ("", None, []):
            a.help += " (default: none)"
        else:
            a.help += f" (default: {a.default})"


def parse_budget(text: str, flag: str = "--budget", zero_ok: bool = False) -> float:
    """Seconds from `90`, `90s`, `10m` or `1h` (and 0 where `zero_ok`: none at all); anything else is
    refused with what is accepted."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
    if not m or float(m.group(1)) < 0 or (float(m.group(1)) == 0 and not zero_ok):
        raise CaseError(f"{flag}={text!r} is not a duration; use seconds, or a number with s, m or h (e.g. 10m)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
