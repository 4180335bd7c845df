import hashlib
from pathlib import Path

import numpy
import pytest
import torch

from bench.data import folder as jpeg_folder, generate
from bench.core.case import Case
from bench.worker.context import RankContext

pytestmark = pytest.mark.slow


def test_generated_images_look_like_imagenet(jpegs):
    from PIL import Image
    files = sorted(jpegs.rglob("*.jpg"))
    assert len(files) == 48 and len({f.parent.name for f in files}) == 4
    sizes = [f.stat().st_size for f in files]
    assert 80_000 < sum(sizes) / len(sizes) < 140_000  # ImageNet's mean is near 110 KB
    dims = []
    for f in files:
        with Image.open(f) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            assert not im.info.get("progressive") and not im.info.get("progression")  # baseline JPEG
            dims.append(im.size)
            px = torch.tensor(numpy.asarray(im.convert("L").resize((64, 48))).flatten().tolist(), dtype=torch.float32)
            assert px.std() > 10  # not flat colour
    assert len(set(dims)) > 1  # mixed sizes
    mean_w = sum(w for w, _ in dims) / len(dims)
    mean_h = sum(h for _, h in dims) / len(dims)
    assert 400 < mean_w < 560 and 330 < mean_h < 450


def test_not_white_noise():
    img = generate.render_image(0, 0).convert("L")
    x = torch.tensor(numpy.asarray(img), dtype=torch.float32)
    # neighbouring pixels of a photograph are strongly correlated; white noise's are not
    a, b = x[:, :-1].flatten(), x[:, 1:].flatten()
    corr = torch.corrcoef(torch.stack([a, b]))[0, 1]
    assert corr > 0.5  # white noise gives about 0


def test_generation_is_deterministic_and_resumes(tmp_path, jpegs):
    generate.make_dataset(tmp_path, 8, 4, seed=1, workers=1, echo=lambda m: None)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    for f in sorted(tmp_path.rglob("*.jpg")):
        assert digest(f) == digest(jpegs / f.relative_to(tmp_path))
    victim = next(tmp_path.rglob("*.jpg"))
    victim.unlink()
    before = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("*.jpg")}
    generate.make_dataset(tmp_path, 8, 4, seed=1, workers=1, echo=lambda m: None)
    assert victim.exists()
    assert all(f.stat().st_mtime_ns == t for f, t in before.items())  # finished files kept


def test_bad_folders_are_named(tmp_path):
    with pytest.raises(jpeg_folder.DataError, match="does not exist; expected an ImageFolder tree"):
        jpeg_folder.scan(tmp_path / "nope")
    with pytest.raises(jpeg_folder.DataError, match=r"has no class sub-folders \(it is empty\)"):
        jpeg_folder.scan(tmp_path)
    (tmp_path / "a.jpg").write_bytes(b"\xff\xd8\xff")
    with pytest.raises(jpeg_folder.DataError, match="images lie directly in it"):
        jpeg_folder.scan(tmp_path)
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "notes.txt").write_text("hi")
    with pytest.raises(jpeg_folder.DataError, match=r"no JPEG files \(1 other file\(s\) skipped\)"):
        jpeg_folder.scan(tmp_path)


def test_corrupt_and_non_jpeg_files_are_counted_and_skipped(tmp_path, jpegs):
    import shutil
    shutil.copytree(jpegs, tmp_path / "d")
    good = sorted((tmp_path / "d").rglob("*.jpg"))
    good[0].write_bytes(good[0].read_bytes()[:5000])  # truncated
    (good[1].parent / "readme.txt").write_text("not an image")
    (good[2].parent / "fake.jpg").write_bytes(b"PNG pretending")
    folder = jpeg_folder.scan(tmp_path / "d")
    assert folder.count == 47 and len(folder.skipped) == 3


def test_size_check_refuses_a_window_larger_than_the_data(jpegs):
    folder = jpeg_folder.scan(jpegs)
    case = Case(device="cpu", strategy="ddp", gpus=2, batch_size=8, steps=4, loader="torch", data_dir=str(jpegs))
    with pytest.raises(jpeg_folder.DataError, match="48 JPEGs \\(24 per rank\\) but one measured window .* reads 32 per rank; make at least 64"):
        jpeg_folder.check_size(folder, case)
    jpeg_folder.check_size(folder, case.replace(steps=3))


def _case(jpegs, **kw):
    base = dict(device="cpu", model="resnet18", num_classes=4, batch_size=4, image_size=32, steps=2,
                loader="torch", data_dir=str(jpegs))
    base.update(kw)
    return Case(**base)


