import json
import shutil
from pathlib import Path

import pytest

from bench.core import recipes, sweeps
from bench.present import plots, report
from bench.store import query

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def test_gpu_counts():
    assert sweeps.gpu_counts(1) == [1]
    assert sweeps.gpu_counts(2) == [1, 2]
    assert sweeps.gpu_counts(4) == [1, 2, 4]
    assert sweeps.gpu_counts(6) == [1, 2, 4, 6]


def test_seed_and_best_pair_each_gpu_count():
    seed = sweeps.build("seed", 4)
    assert [(c.name, c.gpus) for c in seed] == [(n, g) for g in (1, 2, 4) for n in ("seed-baseline", "seed-optimized")]
    assert all(c.batch_size == 256 and c.global_batch == 256 * c.gpus for c in seed)
    base, opt = seed[4], seed[5]
    assert (base.strategy, base.precision, base.dp_loss_in_forward) == ("dp", "fp32", False)
    assert (opt.precision, opt.dp_device_selection, opt.dp_output_device, opt.dp_loss_in_forward) == \
        ("fp16", "free_memory", 3, True)
    assert not base.cudnn_benchmark and not opt.cudnn_benchmark  # DataParallel keeps PyTorch's default
    best = sweeps.build("best", 2)
    assert [(c.name, c.strategy) for c in best] == [("seed-baseline", "dp"), ("best", "single"),
                                                    ("best-compiled", "single"), ("seed-baseline", "dp"),
                                                    ("best", "ddp"), ("best-compiled", "ddp")]
    assert best[4].channels_last and best[4].precision == "fp16"


def test_scaling_amp_and_strategies_cover_their_grid():
    scaling = sweeps.build("scaling", 2)
    assert len(scaling) == 4 * 2 * 2
    assert {(c.name, c.gpus, c.batch_size) for c in scaling} == \
        {(n, g, b) for n in ("scaling-ddp", "scaling-dp") for g in (1, 2) for b in (64, 128, 256, 512)}
    amp = sweeps.build("amp", 2)
    assert {(c.precision, c.channels_last) for c in amp} == \
        {(p, cl) for p in ("fp32", "tf32", "bf16", "fp16") for cl in (False, True)}
    strat = sweeps.build("strategies", 2)
    assert {c.name for c in strat} >= {"single", "seed-baseline", "seed-optimized", "ddp",
                                      "ddp-accumulate-article", "ddp-accumulate-no_sync"}


def test_loaders_sweep_pairs_each_loader_with_its_ceiling():
    cases = sweeps.build("loaders", 2, data_dir="/data")
    for n in (1, 2):
        names = {c.name for c in cases if c.gpus == n}
        assert names == {"loader-synthetic", "loader-torch", "loader-torch-only", "loader-dali-mixed",
                         "loader-dali-mixed-only", "loader-dali-cpu", "loader-dali-cpu-only"}
    assert all(c.strategy == "ddp" and c.channels_last for c in cases)
    # a loader-only case runs no model, so it carries no precision; the others train in bf16
    assert {c.precision for c in cases if c.loader_only} == {"fp32"}
    assert {c.precision for c in cases if not c.loader_only} == {"bf16"}
    # windows are bounded by time; a real loader's are longer (workers hand over whole batches, DALI swings)
    assert {(c.min_window_s, c.repeats) for c in cases if c.loader != "synthetic"} == {(recipes.LOADER_WINDOW_S, recipes.LOADER_WINDOWS)}
    assert {c.min_window_s for c in cases if c.loader == "synthetic"} == {2.0}
    # workers and threads are the machine's cores per rank, resolved when a case runs: never in the case id
    assert {c.num_workers for c in cases if c.loader == "torch"} == {-1}
    assert {c.dali_threads for c in cases if c.loader == "dali"} == {-1}


