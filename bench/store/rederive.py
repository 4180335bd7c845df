"""Records made under an older definition of images_per_s, computed again under today's from the raw
windows they keep, when they are read (the file is never rewritten).

  from 3: the same figure (each process's continuous span); a real loader's interval now comes from
          its own processes alone, without the synthetic noise floor;
  from 2: each process's figure was the median of its windows, with pauses between them; today's is
          the images of all its windows over their time, the harmonic mean of the windows' images/s
          (each window held the same images). A synthetic case's windows do not depend on the pauses,
          so it is re-derived, with its run's noise floor; a real loader refilled its queue in them,
          so its windows overstate it and it stays under its older definition;
  from 1: one process and no per-process windows: nothing to compute from.

A record whose fp16 loss scaler skipped every update of its measured span (stored before the worker
refused such spans) is read as failed, with that reason: it measured no training.
"""
from __future__ import annotations

import statistics

from ..core import stats
from .record import DEFINITIONS

IMAGES = "images_per_s"


def why_not(d: dict) -> str:
    """Why this record cannot be re-derived ('' where it can)."""
    version = (d.get("definitions") or {}).get(IMAGES, 1)
    procs = d.get("processes") or []
    if d.get("status") != "ok":
        return "not ok"
    if version < 2 or not procs or not all(p.get("images_per_s_repeats") for p in procs):
        return "no per-process windows stored"
    if version == 2 and d["case"].get("loader", "synthetic") != "synthetic":
        return "its windows had pauses between them in which the loader refilled its queue"
    return ""


def rederive(d: dict, floor: dict | None) -> bool:
    """Recompute d's figure and interval under today's definition in place; True when it did. `floor`
    is the noise floor of the record's run (its manifest's), used for synthetic cases as today."""
    version = (d.get("definitions") or {}).get(IMAGES, 1)
    if version == DEFINITIONS[IMAGES] or why_not(d):
        return False
    procs, case, m = d["processes"], d["case"], d["metrics"]
    repeats = [p["images_per_s_repeats"] for p in procs]
    figures = ([p["images_per_s"] for p in procs] if version >= 3
               else [len(r) / sum(1.0 / x for x in r) for r in repeats])
    window_se = [stats.relative_standard_error([1.0 / x for x in r]) for r in repeats]
    floor = floor if case.get("loader", "synthetic") == "synthetic" and floor and "rel_sd" in floor else None
    center = statistics.median(figures)
    m.update(images_per_s=center, images_per_s_per_gpu=center / case.get("gpus", 1), images_per_s_processes=figures,
             images_per_s_ci95=stats.ci95(figures, window_se, floor, [len(r) for r in repeats]))
    d["definitions"] = {**d["definitions"], IMAGES: DEFINITIONS[IMAGES]}
    d["rederived_from"] = {IMAGES: version}
    return True


def not_training(d: dict) -> str:
    """Why an ok record measured no training, '' where it did: its loss scaler skipped every update of
    the measured steps (the facts fp16 records keep since ac0329966039)."""
    if d.get("status") != "ok":
        return ""
    for r in d.get("ranks") or []:
        skipped, scale = r.get("updates_skipped_in_span"), r.get("loss_scale_span")
        steps = (r.get("steps_per_window") or 0) * len(r.get("images") or [])
        if skipped is not None and (isinstance(skipped, str) or (steps and skipped >= steps)):
            return (f"fp16 loss scaling skipped every update of the {steps} measured steps (the loss scale fell "
                    f"from {scale[0]:g} to {scale[1]:g}): nothing trained (re-read from the stored facts)")
    return ""


def mark_not_training(d: dict) -> bool:
    """Turn such a record into a failed one in place (the file is never rewritten); True when it did."""
    why = not_training(d)
    if why:
        d.update(status="error", reason=why, rederived_status="not training")
    return bool(why)

