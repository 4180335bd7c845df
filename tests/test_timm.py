"""`--model timm/NAME`: any model timm lists, built with random weights for the case's image size where it
takes one; timm's version in the case (and its id) and in each record's environment; refused in one line
where timm is missing or has no such model."""
import json
import subprocess
import sys

import pytest

from bench.cli import models as models_cli
from bench.core import identity, labels, models
from bench.core.case import Case
from bench.core.errors import CaseError
from bench.present import recipe
from conftest import ROOT
from forked_python import run_script

timm = pytest.importorskip("timm")  # the optional dependency: `pip install .[timm]`, which CI installs


def timm_case(name: str, **kw) -> Case:
    return Case(device="cpu", model=f"timm/{name}", model_source=models.timm_version(), num_classes=10,
                batch_size=2, image_size=kw.pop("image_size", 32), **kw)


@pytest.mark.parametrize("name, size", [("resnet18", 32), ("vit_tiny_patch16_224", 32), ("efficientnet_b0", 32)])
def test_one_training_step_of_timm_models(name, size):
    """The worker's own model building and one optimizer step: the loss is finite and the weights move."""
    import torch
    from bench.worker.context import RankContext
    from bench.worker.trainer import build_model
    case = timm_case(name, image_size=size)
    model = build_model(case, RankContext())
    assert type(model).__module__.startswith("timm.")
    if name.startswith("vit"):  # built for the case's image size, not timm's default 224
        assert model.patch_embed.img_size == (size, size)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, size, size)), torch.tensor([1, 7]))
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_timms_version_is_part_of_the_case_and_its_id():
    fields = models.model_fields("timm/resnet18")
    assert fields == {"model": "timm/resnet18", "model_source": timm.__version__}
    case = timm_case("resnet18")
    assert case.case_id.startswith(f"custom-timm-resnet18-{timm.__version__[:8]}-single-g1")
    upgraded = case.replace(model_source="0.9.16")
    assert identity.case_id(upgraded) != case.case_id  # a timm upgrade is another case
    assert "/" not in case.case_id  # an id is a folder name
    with pytest.raises(CaseError, match="needs model_source, the timm version"):
        Case(device="cpu", model="timm/resnet18")
    with pytest.raises(CaseError, match=r"timm .* has no model 'resnet_nope' \(`bin/bench models` lists them\)"):
        models.model_fields("timm/resnet_nope")


def test_a_timm_model_built_with_another_timm_is_refused():
    with pytest.raises(CaseError, match="made with timm 0.9.16 and timm .* is installed; a timm upgrade is another case"):
        models.build("timm/resnet18", 10, 32, model_source="0.9.16")


@pytest.mark.slow
def test_a_timm_case_runs_records_timms_version_and_its_recipe_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench", "run", "--device", "cpu", "--model", "timm/resnet18",
                          "--num-classes", "10", "--image-size", "32", "--batch-size", "2", "--warmup-steps", "1",
                          "--steps", "1", "--repeats", "1", "--results", str(tmp_path / "r")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    [path] = (tmp_path / "r").rglob("custom-timm-resnet18-*/*.json")
    record = json.loads(path.read_text())
    assert record["env"]["timm"] == timm.__version__ and record["case"]["model_source"] == timm.__version__
    assert record["diagnosis"]["mfu_pct"] > 0  # its FLOPs counted as for any model
    case = Case.from_dict(record["case"])
    script = recipe.write(case, record, labels.describe(record["case"]), tmp_path)
    assert script.name == "recipe_1gpu_timm_resnet18.py" and "timm.create_model('resnet18'" in script.read_text()
    ran = run_script(script, "--warmup", "1", "--steps", "1", "--windows", "1")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.split("images/s: ")[1].split()[0]) > 0


def test_bench_models_lists_timms_families(capsys):
    assert models_cli.command(None) == 0
    out = capsys.readouterr().out
    assert f"{len(timm.list_models())} timm {timm.__version__} models: --model timm/NAME" in out
    assert all(f in out for f in (" vit,", " efficientnet,", " convnext,", " mobilenetv3,"))


def test_missing_timm_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "timm_version", lambda: "")
    with pytest.raises(CaseError) as e:
        models.model_fields("timm/resnet18")
    assert str(e.value) == ("model='timm/resnet18' needs timm, which is not installed here; "
                            "pip install '.[timm]' (or pip install timm)")
    from bench.cli.main import main
    assert main(["run", "--device", "cpu", "--model", "timm/resnet18", "--results", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()
