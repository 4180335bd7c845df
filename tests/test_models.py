"""Any torchvision classification model by name, and the user's own factory: the names read without
importing torch, what a constructor fixes honoured or refused in one line before any work, a sample of
families trained one step each on the CPU, a factory from a temporary module end to end, and the answers
given per model."""
import inspect
import json
import subprocess
import sys

import pytest
import torch
import torchvision

from bench.core import identity, models, sweeps
from bench.core.case import Case, CaseError
from bench.harness.checks import check_models
from bench.present import recipe
from conftest import ROOT, TINY
from forked_python import run_script

SAMPLE = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf", "vit_b_16", "swin_t")
FACTORY_SOURCE = """import torch


def make(num_classes):
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, num_classes))


def not_a_module(num_classes):
    return "a string"
"""


def test_the_names_are_torchvisions_own_list():
    assert models.torchvision_names() == tuple(torchvision.models.list_models(module=torchvision.models))
    assert len(models.torchvision_names()) >= 80 and "vit_b_16" in models.torchvision_names()
    assert "fasterrcnn_resnet50_fpn" not in models.torchvision_names()  # detection is not classification


def test_every_constructor_that_fixes_a_size_or_aux_outputs_is_told():
    """The policy by name agrees with each constructor's own parameters, for every listed model: a new
    family that takes the image size or has auxiliary outputs would fail here."""
    for name in models.torchvision_names():
        cls = inspect.signature(torchvision.models.get_model_builder(name)).return_annotation
        params = set(inspect.signature(cls.__init__).parameters)
        told = models.constructor_kwargs(name, 64)
        assert ("image_size" in told) == ("image_size" in params), name
        assert ("input_size" in told) == ("input_size" in params), name
        assert ("aux_logits" in told) == ("aux_logits" in params), name


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_of_families_trains_one_step_on_the_cpu(name):
    from bench.worker.context import RankContext
    from bench.worker.trainer import Trainer
    case = TINY.replace(model=name, batch_size=2, image_size=32)
    check_models([case])  # the meta-device check passes where the step runs
    trainer = Trainer(case, RankContext())
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    before = [p.detach().clone() for p in trainer.model.parameters()][-1]
    trainer.step(iter([(images, labels)]))
    assert torch.isfinite(trainer.last_loss) and not torch.equal(before, list(trainer.model.parameters())[-1])


@pytest.mark.parametrize("changes, needle", [
    ({"model": "resnet5"}, "model='resnet5' is not a torchvision classification model (`bin/bench models` lists them)"),
    ({"model": "a b:c"}, "model='a b:c' is not a factory of the form package.module:function"),
    ({"model": "vit_b_16", "input_channels": 4}, "input_channels=4 widens a ResNet stem (conv1); model='vit_b_16' has"),
    ({"model": "pkg.mod:make"}, "model='pkg.mod:make' needs model_source"),
    ({"model_source": "0123456789ab"}, "model_source='0123456789ab' does nothing here"),
])
def test_a_model_it_cannot_train_is_refused_in_one_line(changes, needle):
    with pytest.raises(CaseError) as e:
        Case(**changes)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("model, size, needle", [
    ("vit_b_16", 40, "Input shape indivisible by patch size!; the next size it trains on is 48"),
    ("inception_v3", 40, "the smallest size it trains on (bisected up to 512 px) is 75"),
    ("alexnet", 40, "the smallest size it trains on (bisected up to 512 px) is 63"),
])
def test_a_size_the_model_cannot_take_is_refused_before_any_work_with_one_it_can(model, size, needle):
    with pytest.raises(CaseError) as e:
        check_models([TINY.replace(model=model, image_size=size)])
    assert str(e.value).startswith(f"model={model!r} cannot train on image_size={size}: ") and needle in str(e.value)
    check_models([TINY.replace(model=model, image_size=int(needle.rsplit(" ", 1)[1]))])  # and that one trains


def test_a_sweep_trains_the_model_asked_in_every_case():
    tiny = sweeps.build("tiny", 2, "cpu", model="mobilenet_v3_small")
    assert {c.model for c in tiny} == {"mobilenet_v3_small"}  # the recipe's own resnet18 replaced too
    best = sweeps.build("best", 1, "cuda", model="vit_b_16")
    assert {c.model for c in best} == {"vit_b_16"} and {c.input_channels for c in best} == {3}  # no ResNet stem
    padded = Case(input_channels=4)  # a padded input widens a ResNet stem; other models read RGB
    assert sweeps.with_model(padded, "vit_b_16").input_channels == 3
    assert sweeps.with_model(padded, "resnet101").input_channels == 4


