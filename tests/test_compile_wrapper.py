"""`compile_wrapper`: a compiled step whose kernels Inductor launches from C++ code. The label is checked
against the graphs Inductor built, and the recipe of such a case runs on its own."""
from pathlib import Path

import pytest

from bench.core import labels
from bench.harness.launch import cached_env, run_case
from bench.present import recipe
from bench.worker.dtype_check import LabelMismatch, check_compile_wrapper
from forked_python import run_script

ROOT = Path(__file__).resolve().parent.parent


def test_the_label_is_checked_against_the_graphs_inductor_built():
    assert check_compile_wrapper("cpp", 2) == 2 and check_compile_wrapper("python", 0) == 0
    with pytest.raises(LabelMismatch, match="compile_wrapper=cpp but Inductor built 0 compiled graph"):
        check_compile_wrapper("cpp", 0)
    with pytest.raises(LabelMismatch, match="compile_wrapper=python but Inductor built 2 compiled graph"):
        check_compile_wrapper("python", 2)  # a TORCHINDUCTOR_CPP_WRAPPER the case did not ask for
    assert check_compile_wrapper("cpp", None) is None  # a torch that does not say: stored as unknown


@pytest.mark.slow
def test_a_step_launched_from_cpp_runs_is_labelled_and_its_recipe_runs(small_net, tmp_path):
    case = small_net.replace(compile="default", compile_scope="step", compile_wrapper="cpp", precision="bf16",
                             inductor_options="coordinate_descent_tuning",
                             optimizer_impl="fused", warmup_steps=2, repeats=1, timeout_s=420)
    r = run_case(case)
    assert r["status"] == "ok", r
    assert r["ranks"][0]["cpp_wrapper_graphs"] >= 2  # the step's forward and its backward
    assert r["metrics"]["compute_dtypes"] == {"cpu": "bfloat16"}
    assert "compile:default/step/cpp-wrapper" in labels.describe(case.to_dict())
    record = {"machine": "1x-cpu", "commit_folder": "abc", "run_id": "r1", "ranks": r["ranks"], "metrics": r["metrics"]}
    path = recipe.write(case, record, labels.describe(case.to_dict()), tmp_path)
    assert "'compile_wrapper': 'cpp'," in path.read_text()
    # the recipe turns on the Inductor settings the case ran with, by their own names
    assert "'inductor_options': 'coordinate_descent_tuning'," in path.read_text()
    # with the case's Inductor cache, as a user's recipe has its own: the same graphs are not compiled twice
    ran = run_script(path, "--warmup", "1", "--steps", "2", "--windows", "1", timeout=420, env=cached_env(ROOT))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.split("images/s: ")[1].split()[0]) > 0
