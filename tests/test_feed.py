"""`bench feed`: R loader ranks at once on this host, no model, warm and cold, judged against what one GPU
consumes; refusals before any work; the answer in the machine's answers, in English and in Chinese."""
import contextlib
import copy
import io
from pathlib import Path

import pytest

from bench.analysis import compare, feed
from bench.cli import feed as feed_cli
from bench.cli.main import main
from bench.data import generate
from bench.present import answers_text, feed_text
from bench.present.text import table
from bench.store import query
from conftest import ROOT
from test_chinese import english_left

H100 = "NVIDIA H100 80GB HBM3"
TINY = ["--batch-size", "4", "--image-size", "32", "--window-s", "0.1", "--windows", "2"]


def bench(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    """One feed run on tiny JPEGs: both CPU loaders, R = 1 and 2, warm and cold, one process a rung, beside the
    other test worker's work (its rungs may be marked host shared)."""
    data = tmp_path_factory.mktemp("feed-jpegs")
    generate.make_dataset(data, 96, 4, seed=3, workers=2, echo=lambda m: None)
    results = tmp_path_factory.mktemp("feed-results")
    code, out = bench("feed", "--gpus", "2", "--data", str(data), "--loaders", "torch,dali-cpu", "--cold",
                      "--processes", "1", "--per-gpu", "40", "--results", str(results), *TINY)
    records = query.load([p for p in results.iterdir() if p.is_dir()])[0]
    return code, out, records, results


@pytest.mark.slow
def test_feed_measures_each_cpu_loader_at_1_and_2_ranks_warm_and_cold(fed):
    code, out, records, _ = fed
    assert code == 0, out
    seen = {(r.case["loader"], r.case.get("dali_device") if r.case["loader"] == "dali" else "",
             r.case["gpus"], r.case["cold_reads"]) for r in records}
    assert seen == {(loader, dev, n, cold) for loader, dev in (("torch", ""), ("dali", "cpu"))
                    for n in (1, 2) for cold in (False, True)}
    for r in records:
        assert r.ok and r.sweep == "feed" and r.case["loader_only"] and r.case["device"] == "cpu", r.data["reason"]
        assert r.case["cold_reads"] == ("-cold-" in r.case_id)
        rank = r.data["ranks"][0]
        assert rank["data_set_bytes"] > 96 * 50_000 and rank["host_memory_bytes"] > rank["data_set_bytes"]
        assert ("cold_evict_s" in rank) == r.case["cold_reads"]
        assert r.metrics["storage_read_mb_per_s"] is not None and r.metrics["host_cpu_busy_pct"] > 0
        # a torch rank hands its batches over as the workers made them, as a GPU rank does before its GPU
        # normalizes them; DALI's CPU pipeline normalizes on the host either way
        torch_rank = r.case["loader"] == "torch"
        assert r.case["host_side_only"] == torch_rank == ("-host-side-" in r.case_id)
        assert rank["loader_dtype"] == ("uint8" if torch_rank else "float")
    # cold windows read their files from storage; warm ones from the page cache
    cold = sum(r.metrics["storage_read_mb_per_s"] for r in records if r.case["cold_reads"])
    warm = sum(r.metrics["storage_read_mb_per_s"] for r in records if not r.case["cold_reads"])
    assert cold > 0.5 and cold > 10 * warm


@pytest.mark.slow
def test_feed_page_says_input_side_only_and_ends_on_its_answer(fed):
    _, out, records, _ = fed
    lines = out.rstrip().splitlines()
    title = next(i for i, ln in enumerate(lines) if ln.startswith("Can this host feed 2 x GPU?"))
    assert "Input side only" in lines[title] and "one GPU trains resnet50 at 40.0 images/s (as given by --per-gpu)" in out
    # one process a rung has no interval, and a rung beside others' work on the host is not judged: each row
    # says which, by its own record, and nothing is called fed or too slow
    shared = sum(bool(r.shared_label) for r in records)
    assert sorted(verdicts(out)) == ["no interval (1 process)"] * (len(records) - shared) + [
        "not judged (host shared)"] * shared
    # the same rungs on a quiet host: the answer says why one process decides nothing
    quiet = [query.wrap({**r.data, "metrics": {**r.metrics, "host_cpu_outside_pct": 0.0}}) for r in records]
    page = feed_text.render("en", feed.ladders(quiet, 40.0), 2, "GPU", "resnet50", 40.0, None)
    assert verdicts(page) == ["no interval (1 process)"] * len(records)
    assert "needed, and it ran in one process, so it has no interval to judge by)" in " ".join(page.split())
    last = lines[[i for i, ln in enumerate(lines) if ln.startswith("Can this host feed")][-1]:]
    assert any("torch DataLoader, warm reads" in ln for ln in last)
    assert any("DALI CPU pipeline, cold reads" in ln for ln in last)
    assert any("fits in this host's memory" in ln for ln in last)


def verdicts(page: str) -> list[str]:
    """The verdict column of a feed page's table."""
    rows = [[cell.strip() for cell in ln.split("|")[1:-1]] for ln in page.splitlines() if ln.startswith("| ")]
    column = rows[0].index("verdict")
    return [row[column] for row in rows[1:]]


def with_interval(r: query.Record, ips: float, half_pct: float = 2.0, **metrics) -> query.Record:
    d = copy.deepcopy(r.data)
    d["metrics"].update(images_per_s=ips, images_per_s_ci95=[ips * (1 - half_pct / 100), ips * (1 + half_pct / 100)],
                        **{"host_cpu_outside_pct": 0.0, **metrics})
    return query.wrap(d)


def ladder_of(records, loader, cold, figures: dict, **metrics) -> list[query.Record]:
    return [with_interval(r, figures[r.case["gpus"]], **metrics) for r in records
            if feed.loader_of(r.case) == loader and r.case["cold_reads"] == cold]


@pytest.mark.slow
def test_the_largest_n_fed_and_what_stops_the_next(fed):
    records = fed[2]
    # the torch loader, warm: 1 rank delivers 100 and 2 ranks 150, against 80 a GPU: 1 fed, the CPUs stop 2
    warm = ladder_of(records, "torch", False, {1: 100.0, 2: 150.0}, host_cpu_busy_pct=97.0)
    [ladder] = feed.ladders(warm, 80.0)
    assert [g.verdict for g in ladder.rungs] == ["feeds", "short"] and ladder.largest == 1
    assert ladder.stop["kind"] == "cpu" and ladder.stop["ranks"] == 2
    line = feed_text.answer_line("en", ladder, H100)
    threads = ladder.rungs[0].record.data["ranks"][0]["loader_threads"]  # the machine's cores over 1 rank
    # each figure a verdict rests on carries the 95% interval it was judged by (+-2% here)
    assert line.startswith(f"torch DataLoader, warm reads: feeds 1 x {H100} at full speed (100.0 (95% interval "
                           f"98.0-102.0) images/s, 80.0 needed; {threads} workers or threads per rank)")
    assert "at 2 ranks the host's CPUs stop it (97% busy, 150.0 (95% interval 147.0-153.0) of 160.0 images/s)" in line
    # cold at 2 ranks far below warm, the host not full: the storage stops it
    cold = ladder_of(records, "torch", True, {1: 95.0, 2: 90.0}, host_cpu_busy_pct=40.0, storage_read_mb_per_s=12.5)
    ladders = {(x.loader, x.cold): x for x in feed.ladders(warm + cold, 80.0)}
    assert ladders[("torch", True)].stop["kind"] == "storage"
    assert "the storage stops it (cold 90.0 (95% interval 88.2-91.8) against warm 150.0 (95% interval 147.0-153.0) " \
        "images/s, reading 12.5 MB/s)" in \
        feed_text.answer_line("en", ladders[("torch", True)], H100)
    # neither full: the loader's own settings; within noise: not decided; all fed: the most measured
    loose = ladder_of(records, "dali-cpu", False, {1: 100.0, 2: 150.0}, host_cpu_busy_pct=50.0)
    assert feed.ladders(loose, 80.0)[0].stop["kind"] == "loader"
    close = ladder_of(records, "dali-cpu", False, {1: 100.0, 2: 158.0}, host_cpu_busy_pct=50.0)
    undecided = feed.ladders(close, 80.0)[0]
    assert undecided.largest == 1 and not undecided.decided
    assert "at 2 ranks its interval cannot tell (158.0 (95% interval 154.8-161.2) against 160.0 images/s needed)" in \
        feed_text.answer_line("en", undecided, H100)
    busy = ladder_of(records, "dali-cpu", False, {1: 100.0, 2: 150.0}, host_cpu_outside_pct=35.0)
    shared = feed.ladders(busy, 80.0)[0]  # others' work on the host during the windows: never judged
    assert [g.verdict for g in shared.rungs] == ["shared", "shared"] and shared.largest == 0 and not shared.decided
    assert "| not judged (host shared) |" in table(feed_text.rows("en", [shared]), ["a"] * 11)
    everything = feed.ladders(loose, 50.0)[0]
    assert everything.largest == 2 and "the most measured" in feed_text.answer_line("en", everything, H100)
    none = feed.ladders(loose, 120.0)[0]
    assert none.largest == 0 and feed_text.answer_line("en", none, H100).startswith(
        f"DALI CPU pipeline, warm reads: feeds no {H100} at full speed (1 rank: 100.0 of the 120.0")
    assert "one needs); at 1 rank neither the CPUs (50% busy)" in feed_text.answer_line("en", none, H100)
    assert "threads per rank, 100.0 (95% interval 98.0-102.0) of 120.0 images/s)" in feed_text.answer_line("en", none, H100)
    assert "100.0（95% 区间 98.0-102.0）/120.0 图像/秒" in feed_text.answer_line("zh", none, H100)


@pytest.mark.slow
def test_a_cold_record_whose_windows_were_not_drained_is_shown_never_judged(fed):
    records = fed[2]
    cold = ladder_of(records, "torch", True, {1: 100.0, 2: 150.0})
    assert all(r.data["ranks"][0]["cold_batches_drained_per_window"] >= 1 for r in cold)  # this code drains them
    assert [g.verdict for g in feed.ladders(cold, 80.0)[0].rungs] == ["feeds", "short"]

    def undrained(r: query.Record) -> query.Record:  # as a cold record of the first version stored it
        d = copy.deepcopy(r.data)
        for rank in d["ranks"]:
            del rank["cold_batches_drained_per_window"]
        return query.wrap(d)
    [ladder] = feed.ladders([cold[0], undrained(cold[1])], 80.0)
    assert [g.verdict for g in ladder.rungs] == ["feeds", "undrained"] and ladder.largest == 1 and not ladder.decided
    assert "at 2 ranks its cold windows opened on batches queued while the cache was emptied" in \
        feed_text.answer_line("en", ladder, H100)
    assert "| not judged (cold queue not drained) |" in table(feed_text.rows("en", [ladder]), ["a"] * 11)
    assert "冷读队列未清空" in table(feed_text.rows("zh", [ladder]), ["a"] * 11)
    # compare matches it with a drained run of the same id, but judges nothing: the drain changed the measurement
    rows = compare.compare([cold[0], undrained(cold[1])], [cold[0], with_interval(cold[1], 60.0)])
    row = next(r for r in rows if r["case"] == cold[1].case_id)
    assert row["verdict"] == "inconclusive" and row["delta_pct"] == pytest.approx(-60.0)
    assert row["note"] == "cold windows undrained in a (flattered): not judged" and not compare.regressions(rows, 5)
    rows = compare.compare([cold[0], cold[1]], [cold[0], with_interval(cold[1], 60.0)])  # both drained: judged
    assert next(r for r in rows if r["case"] == cold[1].case_id)["verdict"] == "slower" and compare.regressions(rows, 5)
    [first] = feed.ladders([undrained(cold[0])], 20.0)  # on its first rung the answer says why nothing is decided
    assert feed_text.answer_line("en", first, H100).endswith(
        "(1 rank: 100.0 against 20.0 images/s needed, and its cold windows opened on batches queued while the cache "
        "was emptied (a record made before that was fixed): not judged, run it again)")


@pytest.mark.slow
def test_a_torch_record_whose_ranks_normalized_on_the_host_is_shown_never_judged(fed):
    warm = ladder_of(fed[2], "torch", False, {1: 100.0, 2: 150.0})

    def normalized(r: query.Record) -> query.Record:  # as the first torch feed records stored their case
        d = copy.deepcopy(r.data)
        del d["case"]["host_side_only"]
        return query.wrap(d)
    [ladder] = feed.ladders([warm[0], normalized(warm[1])], 80.0)
    assert [g.verdict for g in ladder.rungs] == ["feeds", "host normalized"] and ladder.largest == 1
    assert not ladder.decided and "at 2 ranks its ranks normalized every batch on the host, work a GPU rank does " \
        "on its GPU (a record made before that was fixed): not judged, run it again" in feed_text.answer_line(
            "en", ladder, H100)
    assert "| not judged (normalized on the host) |" in table(feed_text.rows("en", [ladder]), ["a"] * 11)
    assert "未判断（在主机上归一化）" in table(feed_text.rows("zh", [ladder]), ["a"] * 11)


@pytest.mark.slow
def test_each_loader_answers_from_its_newest_feed_run(fed):
    """The torch DataLoader fed in one run and DALI in a later one: both answer, each judged by the pace its
    own run kept; a later run of one loader replaces that loader's answer only."""
    records = fed[2]

    def later(r: query.Record, run: str, minutes: int) -> query.Record:
        d = copy.deepcopy(r.data)
        d.update(run_id=run, started_at=f"2099-01-01T00:{minutes:02d}:00+00:00")
        return query.wrap(d)
    dali = [later(r, "20990101T000100Z-dali", 1) for r in records if r.case["loader"] == "dali"]
    torch_runs = [r for r in records if r.case["loader"] == "torch"]
    runs = feed.latest_feeds(torch_runs + dali)
    assert [run[0].run_id for run in runs] == ["20990101T000100Z-dali", records[0].run_id]
    assert {feed.loader_of(r.case) for r in runs[0]} == {"dali-cpu"} and len(runs[1]) == 4
    text = "\n".join(answers_text.feed_lines(torch_runs + dali))
    assert f"(bench feed, runs 20990101T000100Z-dali, {records[0].run_id};" in text
    assert "torch DataLoader, warm reads" in text and "DALI CPU pipeline, cold reads" in text
    assert text.count("fits in this host's memory") == 1
    newer_torch = [later(r, "20990101T000200Z-torch", 2) for r in torch_runs]
    runs = feed.latest_feeds(torch_runs + dali + newer_torch)
    assert [run[0].run_id for run in runs] == ["20990101T000200Z-torch", "20990101T000100Z-dali"]


@pytest.mark.slow
def test_resume_runs_only_the_rungs_an_interrupted_run_did_not_store_and_judges_one_ladder(fed, tmp_path):
    """An interrupted feed run (its manifest says so) missing one rung: `--resume` runs that rung alone, and the
    page and the machine's answers judge both runs' rungs as one ladder, led by the run that continued it."""
    import json
    import shutil
    _, _, records, results = fed
    copied = tmp_path / "r"
    shutil.copytree(results, copied)
    first = records[0].run_id
    (manifest,) = copied.rglob(f"runs/{first}.json")
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "interrupted": True}))
    lost = next(r for r in records if r.case["loader"] == "torch" and r.case["cold_reads"] and r.case["gpus"] == 1)
    (gone,) = copied.rglob(f"{Path(lost.path).parent.name}/{first}.json")
    gone.unlink()
    data = records[0].case["data_dir"]
    code, out = bench("feed", "--gpus", "2", "--data", data, "--loaders", "torch,dali-cpu", "--cold", "--processes",
                      "1", "--per-gpu", "40", "--resume", "--results", str(copied), *TINY)
    assert code == 0, out
    assert f"--resume: continuing run {first} of sweep 'feed'" in out
    assert out.count("already stored, skipped (--resume)") == 7
    stored = query.load([p for p in copied.iterdir() if p.is_dir()])[0]
    (again,) = [r for r in stored if r.run_id != first]
    assert again.case_id == lost.case_id and again.ok
    (later,) = copied.rglob(f"runs/{again.run_id}.json")
    assert json.loads(later.read_text())["resumed_runs"] == [first]
    page = out[out.index("Can this host feed"):]  # its answer, the table, then the answer again
    assert page.count("| torch DataLoader ") == 4 and page.count("| DALI CPU pipeline ") == 4
    (run,) = feed.latest_feeds(stored)  # one ladder of each loader and reading, led by the run that resumed
    assert run[0].run_id == again.run_id and len(run) == 8
    assert f"(bench feed, run {again.run_id};" in "\n".join(answers_text.feed_lines(stored))


