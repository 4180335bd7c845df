"""Which knobs make a case what it is: the one definition behind case ids, compare, claims, the
recommend search and the pytest front end.

A case's *knobs* are every field except those that say how long or how often it was measured (and
the recipe's name), so two records with the same knobs measured the same configuration. The case
id names the recipe and every field, so a run lands in its own folder and a re-run of a recipe in
the same one.
"""
from __future__ import annotations

import hashlib
import json

ID_OPTIONAL = {"optimizer_impl": "default", "compile_scope": "model"}
"""Fields added after results were first stored: they enter the case id only when set away from their
default, so every earlier case id still names the same case (and stored records read them as defaults)."""

MEASUREMENT_FIELDS = frozenset({"name", "warmup_steps", "steps", "min_window_s", "repeats", "timeout_s",
                                "overhead_check", "fault", "fault_rank"})
"""How long or how often a case was measured (and which recipe made it), not what ran."""


def _fields(case) -> dict:
    """A Case or a stored case dict as a plain dict, with fields added since read at their defaults."""
    d = case if isinstance(case, dict) else case.to_dict()
    return {**ID_OPTIONAL, **d}


def case_id(case) -> str:
    """Readable parts (recipe, model, strategy, GPUs, batch, precision, loader, ...) and a digest of
    every field, so different knobs never share an id."""
    c = case
    parts = [c.name, c.model, c.strategy, f"g{c.gpus}", f"bs{c.batch_size}",
             c.precision + ("-cl" if c.channels_last else ""), c.loader]
    if c.loader == "dali":
        parts.append(c.dali_device)
    if c.accumulation_steps > 1:
        parts.append(f"acc{c.accumulation_steps}-{c.accumulation_mode}")
    if c.compile:
        parts.append("compile-" + c.compile + ("-step" if c.compile_scope == "step" else ""))
    if c.optimizer_impl != "default":
        parts.append("sgd-" + c.optimizer_impl)
    if c.loader_only:
        parts.append("loader-only")
    parts.append(f"{c.image_size}px")
    parts.append(c.device)
    hashed = {k: v for k, v in c.to_dict().items() if not (k in ID_OPTIONAL and v == ID_OPTIONAL[k])}
    digest = hashlib.sha1(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:8]
    return "-".join(str(p) for p in parts) + "-" + digest


def knobs(case, ignore: frozenset | set = frozenset()) -> dict:
    """What ran: every field but the measurement ones (and `ignore`)."""
    return {k: v for k, v in _fields(case).items() if k not in MEASUREMENT_FIELDS and k not in ignore}


def knobs_key(case, ignore: frozenset | set = frozenset()) -> str:
    """`knobs` as one string: equal for two cases exactly when they measured the same configuration."""
    return json.dumps(knobs(case, ignore), sort_keys=True, default=str)


def differing_fields(a, b) -> set[str]:
    """The knobs two cases (Cases or stored dicts) differ in."""
    ka, kb = knobs(a), knobs(b)
    return {k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k)}


def match_key(case) -> str:
    """The same recipe with the same knobs: what pairs a case across two commits or runs, however
    long each was measured."""
    return _fields(case)["name"] + " " + knobs_key(case)