def test_ablation_adds_one_change_at_a_time_then_removes_each_from_the_best():
    cases = sweeps.build("ablation", 2, data_dir="/data")
    chain = [c for c in cases if not c.name.startswith("ablation-best-")]
    assert chain[0].name == "ablation-00-baseline"
    assert (chain[0].strategy, chain[0].precision, chain[0].num_workers, chain[0].loader) == ("dp", "fp32", 0, "torch")
    knobs = [c.name.split("-", 2)[2] for c in chain]
    for knob in ("num-workers", "pin-memory", "non-blocking", "dp-free-memory-gpus", "dp-output-device",
                 "dp-loss-in-forward", "amp-fp16", "ddp", "channels-last", "dali-mixed",
                 "nccl-article-settings", "accumulate-no-sync"):
        assert knobs.count(knob) == 1
    for before, after in zip(chain, chain[1:]):  # cumulative: each step keeps the last one's changes
        if after.name.endswith("pin-memory"):
            assert after.num_workers == before.num_workers and after.pin_memory and not before.pin_memory
    removed = {c.name: c for c in cases if c.name.startswith("ablation-best-")}
    assert removed["ablation-best-without-amp"].precision == "fp32"
    assert removed["ablation-best-without-dali"].loader == "torch"
    assert removed["ablation-best-without-ddp"].strategy == "dp"


def test_unknown_sweep_is_named():
    with pytest.raises(ValueError, match="unknown sweep 'nope'; accepted: seed, best"):
        sweeps.build("nope", 2)


def _ablation_records(tmp_path):
    root = tmp_path / "r"
    shutil.copytree(FIXTURES, root)
    src = next(root.rglob("seed-baseline-*-g4-bs256-*.json"))
    for i, (name, ips) in enumerate([("baseline", 400.0), ("amp-fp16", 600.0), ("ddp", 900.0), ("nccl", 880.0)]):
        rec = json.loads(src.read_text())
        rec["case"]["name"] = f"ablation-{i:02d}-{name}"
        rec["case_id"] = f"ablation-{i:02d}-{name}"
        rec["metrics"]["images_per_s"] = ips
        (src.parent / f"ablation-{i}.json").write_text(json.dumps(rec))
    return root


def test_report_writes_plots_and_report_md(tmp_path):
    root = _ablation_records(tmp_path)
    recs = query.load([root])[0]
    path = report.write_report(recs, tmp_path / "out")
    text = path.read_text()
    assert "## Seed table" in text and "![scaling](plots/scaling.png)" in text and "![ablation](plots/ablation.png)" in text
    for name in ("scaling.png", "baseline-vs-seed-optimized.png", "ablation.png"):
        png = tmp_path / "out" / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert not (tmp_path / "out" / "plots" / "baseline-vs-best.png").exists()  # no `best` case stored


def test_plots_are_drawn_once_per_set_of_records_titles_and_code(tmp_path, monkeypatch):
    from bench.present import plot_cache
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))
    recs = query.load([_ablation_records(tmp_path)])[0]
    first = plots.write_all(recs, tmp_path / "a", ("m", "c"))
    assert [p.name for p in first] == ["scaling.png", "baseline-vs-seed-optimized.png", "ablation.png"]

    def drawn(*a, **kw):
        raise RuntimeError("drawn again")
    for name in ("scaling", "baseline_vs_optimized", "ablation_waterfall"):
        monkeypatch.setattr(plots, name, drawn)
    again = plots.write_all(recs, tmp_path / "b", ("m", "c"))  # copied, not drawn
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in first] and again[0].parent == tmp_path / "b"
    assert plots.write_all(query.load([tmp_path / "r"])[0][::-1], tmp_path / "e", ("m", "c"))  # read again: kept
    shutil.copytree(tmp_path / "r", tmp_path / "another checkout" / "r")  # the same records read from elsewhere
    assert plots.write_all(query.load([tmp_path / "another checkout" / "r"])[0], tmp_path / "h", ("m", "c"))
    for changed in (lambda: plots.write_all(recs[:-1], tmp_path / "c", ("m", "c")),  # another set of records
                    lambda: plots.write_all(recs, tmp_path / "d", ("m", "another commit"))):  # other titles
        with pytest.raises(RuntimeError, match="drawn again"):
            changed()
    monkeypatch.setattr(plot_cache, "code_digest", lambda: "the suite's code changed")
    with pytest.raises(RuntimeError, match="drawn again"):
        plots.write_all(recs, tmp_path / "f", ("m", "c"))
    monkeypatch.undo()
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BENCH_PLOT_CACHE", "0")
    monkeypatch.setattr(plots, "scaling", drawn)
    with pytest.raises(RuntimeError, match="drawn again"):  # turned off: always drawn
        plots.write_all(recs, tmp_path / "g", ("m", "c"))


