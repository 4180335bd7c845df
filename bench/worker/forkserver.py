"""A process that has imported what a worker imports, and forks a worker for each `python -m bench.worker`
that asks it (worker/forkclient.py), torchrun's agent for each `python -m bench.worker.torchrun` and a
written recipe for the tests that run one (tests/forked_python.py): the test suite's speed-up, where a
fresh interpreter's imports (3 s of torch and torchvision on a 2-core runner) dwarf the tiny cases it
runs. Only where BENCH_WORKER_FORKSERVER names a folder; measured runs start every worker fresh.

`python -m bench.worker.forkserver --socket PATH --owner PID`. One thread, never a tensor computed, so
each fork starts clean. A worker it forked is killed with its process group when the client that asked
for it goes (the client is what the launcher or torchrun started and watches), and the server itself
ends when its owner does or when idle.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import time
import traceback

import torch

from ..core import lifeline
from .heartbeat import heartbeat
from .phases import marks
from .rank import main as worker_main

WARM = ("torch.distributed", "torch.distributed.run", "torch.utils.data", "torch.utils.flop_counter", "torch._dynamo",
        "torch.nn.parallel", "torch.distributed.algorithms.ddp_comm_hooks", "torchvision", "torchvision.models",
        "torchvision.transforms.v2", "PIL.Image", "bench.worker.loaders.torch_loader",
        "bench.worker.loaders.synthetic", "bench.worker.strategies.ddp", "bench.worker.strategies.dp")
IDLE_S = 600.0
MAX_REQUEST_BYTES = 1 << 20


def warm_up() -> None:
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve(path: str, owner: int, idle_s: float = IDLE_S) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    listener.listen(64)
    os.replace(staging, path)  # appears whole: a client never connects to a half-made server
    children: dict[int, socket.socket] = {}  # worker pid -> the client's connection
    by_conn: dict[socket.socket, int] = {}
    last = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([listener, *by_conn], [], [], 0.05)
            for conn in ready:
                if conn is listener:
                    client, _ = listener.accept()
                    pid = _fork_for(client, listener, list(by_conn))
                    if pid is None:
                        client.close()
                    else:
                        children[pid], by_conn[client] = client, pid
                elif not conn.recv(1):  # the client went: its worker goes with its whole group
                    pid = by_conn.pop(conn)
                    if pid in children:  # not reaped yet, so the pid is still this worker's
                        _kill_group(pid)
                    conn.close()
            _reap(children, by_conn)
            if children or by_conn:
                last = time.monotonic()
            if not lifeline.alive(owner) or time.monotonic() - last > idle_s:
                return
    finally:
        for pid in list(children):
            _kill_group(pid)
        try:
            os.unlink(path)
        except OSError:
            pass


def _fork_for(client: socket.socket, listener: socket.socket, others: list) -> int | None:
    try:
        client.settimeout(10)
        data, fds, _, _ = socket.recv_fds(client, MAX_REQUEST_BYTES, 3)
        request = json.loads(data)
        client.settimeout(None)
    except (OSError, ValueError):
        return None
    pid = os.fork()
    if pid == 0:
        listener.close()
        for c in others:
            c.close()
        _run_worker(client, request, fds)
    for fd in fds:
        os.close(fd)
    try:
        client.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        _kill_group(pid)
    return pid


def _run_worker(client: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the worker the client would have been, then exit with its code."""
    code, forked = 1, time.time()
    try:
        client.close()
        os.setsid()
        lifeline.die_with_parent()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["-m", *request["argv"]]
        _as_if_started_here()  # a worker's, torchrun's or a recipe's threads alike
        if request.get("program") == "torchrun":  # torchrun's agent, as `python -m torch.distributed.run` runs it
            runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
            code = 0
        elif request.get("program") == "script":  # a written recipe, as `python SCRIPT ARGS` runs it
            sys.argv = list(request["argv"])
            _as_a_fresh_script(sys.argv[0])
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        else:
            marks.update(entered=request["entered"], forked=forked)  # forked: its record says how it started
            code = worker_main(request["argv"])
    except SystemExit as e:
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _as_if_started_here() -> None:
    """What a fresh process sets from its variables or the clock as it starts, set again for this one."""
    heartbeat.t0 = time.monotonic()
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():  # read once at load by OpenMP, in the server
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def _as_a_fresh_script(path: str) -> None:
    """`python path` finds modules in the script's folder first and has no bench module loaded: a recipe that
    needed the suite fails here as it would in a user's shell."""
    tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path[:] = [os.path.dirname(os.path.abspath(path))] + [p for p in sys.path if os.path.abspath(p or ".") != tree]
    for name in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        del sys.modules[name]


def _reap(children: dict, by_conn: dict) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        by_conn.pop(conn, None)
        end = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.waitstatus_to_exitcode(status)}
        try:
            conn.sendall(json.dumps(end).encode() + b"\n")
        except OSError:
            pass
        conn.close()


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--socket", required=True)
    p.add_argument("--owner", type=int, required=True, help="end when this process does")
    p.add_argument("--idle-s", type=float, default=IDLE_S)
    a = p.parse_args(argv)
    warm_up()
    if threads() != 1:  # a fork would copy a thread's locks without the thread: serve nobody
        print(f"forkserver: {threads()} threads after the imports; not serving", file=sys.stderr)
        return 1
    serve(a.socket, a.owner, a.idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
