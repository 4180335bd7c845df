"""`python -m bench.worker` handing its work to a fork server (worker/forkserver.py) where
BENCH_WORKER_FORKSERVER names a folder (the test suite's, see tests/conftest.py): this process stays
what the launcher or torchrun started and watches, with the same variables, output and exit status,
while a worker forked from a process that has done the imports runs the case. Standard library only,
so a hand-over costs an interpreter's start and not torch's import."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..core import lifeline, procfs

FOLDER_VAR = lifeline.FORKSERVER_VAR
OWNER_FILE = "owner.pid"
SERVER_TOKEN = "forkserver"
START_WAIT_S = 30.0
STARTING = ".starting"  # holds the server's pid once started
SOCKET = ".sock"  # appears beside it once the server has done its imports
MAX_SOCKET_PATH = 100  # a Unix socket's path holds at most 107 bytes
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


# variables read as an interpreter or a library starts (a sitecustomize on PYTHONPATH, TORCHDYNAMO_* read
# as torch imports): a worker is forked from a server that started with the same, or from none.
# OMP_NUM_THREADS is set again in each worker; the bytecode cache changes nothing that runs; Inductor's cache
# folder and torchrun's TORCH_NCCL_* are read when they are used, in the worker.
AT_START = ("PYTHON", "LD_", "TORCH_", "TORCHDYNAMO_", "TORCHINDUCTOR_", "OMP_", "MKL_", "KMP_", "OPENBLAS_")
READ_IN_THE_WORKER = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE",
                      "TORCHINDUCTOR_CACHE_DIR", "TORCH_NCCL_")


def socket_path(folder: Path, root: Path, env: dict | None = None) -> Path:
    """One server per tree, interpreter and start-up variables: a worker runs the code of the tree it was
    started from, as an interpreter started with its variables would."""
    env = os.environ if env is None else env
    return folder / (hashlib.sha256(server_key(root, env).encode()).hexdigest()[:16] + SOCKET)


def server_key(root: Path, env: dict) -> str:
    """The tree, the environment (found through links: a checkout's .venv may be a link to another's)
    and the start-up variables, a folder named twice in PYTHONPATH (bin/bench and the launcher both put
    the tree first) counted once."""
    env = dict(env)
    if "PYTHONPATH" in env:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(env["PYTHONPATH"].split(os.pathsep)))
    start = sorted((k, v) for k, v in env.items() if k.startswith(AT_START) and not k.startswith(READ_IN_THE_WORKER))
    return json.dumps([str(root), os.path.realpath(sys.prefix), os.path.realpath(sys.executable), start])


def hand_over(entered: float, program: str = "worker") -> int | None:
    """Run this worker (or, with program="torchrun", torchrun) in a forked process and return its exit code
    (or die of its signal); None where no fork server is wanted or none could be had, and this process is
    then the worker itself."""
    folder = os.environ.get(FOLDER_VAR)
    if not folder:
        return None
    root = Path(__file__).resolve().parents[2]
    conn = connect(Path(folder), root)
    if conn is None:
        return None
    parent = os.getppid()
    lifeline.die_with_parent()
    if lifeline.orphaned(parent):
        return 1
    with conn, conn.makefile("rb") as replies:
        pid = send(conn, replies, request(sys.argv[1:], program, os.environ, entered), [0, 1, 2])
        if pid is None:  # it would not fork one: this process is the worker
            return None
        for sig in FORWARDED:  # what torchrun or the launcher sends this process reaches the worker
            signal.signal(sig, lambda s, _f: _send(pid, s))
        end = ending(replies)
    if end is None:
        print("bench.worker: the fork server ended before the worker", file=sys.stderr)
        return 1
    if "signal" in end:  # died as the worker did, so the launcher reads the same signal
        if end["signal"] in FORWARDED:
            signal.signal(end["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), end["signal"])
        return 128 + end["signal"]
    return int(end["exit"])


def request(argv: list[str], program: str, env, entered: float) -> dict:
    """What the server needs to become `python -m bench.worker ARGV` (or torchrun, or `python SCRIPT ARGS` where
    program is "script") as started here: its arguments, variables and folder."""
    return {"argv": list(argv), "env": dict(env), "cwd": os.getcwd(), "entered": entered, "program": program}


def send(conn: socket.socket, replies, request: dict, fds: list[int]) -> int | None:
    """Hand the request and the process's stdin, stdout and stderr (`fds`) to the server; the forked pid, or None
    where it would not fork one."""
    socket.send_fds(conn, [json.dumps(request).encode()], fds)
    line = replies.readline()
    return json.loads(line)["pid"] if line else None


def ending(replies) -> dict | None:
    """How the forked process ended: {"exit": code} or {"signal": number}; None where the server went first."""
    line = replies.readline()
    return json.loads(line) if line else None


def _send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def connect(folder: Path, root: Path, env: dict | None = None) -> socket.socket | None:
    """A connection to the server of this tree and these variables (this process's by default): started by
    the first worker that wants one, waited for by every worker while it imports (it would import as long
    itself)."""
    path = socket_path(folder, root, env)
    starting = path.with_suffix(STARTING)
    if len(str(path)) > MAX_SOCKET_PATH or (not path.exists() and not ensure_started(folder, root, env)):
        return None
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(path))
            return conn
        except OSError:
            conn.close()
        if time.monotonic() > deadline or not server_alive(starting):
            return None
        time.sleep(0.05)


def server_settled(starting: Path) -> bool:
    """The server a .starting file names has done its imports and serves, or is gone."""
    return starting.with_suffix(SOCKET).exists() or not server_alive(starting)


def server_alive(starting: Path) -> bool:
    """The server a .starting file names is running (or is being started)."""
    try:
        text = starting.read_text()
    except OSError:
        return False
    if not text:
        return True  # being written
    try:  # a zombie nobody reaps is no server
        return procfs.stat_fields(Path(f"/proc/{int(text)}/stat").read_text())[0] != "Z"
    except (OSError, ValueError):
        return False


def ensure_started(folder: Path, root: Path, env: dict | None = None) -> bool:
    """Start the server for this tree and these variables (this process's by default) unless another process
    has (its pid in a .starting file); False where none can be."""
    env = dict(os.environ if env is None else env)
    path = socket_path(folder, root, env)
    try:
        fd = os.open(path.with_suffix(STARTING), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return True
    except OSError:
        return False
    with os.fdopen(fd, "w") as f:
        try:
            f.write(str(start_server(folder, root, path, env)))
        except (OSError, ValueError):  # no owner named: a folder nobody prepared
            f.write("0")
            return False
    return True


def server_pids(folder: Path) -> list[int]:
    """The servers started for `folder`'s session."""
    pids = []
    for f in folder.glob("*" + STARTING):
        try:
            pids.append(int(f.read_text()))
        except (OSError, ValueError):
            continue
    return [p for p in pids if p > 0]


def start_server(folder: Path, root: Path, path: Path, env: dict) -> int:
    owner = int((folder / OWNER_FILE).read_text())
    key = server_key(root, env)
    env = dict(env, PYTHONPATH=os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])]))
    # no case's token (a case's clean-up would end it), but one its session's leftover checks see in every worker
    env[lifeline.TOKEN_VAR] = env.get(lifeline.TOKEN_PREFIX_VAR, "") + SERVER_TOKEN
    env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's BLAS would start a thread pool at import: the server forks
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # torchrun's rank's, say: each worker sets its own
        env.pop(name, None)
    with open(path.with_suffix(".log"), "ab") as log:
        log.write(f"serves {key}\n".encode())
        log.flush()
        server = subprocess.Popen([sys.executable, "-m", "bench.worker.forkserver", "--socket", str(path),
                                   "--owner", str(owner)], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return server.pid