def test_a_recipe_builds_the_model_as_measured(tmp_path):
    record = {"machine": "m", "commit_folder": "c", "run_id": "r", "metrics": {"images_per_s": 1.0}}
    path = recipe.write(Case(model="vit_b_16", image_size=384), record, "single", tmp_path)
    assert path.name == "recipe_1gpu_vit_b_16.py"
    assert 'num_classes=S["num_classes"], image_size=384)' in path.read_text()
    assert recipe.file_name(Case()) == "recipe_1gpu.py"  # the article's ResNet-50 keeps its name
    compile(path.read_text(), str(path), "exec")


def test_the_users_factory_is_a_case_of_its_own_source_end_to_end(tmp_path):
    """`--model package.module:factory` from the user's folder: the case id carries the factory and its
    source hash, the record keeps them, the recipe imports it; an edited model is another case, and a
    module edited after the case was made is refused rather than measured under the old id."""
    (tmp_path / "mynets").mkdir()
    (tmp_path / "mynets" / "__init__.py").write_text("")
    (tmp_path / "mynets" / "small.py").write_text(FACTORY_SOURCE)
    flags = ["--device", "cpu", "--num-classes", "10", "--image-size", "32", "--batch-size", "4", "--warmup-steps", "1",
             "--steps", "2", "--repeats", "1", "--results", str(tmp_path / "r")]
    out = subprocess.run([sys.executable, "-m", "bench", "run", "--model", "mynets.small:make", *flags], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=_env())
    assert out.returncode == 0, out.stdout + out.stderr
    (path,) = (tmp_path / "r").rglob("run/*/*.json")
    rec = json.loads(path.read_text())
    sha = models.file_sha(tmp_path / "mynets" / "small.py")
    assert rec["case"]["model"] == "mynets.small:make" and rec["case"]["model_source"] == sha
    assert rec["case_id"].startswith(f"custom-mynets.small-make-{sha[:8]}-single-") and rec["status"] == "ok"
    assert rec["case"]["model_path"] == str(tmp_path) and "model_path" not in identity.id_knobs(rec["case"])
    assert rec["ranks"][0]["model_flops_per_image"] > 0  # counted for the user's network
    case = Case.from_dict(rec["case"])
    script = recipe.write(case, rec, "single, fp32", tmp_path / "recipes")
    assert script.name == "recipe_1gpu_mynets_small_make.py" and "from mynets.small import make" in script.read_text()
    ran = run_script(script, "--warmup", "1", "--steps", "2", "--windows", "1")
    assert ran.returncode == 0 and float(ran.stdout.split("images/s: ")[1].split()[0]) > 0, ran.stderr[-2000:]

    (tmp_path / "mynets" / "small.py").write_text(FACTORY_SOURCE.replace("8,", "16,").replace("(8,", "(16,"))
    edited = case.replace(model_source=models.file_sha(tmp_path / "mynets" / "small.py"))
    assert edited.case_id != rec["case_id"]  # an edited model is another case
    with pytest.raises(CaseError, match="has changed since the case was made"):
        models.build(case.model, 10, 32, case.model_path, case.model_source)
    with pytest.raises(CaseError, match="the factory returned str, not a torch.nn.Module"):
        models.build("mynets.small:not_a_module", 10, 32, str(tmp_path), "")
    missing = subprocess.run([sys.executable, "-m", "bench", "run", "--model", "nosuch.mod:make", *flags], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, env=_env())
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: model='nosuch.mod:make': module 'nosuch.mod' cannot be found")


def _env():
    import os
    return dict(os.environ, PYTHONPATH=str(ROOT), BENCH_SKIP_PEAK="1")


def test_models_lists_every_name_by_family():
    out = subprocess.run([sys.executable, "-m", "bench", "models"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    assert out.stdout.startswith(f"{len(models.torchvision_names())} torchvision classification")
    assert "  vit: vit_b_16, vit_b_32, vit_h_14, vit_l_16, vit_l_32" in out.stdout
    assert "package.module:factory" in out.stdout and max(len(ln) for ln in out.stdout.splitlines()) <= 120


def test_recommend_searches_the_model_asked_with_its_yardsticks():
    from bench.core import recipes
    from bench.harness.recommend_run import base_for
    n, base, note = base_for(1, "mobilenet_v3_small")
    assert base.model == "mobilenet_v3_small" and "(mobilenet_v3_small, 32 px images" in note
    assert recipes.seed_baseline(base, 1).model == recipes.seed_optimized(base, 1).model == "mobilenet_v3_small"
    out = subprocess.run([sys.executable, "-m", "bench", "recommend", "--model", "resnet5", "--budget", "10s"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error: model='resnet5' is not a torchvision")
    assert len(out.stderr.strip().splitlines()) == 1 and not out.stdout