def test_plots_need_data():
    assert plots.scaling([], Path("/nonexistent")) is None
    assert plots.ablation_waterfall([], Path("/nonexistent")) is None


def test_a_data_folder_reaches_only_the_cases_that_read_it():
    # found on one H200: amp cases run beside loaders with --data took the folder into their ids
    plain = sweeps.build("amp", 1)
    with_data = sweeps.build("amp", 1, data_dir="/data")
    assert [c.case_id for c in with_data] == [c.case_id for c in plain]
    loaders = sweeps.build("loaders", 1, data_dir="/data")
    assert {c.data_dir for c in loaders if c.loader != "synthetic"} == {"/data"}
    assert {c.data_dir for c in loaders if c.loader == "synthetic"} == {""}



def test_one_gpu_ablation_leaves_out_the_steps_that_act_between_gpus():
    one = {c.name: c for c in sweeps.build("ablation", 1, "cuda", data_dir="/d")}
    two = {c.name: c for c in sweeps.build("ablation", 2, "cuda", data_dir="/d")}
    left_out = {n for n in two if n.split("-", 2)[-1] in sweeps.BETWEEN_GPUS_STEPS}
    assert len(left_out) == 4 and set(two) - set(one) == left_out and len(one) == 14
    # nor are their knobs carried on: ablation-07 differs from 03 in precision alone, the amp claim's pair
    # (its id changed with that; 08 onwards reset those knobs and keep theirs)
    amp, before = one["ablation-07-amp-fp16"], one["ablation-03-non-blocking"]
    assert not amp.dp_loss_in_forward and amp.dp_device_selection == "default" and amp.case_id.endswith("-84973711")
    assert amp.replace(name=before.name, precision=before.precision) == before
    # the DALI steps read the hardware decoder's share chosen per GPU since 3ea29e9: at the old 0.65
    # the last step no longer carries the (unrun) NCCL settings on one GPU: a new id
    assert one["ablation-13-accumulate-no-sync"].replace(hw_decoder_load=0.65).case_id.endswith("-16c4cdd7")


def test_the_chinese_report_is_its_own_file(tmp_path):
    recs = query.load([_ablation_records(tmp_path)])[0]
    en = report.write_report(recs, tmp_path / "out")
    before = en.read_text()
    zh = report.write_report(recs, tmp_path / "out", "zh")
    assert zh.name == "REPORT.zh.md" and en.name == "REPORT.md"
    assert en.read_text() == before  # the English report is not replaced
    assert zh.read_text().startswith("# 基准测试报告") and "GPU数量" in zh.read_text()


