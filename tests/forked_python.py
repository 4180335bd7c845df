"""`python SCRIPT ARGS` (and `torchrun ... SCRIPT ARGS`) for the tests that run a written recipe: forked from this
session's fork server (bench/worker/forkserver.py), whose torch and torchvision are imported, where one runs; a
fresh interpreter otherwise. Forked, the recipe runs as __main__ with its own folder first on sys.path and no bench
module loaded, as it would from a user's shell."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness.launch import cached_env
from bench.worker import forkclient

ROOT = Path(__file__).resolve().parent.parent


def run_script(script, *args, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [str(script), *map(str, args)]
    folder = os.environ.get(forkclient.FOLDER_VAR)
    server_env = cached_env(ROOT)  # the variables the session's server started with: the workers' server
    conn = forkclient.connect(Path(folder), ROOT, server_env) if folder else None
    if conn is None:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env)
    with conn, conn.makefile("rb") as replies, open(os.devnull) as null, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        asked = forkclient.request(argv, "script", os.environ if env is None else env, time.time())
        conn.settimeout(timeout)  # past it, the connection closes and the server kills the script's group
        try:
            started = forkclient.send(conn, replies, asked, [null.fileno(), out.fileno(), err.fileno()])
            end = forkclient.ending(replies) if started is not None else None
        except TimeoutError:
            raise subprocess.TimeoutExpired(argv, timeout) from None
        if end is None:
            raise AssertionError(f"the fork server ended before {script}")
        out.seek(0)
        err.seek(0)
        code = -end["signal"] if "signal" in end else end["exit"]
        return subprocess.CompletedProcess(argv, code, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))


def torchrun_script(script, *args, ranks: int = 2, timeout: float = 300) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node RANKS SCRIPT ARGS`: where a fork server runs, its agent and each rank
    forked from it (the agent as the launcher's is, bench/worker/torchrun.py; each rank through forked_rank.py)."""
    torchrun = ["--standalone", "--nproc-per-node", str(ranks)]
    if not os.environ.get(forkclient.FOLDER_VAR):
        return subprocess.run([sys.executable, "-m", "torch.distributed.run", *torchrun, str(script), *map(str, args)],
                              capture_output=True, text=True, timeout=timeout)
    rank = Path(__file__).with_name("forked_rank.py")
    return subprocess.run([sys.executable, "-m", "bench.worker.torchrun", *torchrun, str(rank), str(script),
                           *map(str, args)], capture_output=True, text=True, timeout=timeout, env=cached_env(ROOT))