@pytest.mark.slow
def test_a_failed_rung_out_of_memory_is_what_stops_the_ladder(fed):
    records = fed[2]
    rungs = ladder_of(records, "torch", False, {1: 100.0, 2: 150.0})
    d = copy.deepcopy(rungs[1].data)
    d.update(status="oom", reason="rank 1 was killed by the kernel's OOM killer (out of memory)")
    [ladder] = feed.ladders([rungs[0], query.wrap(d)], 80.0)
    assert ladder.largest == 1 and ladder.stop["kind"] == "memory"
    assert "at 2 ranks memory stops it (rank 1 was killed" in feed_text.answer_line("en", ladder, H100)


def test_the_pace_comes_from_the_fastest_stored_one_gpu_figure_of_the_gpu_model():
    results = ROOT / "results"
    args = type("A", (), {"per_gpu": None, "model": "resnet50"})()
    ips, source = feed_cli.pace(args, H100, results)
    stored = query.load([results / "1x-nvidia-h100-80gb-hbm3"])[0]
    single = [r for r in stored if r.ok and r.current and r.case["gpus"] == 1 and r.case["model"] == "resnet50"
              and not r.case["loader_only"] and not r.gpu_shared]
    assert source.case["device"] == "cuda" and ips == max(r.images_per_s for r in single) > 4000
    assert feed_cli.pace(args, "NVIDIA B200", results) == (None, None)  # none stored: no pace, never a guess
    args.per_gpu = 1234.5
    assert feed_cli.pace(args, H100, results) == (1234.5, None)