@pytest.mark.parametrize("channels_last", [False, True])
def test_torch_loader_batches(jpegs, channels_last):
    from bench.worker.loaders.torch_loader import TorchLoader
    loader = TorchLoader(_case(jpegs, channels_last=channels_last, num_workers=1), RankContext())
    images, labels = next(iter(loader))
    assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
    assert images.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert labels.dtype == torch.int64 and 0 <= labels.min() and labels.max() < 4
    assert -3 < images.mean() < 3  # normalised, not 0..255


def test_torch_loader_shards_are_disjoint_and_cover_the_data_every_epoch(jpegs):
    """One endless stream per rank: each epoch's 24 indices are that rank's shard, reshuffled."""
    import itertools
    from bench.worker.loaders.torch_loader import TorchLoader
    epochs = []
    for rank in (0, 1):
        loader = TorchLoader(_case(jpegs, strategy="ddp", gpus=2), RankContext(rank=rank, world_size=2))
        stream = list(itertools.islice(iter(loader.sampler), 3 * 24))
        epochs.append([stream[i * 24:(i + 1) * 24] for i in range(3)])
        assert loader.sampler.epochs_started == 3
    for e in range(3):
        r0, r1 = set(epochs[0][e]), set(epochs[1][e])
        assert len(r0) == len(r1) == 24 and not r0 & r1 and r0 | r1 == set(range(48))
    assert epochs[0][0] != epochs[0][1]  # set_epoch: a new shuffle each epoch


