import contextlib
import fcntl
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.case import Case  # noqa: E402

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
    (tests/readme_doc.py); the README test and the tests of what those commands store read the same runs."""
    from readme_doc import Copy
    from bench.harness.launch import cached_env
    from bench.worker import forkclient
    copy = Copy(tmp_path_factory.mktemp("readme"))
    if FORKSERVERS:  # the copy's fork server imports while its first command starts
        forkclient.ensure_started(FORKSERVERS[0], copy.root, cached_env(copy.root))
    return copy


# The test files that read a session fixture another file reads too (README's copy, the tiny single and DDP
# runs): one xdist worker runs them all, and so makes each fixture once; every other file is a unit of its
# own, its module fixtures made once. (pytest-xdist's loadgroup cannot group under pytest 9: it renames
# a test through an attribute pytest no longer reads.)
SHARED_FIXTURES = {"readme_copy", "tiny_run", "ddp_pair"}
SHARED_FIXTURE_FILES = {"test_diagnosis.py", "test_launch.py", "test_phases.py", "test_pytest_plugin.py",
                        "test_readme.py", "test_sweeps_and_plots.py"}
SHARED_UNIT = "files sharing session fixtures"


def pytest_collection_modifyitems(config, items):
    for item in items:
        reads = SHARED_FIXTURES & set(getattr(item, "fixturenames", ()))
        if reads and item.path.name not in SHARED_FIXTURE_FILES:
            raise pytest.UsageError(f"{item.nodeid} reads {', '.join(sorted(reads))}: add {item.path.name} to "
                                    "tests/conftest.py's SHARED_FIXTURE_FILES")


class SharedFixtureUnits:
    """Registered where pytest-xdist runs (its hook is unknown to pytest otherwise)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling

        class SharedFixtureScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                path = nodeid.split("::", 1)[0]
                return SHARED_UNIT if Path(path).name in SHARED_FIXTURE_FILES else path

        return SharedFixtureScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(SharedFixtureUnits(), "shared-fixture-units")


# Tests whose assertions read the host's load or timing (a verdict of "shared", a window's length) run alone:
# each test holds a shared lock on this run's file, these an exclusive one. The fixtures whose runs do so.
ALONE_FIXTURES = {"fed"}


ALONE_LOCK = Path(tempfile.gettempdir()) / f"gpu-bench-tests-{XDIST_RUN}.lock"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not XDIST_WORKER:
        yield
        return
    alone = item.get_closest_marker("alone") is not None or bool(ALONE_FIXTURES & set(item.fixturenames))
    with open(ALONE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield


def pytest_sessionfinish(session):
    if XDIST_WORKER:  # a worker still running opens a new file, which nobody else needs by then
        ALONE_LOCK.unlink(missing_ok=True)
