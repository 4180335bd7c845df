"""One rank's entry: `python -m bench.worker --case FILE --out DIR`, started by the launcher (one
process) or by torchrun (one per rank). Writes DIR/rank<R>.json; knows no sweeps."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch.distributed as dist

from ..core import lifeline
from ..core.case import Case
from ..core.files import write_json_atomic
from ..core.model_flops import METHOD as FLOPS_METHOD
from ..core.model_flops import training_flops_per_image
from . import loaders
from .context import from_environment
from .faults import is_oom
from .heartbeat import heartbeat
from .loop import measure
from .phases import mark, marks


def redirect_stderr(out: Path, rank: int) -> Path:
    """Send this rank's fd 2 to a file, so even a hard crash leaves its last lines behind."""
    path = out / f"rank{rank}.stderr"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    return path


def run_rank(case: Case, out: Path, go: Path | None = None) -> int:
    rank = int(os.environ.get("RANK", 0))
    redirect_stderr(out, rank)
    heartbeat.path = out / f"rank{rank}.heartbeat"
    if go is not None:
        wait_for_go(go)
    mark("go")
    heartbeat.beat("start-up")
    record = {"rank": rank, "status": "ok", "reason": "", "pid": os.getpid(),
              "worker_root": str(Path(__file__).resolve().parents[2]),  # the tree this worker was imported from
              "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    try:
        ctx = from_environment(case)
        record["device"] = str(ctx.device)
        if case.launcher == "torchrun":
            dist.init_process_group("nccl" if case.device == "cuda" else "gloo")
        record.update(measure(case, ctx))
        if rank == 0 and not case.loader_only:  # after the windows: what the report's MFU divides
            record["model_flops_per_image"] = training_flops_per_image(
                case.model, case.image_size, case.num_classes, case.model_path, case.model_source)
            record["model_flops_method"] = FLOPS_METHOD
    except loaders.SkipCase as e:
        record.update(status="skipped", reason=str(e))
    except Exception as e:
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        if is_oom(e):  # on every device, CPU allocation failures included
            unit = "GPU" if case.device == "cuda" else "rank"
            record.update(status="oom", reason=f"out of memory at batch_size={case.batch_size} per {unit}: "
                                               f"{str(e).splitlines()[0][:300]}")
        else:
            record.update(status="error", reason=f"{e.__class__.__name__}: {e}"[:500],
                          traceback_tail=tb.splitlines()[-15:])
    heartbeat.beat("teardown")
    mark("returned")
    record["phase_marks"] = dict(marks)
    _write(out / f"rank{rank}.json", record)
    if record["status"] == "ok" and dist.is_initialized():
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, record)  # across nodes, so rank 0 can merge every rank
        if rank == 0:
            _write(out / "ranks.json", {"ranks": gathered})
        dist.destroy_process_group()
    return 0 if record["status"] in ("ok", "skipped") else 1


def wait_for_go(go: Path) -> None:
    """A process started ahead (its imports overlapping the previous process's teardown) touches no
    device until the launcher says the previous one has ended."""
    heartbeat.beat("waiting for the previous process to end")
    while not go.exists():
        time.sleep(0.005)


def _write(path: Path, data: dict) -> None:
    write_json_atomic(path, data, indent=None)


def main(argv=None) -> int:
    parent = os.getppid()
    # the launcher (or torchrun) dying for any reason, SIGKILL included, takes this rank with it
    lifeline.die_with_parent()
    if lifeline.orphaned(parent):
        return 1
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--case", required=True, help="case JSON file")
    p.add_argument("--out", required=True, help="folder for this case's per-rank records")
    p.add_argument("--go", default="", help="start measuring only once this file exists (a process started ahead)")
    a = p.parse_args(argv)
    mark("imported")
    case = Case.from_dict(json.loads(Path(a.case).read_text()))
    return run_rank(case, Path(a.out), Path(a.go) if a.go else None)