def test_torch_loader_runs_on_across_epochs_without_a_new_iterator(jpegs):
    from bench.worker.loaders.torch_loader import TorchLoader
    loader = TorchLoader(_case(jpegs, num_workers=1), RankContext())
    batches = iter(loader)
    for _ in range(48 // 4 * 2 + 1):  # two epochs and a bit, through one DataLoader iterator
        next(batches)
    assert loader.facts()["loader_epochs_started"] == 3
    assert loader.input_wait_s > 0  # the time spent blocked on the workers is counted


def test_data_wait_is_the_loader_own_count_when_it_keeps_one():
    """A blocking device copy waits for queued GPU work; only the wait on input producers counts."""
    import time
    from bench.worker.trainer import Trainer
    trainer = Trainer(_case(None, loader="synthetic", data_dir=""), RankContext())
    images, labels = torch.randn(4, 3, 32, 32), torch.randint(0, 4, (4,))
    produced = {"s": 0.0}

    def batches():
        while True:
            time.sleep(0.05)  # stands for a copy waiting on the device
            produced["s"] += 0.001  # what the loader says it waited for its workers
            yield images, labels
    stream = batches()
    assert trainer.step(stream) >= 0.05  # no loader clock: the whole fetch counts
    trainer.input_wait_clock = lambda: produced["s"]
    assert trainer.step(stream) == pytest.approx(0.001)


def test_dali_cpu_pipeline_batches_and_shards(jpegs):
    pytest.importorskip("nvidia.dali")
    from bench.worker.loaders.dali import DaliLoader, _pipeline
    loader = DaliLoader(_case(jpegs, loader="dali", dali_device="cpu", channels_last=True), RankContext())
    images, labels = next(iter(loader))
    assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert labels.dtype == torch.int64 and labels.max() < 4
    assert -3 < images.mean() < 3
    facts = loader.facts()
    assert facts["loader_dtype"] == "float" and "hw_decoder_load_used" not in facts  # the CPU decodes: no share
    loader.close()
    deeper = DaliLoader(_case(jpegs, loader="dali", dali_device="cpu", dali_prefetch_depth=3), RankContext())
    assert deeper.prefetch_batches == 3 and next(iter(deeper))[0].shape == (4, 3, 32, 32)
    deeper.close()
    # shards by global rank: with each file labelled by its own index, one epoch per rank
    folder = jpeg_folder.scan(jpegs)
    case = _case(jpegs, loader="dali", dali_device="cpu", strategy="ddp", gpus=2)
    seen = []
    for rank in (0, 1):
        pipe = _pipeline(case, RankContext(rank=rank, world_size=2), folder.files, list(range(48)), 4, 0.65)
        got = set()
        for _ in range(6):  # 24 files per shard, 4 per batch
            _, lab = pipe.run()
            got |= {int(x) for x in lab.as_array().reshape(-1)}
        seen.append(got)
    assert not seen[0] & seen[1] and seen[0] | seen[1] == set(range(48))


def test_dali_decodes_whole_images_and_crops_after_where_asked(jpegs):
    pytest.importorskip("nvidia.dali")
    from bench.worker.loaders.dali import DaliLoader, _pipeline
    folder = jpeg_folder.scan(jpegs)
    ops = {}
    for crop in ("decoder", "resize"):
        case = _case(jpegs, loader="dali", dali_device="cpu", dali_crop=crop)
        ops[crop] = _pipeline(case, RankContext(), folder.files, folder.labels, 4, 0.65).serialize()
    assert b"decoders__ImageRandomCrop" in ops["decoder"] and b"RandomResizedCrop" not in ops["decoder"]
    assert b"decoders__Image" in ops["resize"] and b"RandomResizedCrop" in ops["resize"]
    assert b"ImageRandomCrop" not in ops["resize"]
    loader = DaliLoader(_case(jpegs, loader="dali", dali_device="cpu", dali_crop="resize", channels_last=True),
                        RankContext())
    epoch = [next(iter(loader)) for _ in range(12)]  # one epoch of 48 files, 4 per batch
    assert all(images.shape == (4, 3, 32, 32) and images.dtype == torch.float32 for images, _ in epoch)
    assert all(-3 < images.mean() < 3 for images, _ in epoch)
    assert loader.facts()["loader_crop"] == "resize"
    loader.close()


def test_a_cpu_share_splits_each_batch_its_files_and_threads_between_two_pipelines(jpegs):
    pytest.importorskip("nvidia.dali")
    from bench.worker.loaders.dali import DaliLoader, split_batch, split_files, split_threads
    assert split_batch(512, 1 / 3) == (341, 171) and split_batch(4, 0.5) == (2, 2)
    (gf, gl), (cf, cl) = split_files(list("abcdefghi"), list(range(9)), 1 / 3)
    assert cf == ["c", "f", "i"] and cl == [2, 5, 8] and gf == list("abdegh")  # spread over the list
    assert split_threads(16) == (4, 11) and split_threads(2) == (1, 1) and split_threads(8) == (2, 5)
    loader = DaliLoader(_case(jpegs, loader="dali", dali_device="cpu", channels_last=True, dali_cpu_share=0.5),
                        RankContext())
    assert len(loader.pipes) == 2 and loader.facts()["loader_cpu_batch"] == 2
    stream = iter(loader)
    labels = []
    for _ in range(12):  # one epoch of 48 files: 24 in each pipeline's list, 2 of them in each batch
        images, target = next(stream)
        assert images.shape == (4, 3, 32, 32) and images.is_contiguous(memory_format=torch.channels_last)
        labels += target.tolist()
    assert loader.delivered == 48 and sorted(set(labels)) == [0, 1, 2, 3]
    loader.close()


def test_dali_stream_handoff_delivers_dense_batches_epoch_after_epoch(jpegs):
    pytest.importorskip("nvidia.dali")
    from bench.worker.loaders.dali import DaliLoader, StreamHandoff, _pipeline, handoff_used
    folder = jpeg_folder.scan(jpegs)
    case = _case(jpegs, loader="dali", dali_device="cpu", channels_last=True)
    pipe = _pipeline(case, RankContext(), folder.files, list(range(48)), 8, 0.65)
    handoff = StreamHandoff(pipe, torch.device("cpu"))
    labels = []
    for _, out in zip(range(12), handoff):  # two epochs of 48 files, 8 per batch
        (batch,) = out
        assert batch["images"].shape == (8, 32, 32, 3) and batch["images"].dtype == torch.float32
        labels += batch["labels"].reshape(-1).tolist()
    assert sorted(labels[:48]) == list(range(48)) and sorted(labels[48:]) == list(range(48))
    assert len(handoff.held) == StreamHandoff.HELD  # the last batches' DALI buffers stay referenced
    # where there is no CUDA stream the host takes the outputs (DALI's iterator), and the record says so
    loader = DaliLoader(case, RankContext())
    assert loader.handoff == "host" and loader.facts()["loader_handoff"] == "host"
    gpu = case.replace(device="cuda", dali_device="mixed")
    assert handoff_used(gpu, torch.device("cuda", 0)) == "host"
    assert handoff_used(gpu.replace(dali_handoff="stream"), torch.device("cuda", 0)) == "stream"
    loader.close()


def test_dali_missing_is_a_skip_with_the_install_command(jpegs, monkeypatch):
    import builtins
    from bench.worker import loaders
    real_import = builtins.__import__

    def no_dali(name, *a, **k):
        if name.startswith("nvidia.dali"):
            raise ImportError("No module named 'nvidia.dali'")
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_dali)
    with pytest.raises(loaders.SkipCase, match="nvidia-dali is not installed; pip install nvidia-dali-cuda130"):
        loaders.make(_case(jpegs, loader="dali", dali_device="cpu"), RankContext())


