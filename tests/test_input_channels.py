"""`input_channels`: images reach the model as RGB (3) or as RGB and a channel of zeros (4), the stem
convolution widened with zero weights there. Refused where no model runs, labelled, in the id only when
set, the same outputs as the RGB model's, delivered by every loader and checked against what ran."""

import pytest
import torch

from bench.core import labels
from bench.core.case import Case
from bench.core.errors import CaseError
from bench.data import generate
from bench.harness.launch import run_case
from bench.present import recipe
from bench.worker.context import RankContext
from bench.worker.dtype_check import LabelMismatch, check_input_channels
from bench.worker.loaders.normalize import DeviceNormalize
from bench.worker.loaders.synthetic import SyntheticLoader
from bench.worker.stem import widen_stem, with_zero_channels
from bench.worker.trainer import build_model
from forked_python import run_script

SMALL = Case(device="cpu", model="resnet18", num_classes=10, batch_size=4, image_size=32, channels_last=True)


@pytest.mark.parametrize("value", [5, 2, 4.0, True, "4"])
def test_only_three_or_four_channels_are_accepted(value):
    with pytest.raises(CaseError, match=r"^input_channels=.* is not accepted; use 3 \(RGB\) or 4 \(RGB and a zero "
                                        r"channel\)$"):
        SMALL.replace(input_channels=value)


def test_refused_where_no_model_runs_labelled_and_in_the_id_only_when_set():
    with pytest.raises(CaseError, match="input_channels=4 does nothing here"):
        Case(device="cpu", loader="torch", data_dir="/x", loader_only=True, input_channels=4)
    padded = SMALL.replace(input_channels=4)
    assert padded.case_id != SMALL.case_id and SMALL.replace(input_channels=3).case_id == SMALL.case_id
    assert "-fp32-cl-4ch-synthetic-" in padded.case_id and "ch-" not in SMALL.case_id
    stored = {k: v for k, v in SMALL.to_dict().items() if k != "input_channels"}
    assert Case.from_dict(stored).case_id == SMALL.case_id  # a record stored before the knob keeps its id
    assert "4-channel input" in labels.describe(padded.to_dict())
    assert "channel" not in labels.describe(SMALL.to_dict())


def test_the_widened_stem_computes_what_the_rgb_stem_computes():
    rgb = build_model(SMALL, RankContext())
    wide = build_model(SMALL.replace(input_channels=4), RankContext())
    assert wide.conv1.in_channels == 4 and rgb.conv1.in_channels == 3
    assert torch.equal(wide.conv1.weight[:, :3], rgb.conv1.weight)  # the same start as the RGB model
    assert not wide.conv1.weight[:, 3:].any()
    images = torch.randn(2, 3, 32, 32)
    padded = with_zero_channels(images, 4, torch.channels_last)
    assert padded.shape == (2, 4, 32, 32) and padded.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(padded[:, :3], images) and not padded[:, 3].any()
    with torch.no_grad():
        assert torch.allclose(wide.conv1(padded), rgb.conv1(images), atol=1e-5)
    assert widen_stem(rgb, 3) is rgb and rgb.conv1.in_channels == 3  # 3 channels: the model as built


def test_synthetic_and_torch_loaders_deliver_the_zero_channel_and_the_label_is_checked():
    ctx = RankContext()
    rgb, padded = (SyntheticLoader(SMALL.replace(input_channels=n), ctx).images for n in (3, 4))
    assert padded.shape == (4, 4, 32, 32) and padded.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(padded[:, :3], rgb) and not padded[:, 3].any()  # the same RGB, then zeros
    normalize = DeviceNormalize(torch.device("cpu"), True, 4)
    out = normalize(torch.full((2, 3, 8, 8), 255, dtype=torch.uint8))
    assert out.shape == (2, 4, 8, 8) and out.is_contiguous(memory_format=torch.channels_last)
    assert not out[:, 3].any() and torch.allclose(out[:, 0], torch.full((2, 8, 8), (255 - 0.485 * 255) / (0.229 * 255)))
    case = SMALL.replace(input_channels=4)
    model = build_model(case, ctx)
    assert check_input_channels(case, model, padded) == {"stem_input_channels": 4}
    with pytest.raises(LabelMismatch, match="input_channels=3 but the stem convolution read 4 channel"):
        check_input_channels(SMALL, model, padded)
    with pytest.raises(LabelMismatch, match="channels past the RGB were not all zero"):
        check_input_channels(case, model, torch.ones(4, 4, 32, 32))


@pytest.mark.slow
def test_dali_pads_the_fourth_channel_with_zeros(tmp_path):
    pytest.importorskip("nvidia.dali")
    from bench.worker.loaders.dali import DaliLoader
    generate.make_dataset(tmp_path, 8, 2, seed=1, workers=1, echo=lambda m: None)
    for channels_last in (True, False):
        case = SMALL.replace(loader="dali", dali_device="cpu", data_dir=str(tmp_path), channels_last=channels_last,
                             steps=2)
        rgb_loader, pad_loader = (DaliLoader(case.replace(input_channels=n), RankContext()) for n in (3, 4))
        (rgb, _), (padded, _) = next(iter(rgb_loader)), next(iter(pad_loader))
        assert padded.shape == (4, 4, 32, 32) and rgb.shape == (4, 3, 32, 32)
        assert padded.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        assert not padded[:, 3].any() and torch.equal(padded[:, :3], rgb)  # the same crops, then zeros
        for loader in (rgb_loader, pad_loader):
            loader.close()


@pytest.mark.slow
def test_a_padded_case_runs_stores_what_its_stem_read_and_its_recipe_runs(tmp_path):
    case = SMALL.replace(input_channels=4, precision="bf16", warmup_steps=1, steps=2, repeats=1, timeout_s=120.0)
    r = run_case(case)
    assert r["status"] == "ok", r
    assert r["ranks"][0]["stem_input_channels"] == 4
    record = {"machine": "1x-cpu", "commit_folder": "abc", "run_id": "r1", "ranks": r["ranks"], "metrics": r["metrics"]}
    path = recipe.write(case, record, labels.describe(case.to_dict()), tmp_path)
    assert "'input_channels': 4," in path.read_text()
    ran = run_script(path, "--warmup", "1", "--steps", "2", "--windows", "1")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.split("images/s: ")[1].split()[0]) > 0
