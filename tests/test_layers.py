"""bench/ in layers (README: How the code is laid out): the rules hold for the code as it is, and
the check catches a back-import, a circle and a lazy import of bench's own code planted in a copy."""
import shutil
from pathlib import Path

import pytest

from layers import modules, violations

ROOT = Path(__file__).resolve().parent.parent / "bench"


def test_every_layer_imports_only_downwards_with_no_circle():
    assert violations(ROOT) == []


def test_no_module_is_much_over_300_lines():
    long = {m: n for m, p in modules(ROOT).items() if (n := len(p.read_text().splitlines())) > 320}
    assert long == {}


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "bench"
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _plant(path: Path, line: str) -> None:
    path.write_text(path.read_text() + "\n" + line + "\n")


def test_a_lower_layer_importing_a_higher_one_is_caught(copy):
    _plant(copy / "core" / "stats.py", "from ..present import report  # a deliberate back-import")
    found = violations(copy)
    assert found[0].startswith("bench/core/stats.py:")
    assert found[0].endswith(": core may not import present (bench.core.stats imports bench.present.report)")
    assert len(found) == 2 and found[1].startswith("import circle: ")  # present reaches core.stats again


def test_the_worker_importing_the_store_is_caught(copy):
    _plant(copy / "worker" / "loop.py", "from ..store import query")
    assert any("worker may not import store" in v for v in violations(copy))


def test_a_circle_within_a_layer_is_caught(copy):
    _plant(copy / "core" / "verdicts.py", "from . import stats")
    _plant(copy / "core" / "stats.py", "from . import verdicts")
    assert violations(copy) == ["import circle: bench.core.stats -> bench.core.verdicts -> bench.core.stats"]


def test_bench_code_imported_inside_a_function_is_caught(copy):
    _plant(copy / "analysis" / "compare.py", "def late():\n    from ..store import tree\n    return tree")
    assert any("inside a function (bench's own modules" in v for v in violations(copy))