@pytest.mark.fresh_processes  # its processes start with an import hook: a fork server of their own would be slower
def test_dali_missing_end_to_end_is_stored_as_skipped(jpegs, tmp_path):
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parent.parent
    # every process of the case starts with an import hook that hides DALI
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class HideDali:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'nvidia.dali' or name.startswith('nvidia.dali.'):\n"
        "            raise ImportError('DALI hidden for this test')\n"
        "sys.meta_path.insert(0, HideDali())\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "bench", "run", "--device", "cpu", "--model", "resnet18",
                          "--batch-size", "4", "--image-size", "32", "--steps", "2", "--warmup-steps", "1",
                          "--loader", "dali", "--dali-device", "cpu", "--data-dir", str(jpegs),
                          "--results", str(tmp_path / "r")], cwd=root, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skipped: nvidia-dali is not installed" in out.stdout


@pytest.fixture(scope="module")
def three_workers(jpegs):
    """One torch-loader case with three persistent workers prefetching three batches each, run once for the
    tests of its warm-up and of its windows."""
    from bench.harness.launch import run_case
    return run_case(_case(jpegs, num_workers=3, persistent_workers=True, prefetch_factor=3, steps=4, warmup_steps=2,
                          repeats=1, timeout_s=120.0))


def test_warm_up_drains_what_the_loader_prefetched(jpegs, three_workers):
    """A window served from batches prefetched during start-up would overstate the loader."""
    from bench.harness.launch import run_case
    r = three_workers
    assert r["status"] == "ok", r
    assert r["ranks"][0]["warmup_steps_run"] == 4  # 1 + a whole round of the 3 workers
    assert r["ranks"][0]["prefetched_batches_drained"] == 3 * 3  # workers x prefetch_factor
    only = run_case(_case(jpegs, loader_only=True, num_workers=0, warmup_steps=2, repeats=1, timeout_s=120.0))
    assert only["status"] == "ok" and only["ranks"][0]["prefetched_batches_drained"] == 0


def test_torch_loader_windows_cover_whole_rounds_of_its_workers(three_workers):
    """Workers hand over whole batches in turn: a window must not end mid-round."""
    r = three_workers
    assert r["status"] == "ok", r
    assert r["metrics"]["steps_per_window"] == 6  # 4 rounded up to whole rounds of 3 workers
    assert r["ranks"][0]["warmup_steps_run"] == 4  # 1 + the timed warm-up, one whole round of 3
    assert r["ranks"][0]["settle_steps_run"] == 6  # then one unmeasured window, so the span starts steady
    assert r["ranks"][0]["loader_threads"] == 3
    # three decoding workers and the training step on this machine's cores: the counters saw them busy
    rank = r["ranks"][0]
    assert len(rank["host_cpu_busy_pct_windows"]) == 1 and 20.0 < r["metrics"]["host_cpu_busy_pct"] <= 100.0
    assert 0.0 <= r["metrics"]["host_cpu_steal_pct"] < r["metrics"]["host_cpu_busy_pct"]


def test_window_steps_by_hand():
    from bench.worker.context import RankContext
    from bench.worker.loop import steps_per_round, window_steps
    c = Case(device="cpu", steps=5, min_window_s=2.0)
    assert window_steps(c, RankContext(), 0.1) == 20  # 2 s at 0.1 s a step
    assert window_steps(c, RankContext(), 1.0) == 5  # never fewer than `steps`
    assert window_steps(c, RankContext(), 0.1, steps_per_round(c, 16)) == 32  # whole rounds of 16 batches
    acc = Case(device="cpu", strategy="ddp", steps=5, min_window_s=2.0, accumulation_steps=8)
    assert steps_per_round(acc, 16) == 2  # 8 batches a step
    assert window_steps(acc, RankContext(), 0.1, steps_per_round(acc, 16)) == 20
    assert steps_per_round(c, 0) == steps_per_round(c, 1) == 1


def test_data_make_shows_its_progress_and_picks_classes_to_fit(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "bench", "data", "make", "--images", "40", "--out", str(tmp_path / "d")],
                         cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "writing 40 JPEGs" in out.stderr and "40/40" in out.stderr and "time left" in out.stderr
    assert "40 JPEGs in 4 classes" in out.stdout  # about ten images a class, not 100 empty folders
    assert len(list((tmp_path / "d").iterdir())) == 4