@pytest.mark.slow
def test_the_machine_answers_carry_the_feed_answer_in_english_and_in_chinese(fed):
    records = fed[2]
    text = answers_text.machine_answers(records[0].machine, records)
    assert "Feeding GPUs from this host (bench feed, run" in text and "torch DataLoader, cold reads" in text
    zh = answers_text.machine_answers(records[0].machine, records, lang="zh")
    assert "本机喂 GPU 的能力" in zh and "DALI CPU 流水线，冷读" in zh
    page = feed_text.render("zh", feed.ladders(records, 40.0), 2, H100, "resnet50", 40.0, None)
    assert "仅输入侧" in page and english_left(page, records) == []


@pytest.mark.parametrize("argv, says", [
    (["--gpus", "0"], "--gpus=0 must be at least 1"),
    (["--data", "/nonexistent/jpegs"], "data folder /nonexistent/jpegs does not exist"),
    (["--loaders", "torch,nvjpeg"], "--loaders 'torch,nvjpeg': nvjpeg not known; accepted: torch, dali-cpu, dali-mixed"),
    (["--loaders", "dali-mixed"], "--loaders dali-mixed decodes on a GPU and this machine shows none"),
    (["--per-gpu", "0"], "--per-gpu=0.0 must be a positive images/s figure"),
])
def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path, argv, says):
    code, out = bench("feed", "--results", str(tmp_path / "r"), *argv)
    assert code == 2 and out.strip() == f"error: {out.strip()[7:]}" and says in out and len(out.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_loader_that_is_not_installed_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(feed_cli, "dali_installed", lambda: False)
    code, out = bench("feed", "--loaders", "dali-cpu", "--results", str(tmp_path / "r"))
    assert code == 2 and "nvidia-dali is not installed; pip install nvidia-dali-cuda130" in out
    assert len(out.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_data_make_gib_writes_at_least_that_much(tmp_path):
    code, out = bench("data", "make", "--gib", "0.004", "--classes", "3", "--out", str(tmp_path / "d"))
    files = list((tmp_path / "d").rglob("*.jpg"))
    assert code == 0 and sum(f.stat().st_size for f in files) >= 0.004 * 2**30
    assert {f.parent.name for f in files} == {"class_0000", "class_0001", "class_0002"}
    assert bench("data", "make", "--gib", "0", "--out", str(tmp_path / "e"))[0] == 2


@pytest.mark.slow
def test_feed_records_have_a_history_that_says_they_ran_on_cpu_ranks(fed):
    results = fed[3]
    code, out = bench("history", "feed-torch-resnet50-ddp-g2", "--results", str(results))
    assert code == 0, out
    assert "torch/wauto (loader only, 2 CPU rank(s), no GPU), cold reads" in out and "| feed " in out


@pytest.mark.fresh_processes
def test_a_worker_imports_torchvision_only_where_its_case_needs_it():
    """A DALI rank or a loader-only rank has no torchvision transform or model: its import (a second or more,
    since it imports torch._dynamo) is left out of every process of `bench feed`'s DALI rungs."""
    import subprocess
    import sys
    probe = ("import sys, bench.worker.rank, bench.worker.loaders.dali, bench.worker.trainer; "
             "print('torchvision' in sys.modules); "
             "from pathlib import Path; from bench.data import folder; "
             "from bench.worker.loaders.torch_loader import JpegFolder; "
             "JpegFolder(folder.Folder(Path('.')), 32); print('torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
