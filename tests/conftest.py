import contextlib
import fcntl
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.case import Case  # noqa: E402
from file_seconds import FILE_SECONDS, SLOW_TEST_SECONDS  # noqa: E402

pytest_plugins = ["bench.pytest_plugin"]

# Under pytest-xdist (make test runs two workers on a 2-core machine) every process a worker starts
# trains on one thread: two workers' cases at two OpenMP threads each, spinning, would share 2 cores.
# The worker's own variables are not handed down: a pytest session a test starts (README's
# pytest-benchmark command) is a plain one, and pytest-benchmark turns itself off under xdist.
XDIST_WORKER = os.environ.pop("PYTEST_XDIST_WORKER", None)
XDIST_RUN = os.environ.pop("PYTEST_XDIST_TESTRUNUID", "")
if XDIST_WORKER:
    os.environ.pop("PYTEST_XDIST_WORKER_COUNT", None)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# the smallest case that still runs every part of the loop: ResNet-18 on 32 px images
TINY = Case(device="cpu", model="resnet18", num_classes=10, batch_size=4, image_size=32,
            warmup_steps=1, steps=2, repeats=2, timeout_s=120.0)


@pytest.fixture
def tiny():
    return TINY


@pytest.fixture(scope="session")
def tiny_run():
    """TINY run once in a fresh process, with what rank 0 said of its phases as it ran: the tests of a single
    case's record and of live progress read this one run."""
    from bench.harness.launch import run_case
    heard = []
    with fresh_workers():
        return run_case(TINY, on_phase=heard.append), heard


@pytest.fixture(scope="session")
def ddp_pair():
    """TINY as two gloo ranks under torchrun with the harness-overhead check, run twice, the second started ahead
    in the first's teardown: the tests of a DDP case's record, of its diagnosis and of starting ahead read them."""
    from bench.harness.launch import run_case
    pair = TINY.replace(strategy="ddp", gpus=2, overhead_check=True, steps=3)
    first = run_case(pair, then=pair)
    return first, run_case(pair)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """48 generated JPEGs in 4 classes, made once per module in set-up (a test that runs alone holds the machine
    for its call only)."""
    from bench.data import generate
    root = tmp_path_factory.mktemp("jpegs")
    generate.make_dataset(root, 48, 4, seed=1, workers=2, echo=lambda m: None)
    return root


@pytest.fixture
def small_net():
    """TINY with tests/smallnets.py's conv_bn in place of ResNet-18, as a user's factory: for the cases that
    compile, where ResNet-18's compile took most of the test suite's time on a fresh machine."""
    from bench.core.models import model_fields
    return TINY.replace(**model_fields("smallnets:conv_bn"))


# Every case this test session starts carries this prefix in its token (and so do the processes of
# the sweeps its tests start), so a leftover check follows only its own processes, however many
# other bench jobs run on the machine.
TOKEN_PREFIX = f"test{os.getpid()}-"


@pytest.fixture(autouse=True, scope="session")
def own_run_registry(tmp_path_factory):
    """The registry of runs on this machine's GPUs (harness/run_registry.py) is this session's own."""
    import os
    os.environ["BENCH_RUN_REGISTRY"] = str(tmp_path_factory.mktemp("gpu-bench-runs"))
    yield


@pytest.fixture(autouse=True, scope="session")
def own_token_prefix():
    import os
    from bench.harness.launch import TOKEN_PREFIX_VAR
    os.environ[TOKEN_PREFIX_VAR] = TOKEN_PREFIX
    yield


