import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.case import Case  # noqa: E402

pytest_plugins = ["bench.pytest_plugin"]

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
TOKEN_PREFIX = f"test{__import__('os').getpid()}-"


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


@pytest.fixture(scope="session")
def readme_copy(tmp_path_factory):
    """A git checkout of this tree where README's commands run as written, each once per session
    (tests/readme_doc.py); the README test and the tests of what those commands store read the same runs."""
    from readme_doc import Copy
    return Copy(tmp_path_factory.mktemp("readme"))