def test_ablation_bars_are_coloured_by_verdict_not_sign(tmp_path, monkeypatch):
    """400 -> 600 -> 900 are far beyond the assumed noise (green); 900 -> 880 (-2.2%) is within it: grey,
    not red. Records with no interval of their own are hatched."""
    from matplotlib.axes import Axes

    from bench.present import plots
    drawn = []
    real = Axes.bar
    monkeypatch.setattr(Axes, "bar", lambda self, *a, **kw: drawn.append(kw) or real(self, *a, **kw))
    from stored import current
    old = [r for r in query.load([_ablation_records(tmp_path)])[0] if r.case["name"].startswith("ablation-")]
    assert plots.ablation_waterfall(old, tmp_path / "p", ("m", "c")) is not None
    # schema-1 records: no interval stored, hatched, and an older definition, so nothing is decided
    assert [kw["color"] for kw in drawn] == ["C2", "0.6", "0.6", "0.6"] and all(kw["hatch"] == "//" for kw in drawn)
    drawn.clear()
    today = [query.wrap(current(r.data, half_pct=2.0)) for r in old]  # +-2% each: +-2.8% combined
    assert plots.ablation_waterfall(today, tmp_path / "p", ("m", "c")) is not None
    assert [kw["color"] for kw in drawn] == ["C2", "C2", "C2", "0.6"] and all(kw["hatch"] is None for kw in drawn)


def test_make_bench_ends_on_its_answers(readme_copy):
    """The last screen of a sweep is the machine's answers for the model it ran; its per-commit details
    went to REPORT.md, which it names, and are not printed above the answers unless asked (--details)."""
    from readme_doc import readme_command
    out = readme_copy.run(readme_command("make bench SWEEP=tiny"))
    assert out.returncode == 0, out.stderr[-2000:]
    # make's own lines aside ("make[1]: Leaving directory ...", where make test runs it as a sub-make)
    lines = [ln for ln in out.stdout.rstrip().splitlines() if not ln.startswith("make")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("## cpu-") and ln.endswith("commit(s))"))
    answers = "\n".join(lines[start:])
    assert "Seed table" in answers and "Best configuration" in answers and "Does the articles' advice hold here" in answers
    assert lines[-1].startswith(("- ", "  ", "|")) and len(lines) - start < 60  # ends on them, about one screen
    before = "\n".join(lines[:start])
    assert "REPORT.md (this run's every table" in before
    assert not any(ln.startswith("# cpu-") and ", commit " in ln for ln in lines)  # no per-commit section printed


def test_the_default_sweep_measures_the_fastest_set_up_the_suite_knows():
    """On a GPU the best sweep holds the compiled recipe the suite knows (the step compiled, fused SGD, fp16,
    NHWC, ResNet-50 at batch 512); a machine's own recommend winner takes its place, measured as the sweep
    measures and for the model the sweep trains."""
    from bench.cli.sweep import with_recommend_winners
    from bench.core import sweeps
    from bench.core.recipes import RECOMMENDED
    from bench.store import query
    cases = sweeps.build("best", 1, "cuda")
    [compiled] = [c for c in cases if c.name == "best-compiled"]
    assert (compiled.compile, compiled.compile_scope, compiled.optimizer_impl, compiled.batch_size,
            compiled.precision, compiled.channels_last) == ("default", "step", "fused", 512, "fp16", True)
    assert not any(c.compile for c in sweeps.build("best", 1, "cpu"))  # the CPU sweep compiles nothing
    h200 = query.load([Path(__file__).resolve().parents[1] / "results" / "1x-nvidia-h200"])[0]
    swapped, said = with_recommend_winners([("best", cases)], h200)
    [won] = [c for c in swapped[0][1] if c.name == RECOMMENDED]
    assert won.compile == "default" and won.optimizer_impl == "fused" and won.gpus == 1
    assert (won.steps, won.min_window_s, won.repeats, won.model) == (compiled.steps, compiled.min_window_s,
                                                                     compiled.repeats, "resnet50")
    assert said == ["1 GPU(s): this machine's recommend winner (run 20261205T051559Z-8b58, 7,406.7 images/s) replaces "
                    "best-compiled"]
    assert with_recommend_winners([("best", cases)], [])[0] == [("best", cases)]  # none stored: the suite's recipe
    vit = sweeps.build("best", 1, "cuda", **{"model": "vit_b_16"})
    assert with_recommend_winners([("best", vit)], h200)[1] == []  # a winner of another model is not this one's