@pytest.fixture(autouse=True, scope="session")
def worker_forkserver(tmp_path_factory):
    """Workers forked from a process that has imported torch (bench/worker/forkserver.py), one per tree, for
    this session: a fresh interpreter's imports cost 3 s of a tiny case's 4 on 2 cores. Tests whose subject
    is the process itself (its imports, signals, what it leaves behind) are marked fresh_processes, and
    BENCH_WORKER_FORKSERVER=0 runs every worker fresh."""
    from bench.worker import forkclient
    if os.environ.get(forkclient.FOLDER_VAR) == "0":
        del os.environ[forkclient.FOLDER_VAR]
        yield None
        return
    if os.environ.get(forkclient.FOLDER_VAR):  # a session inside another's (the pytest-benchmark tests'): its servers
        FORKSERVERS.append(Path(os.environ[forkclient.FOLDER_VAR]))
        yield FORKSERVERS[0]
        return
    folder = tmp_path_factory.mktemp("forkserver")
    FORKSERVERS.append(folder)
    (folder / forkclient.OWNER_FILE).write_text(str(os.getpid()))
    os.environ[forkclient.FOLDER_VAR] = str(folder)
    from bench.harness.launch import cached_env
    forkclient.ensure_started(folder, ROOT, cached_env(ROOT))  # its imports overlap the first tests
    yield folder
    del os.environ[forkclient.FOLDER_VAR]
    for pid in forkclient.server_pids(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


FORKSERVERS: list[Path] = []  # this session's fork-server folder, once made


def forkserver_pids() -> set[int]:
    """This session's fork servers (one per tree): the leftover checks count the workers they fork, not them."""
    from bench.worker.forkclient import server_pids
    return {pid for folder in FORKSERVERS for pid in server_pids(folder)}


@contextlib.contextmanager
def fresh_workers():
    """Every worker started inside starts fresh, as in a measured run."""
    from bench.worker.forkclient import FOLDER_VAR
    saved = os.environ.pop(FOLDER_VAR, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[FOLDER_VAR] = saved


@pytest.fixture(autouse=True)
def _fresh_where_marked(request):
    if request.node.get_closest_marker("fresh_processes") is None:
        yield
    else:
        with fresh_workers():
            yield


@pytest.fixture(scope="session")
def readme_copy(tmp_path_factory):
    """A git checkout of this tree where README's commands run as written, each once per session
    (tests/readme_doc.py); the README test and the tests of what those commands store read the same runs. The
    FLOPs counts those commands would make, each importing torch for them, are made here first."""
    from readme_doc import Copy, count_flops_here
    from bench.harness.launch import cached_env
    from bench.worker import forkclient
    copy = Copy(tmp_path_factory.mktemp("readme"))
    if FORKSERVERS:  # the copy's fork server imports while its first command starts
        forkclient.ensure_started(FORKSERVERS[0], copy.root, cached_env(copy.root))
    count_flops_here(copy)
    return copy


# The test files that read a session fixture another file reads too: one xdist worker runs each group, and so
# makes its fixtures once; every other file is a unit of its own, its module fixtures made once. (pytest-xdist's
# loadgroup cannot group under pytest 9: it renames a test through an attribute pytest no longer reads.) The
# files of the tests that run alone go with README's copy, so that one worker runs them at its start, while the
# other waits once.
ALONE_UNIT = "README's copy, and the tests that run alone"
SHARED_UNITS = {
    ALONE_UNIT: ({"readme_copy"}, {"test_pytest_plugin.py", "test_readme.py", "test_sweeps_and_plots.py",
                                   "test_shared_gpu.py"}),
    "the tiny runs": ({"tiny_run", "ddp_pair"}, {"test_diagnosis.py", "test_launch.py", "test_phases.py"}),
}
UNIT_OF_FILE = {name: unit for unit, (_, files) in SHARED_UNITS.items() for name in files}


def unit_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return UNIT_OF_FILE.get(Path(path).name, path)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for unit, (fixtures, files) in SHARED_UNITS.items():
            reads = fixtures & set(getattr(item, "fixturenames", ()))
            if reads and item.path.name not in files:
                raise pytest.UsageError(f"{item.nodeid} reads {', '.join(sorted(reads))}: add {item.path.name} to "
                                        f"{unit!r} in tests/conftest.py's SHARED_UNITS")
        if runs_alone(item) and item.path.name not in SHARED_UNITS[ALONE_UNIT][1]:
            raise pytest.UsageError(f"{item.nodeid} runs alone: add {item.path.name} to {ALONE_UNIT!r} in "
                                    "tests/conftest.py's SHARED_UNITS")
    if XDIST_WORKER:
        items[:] = scheduled(items)


def scheduled(items: list) -> list:
    """The order xdist hands units out in, and each unit's tests run in: the unit of the tests that run alone
    first, with those marked alone first (a module's other tests stay together: its fixtures are made once); then
    the longest units (file_seconds.py), so that no long unit comes last."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(unit_of(item.nodeid), []).append(item)

    def seconds(file: str, tests: list) -> float:
        return FILE_SECONDS.get(file, SLOW_TEST_SECONDS * sum(t.get_closest_marker("slow") is not None for t in tests))

    def weight(unit: str) -> tuple:
        files = {t.path.name for t in units[unit]}
        return unit != ALONE_UNIT, -sum(seconds(f, [t for t in units[unit] if t.path.name == f]) for f in files)

    return [t for unit in sorted(units, key=weight) for t in sorted(units[unit], key=lambda t: not runs_alone(t))]


class SharedFixtureUnits:
    """Registered where pytest-xdist runs (its hook is unknown to pytest otherwise)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling
        config.option.loadscopereorder = False  # the units in `scheduled`'s order, not by their count of tests

        class SharedFixtureScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return unit_of(nodeid)

        return SharedFixtureScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(SharedFixtureUnits(), "shared-fixture-units")


# Tests whose assertions read the host's load or timing (a verdict of "shared", a window's length) run alone:
# every test holds a shared lock on this run's file through its set-up and tear-down, and those marked alone an
# exclusive one while they run, after their set-up and once the fork servers have started. Only the worker of
# ALONE_UNIT asks for it, so no two wait for each other; it keeps it from one such test to the next.
ALONE_LOCK = Path(tempfile.gettempdir()) / f"gpu-bench-tests-{XDIST_RUN}.lock"
# Held on the way to either hold, and by a test that runs alone until it has its exclusive hold: with three or
# more workers, the others' shared holds, taken one after another, kept it waiting until they had all finished
# (221 s of a 322 s run with TEST_WORKERS=3).
ALONE_GATE = ALONE_LOCK.with_suffix(".gate")
HOLD: list = []  # this worker's hold on the lock: [the open file, fcntl.LOCK_SH or fcntl.LOCK_EX]


def runs_alone(item) -> bool:
    return item.get_closest_marker("alone") is not None


def _hold(mode: int) -> None:
    if not HOLD:
        HOLD[:] = [open(ALONE_LOCK, "a"), None]
    if HOLD[1] != mode:
        with open(ALONE_GATE, "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(HOLD[0], mode)
        HOLD[1] = mode


def _exclusive(config) -> None:
    wait_for_fork_servers(config)
    _hold(fcntl.LOCK_EX)


def _release() -> None:
    HOLD.pop(0).close()
    HOLD.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not XDIST_WORKER:
        yield
        return
    if not HOLD:
        _hold(fcntl.LOCK_SH)
    yield
    if not (HOLD[1] == fcntl.LOCK_EX and nextitem is not None and runs_alone(nextitem)):
        _release()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if XDIST_WORKER and runs_alone(item):
        _exclusive(item.config)  # kept to the end of its tear-down, and on into a next test that runs alone
    yield


def wait_for_fork_servers(config, timeout_s: float = 60.0) -> None:
    """Until every fork server of this xdist run (each worker's, README copy's) has done its imports: what runs
    alone must not run beside one."""
    from bench.worker import forkclient
    sessions = list(Path(config.option.basetemp).parent.glob("popen-gw*"))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        starting = [f for s in sessions for f in s.glob("forkserver*/*" + forkclient.STARTING)]
        if all(forkclient.server_settled(f) for f in starting):
            return
        time.sleep(0.1)


def pytest_sessionfinish(session):
    if XDIST_WORKER:  # a worker still running opens new files, which nobody else needs by then
        ALONE_LOCK.unlink(missing_ok=True)
        ALONE_GATE.unlink(missing_ok=True)
