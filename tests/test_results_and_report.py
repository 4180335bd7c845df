import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.core import files
from bench.present import article, cases, exports, report
from bench.present import text as layout
from bench.store import query, record, tree
from stored import committed_machines, fixture_records

FIXTURES = Path(__file__).parent / "fixtures" / "results"
GOLDEN = Path(__file__).parent / "golden"


def _record(**over):
    rec = {"schema": record.SCHEMA, "sweep": "s", "case_id": "c1", "case": {"name": "x"}, "status": "ok",
           "machine": "m", "commit_folder": "abc", "run_id": "r1", "started_at": "2026-01-01T00:00:00+00:00"}
    rec.update(over)
    return rec


def test_store_writes_atomically_under_machine_commit_sweep(tmp_path, monkeypatch):
    store = tree.Store(tmp_path)
    path = store.save(_record(status="skipped"))
    assert path == tmp_path / "m" / "abc" / "s" / "c1" / "r1.json"
    assert json.loads(path.read_text())["schema"] == record.SCHEMA

    def status(case_id):
        return query.latest_status(query.load([tmp_path])[0], "m", "abc", "s", case_id)
    c1 = query.load([path])[0][0].case_id  # today's id of the stored case (its folder keeps the id it was given)
    assert status(c1) == "skipped"
    assert status("absent") is None

    # a run never replaces another: the same run id again is refused, a second run lands beside it
    with pytest.raises(FileExistsError):
        store.save(_record(status="error"))
    store.save(_record(status="timeout", run_id="r2", started_at="2026-01-02T00:00:00+00:00"))
    assert json.loads(path.read_text())["status"] == "skipped"
    assert status(c1) == "timeout"  # the latest run's

    # a write that dies half-way leaves no file and no temporary behind
    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(files.json, "dumps", boom)
    with pytest.raises(OSError):
        store.save(_record(status="error", run_id="r3"))
    assert sorted(p.name for p in path.parent.iterdir()) == ["r1.json", "r2.json"]


def test_store_rejects_incomplete_or_unknown_status(tmp_path):
    """The one validation: what a save refuses, a load skips with the same words."""
    store = tree.Store(tmp_path)
    with pytest.raises(ValueError, match="lacks case_id"):
        store.save({k: v for k, v in _record().items() if k != "case_id"})
    with pytest.raises(ValueError, match="status 'fine' is not one of ok, oom, error, timeout, skipped"):
        store.save(_record(status="fine"))
    with pytest.raises(ValueError, match="lacks metrics.images_per_s, metrics.images_per_s_per_gpu"):
        store.save(_record(status="ok"))  # an ok record carries its figures
    with pytest.raises(ValueError, match="not a result of schema 2"):
        store.save(_record(schema=1))  # only today's schema is written
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_record(status="fine")))
    assert query.load([bad]) == ([], [f"{bad}: status 'fine' is not one of ok, oom, error, timeout, skipped"])


def test_commit_folder_marks_dirty_trees():
    assert tree.commit_folder({"commit": "0123456789abcdef", "dirty": False}) == "0123456789ab"
    assert tree.commit_folder({"commit": "0123456789abcdef", "dirty": True}) == "0123456789ab-dirty"


def test_bench_commit_wins_over_the_git_of_a_copied_tree(monkeypatch):
    from bench.harness import env
    monkeypatch.delenv("BENCH_COMMIT", raising=False)
    assert env.git_info()["commit_source"] == "git"  # this checkout has .git
    monkeypatch.setenv("BENCH_COMMIT", "e7f7ea4721d5")
    monkeypatch.setenv("BENCH_DIRTY", "0")
    assert env.git_info() == {"commit": "e7f7ea4721d5", "dirty": False, "commit_source": "BENCH_COMMIT"}


def test_corrupt_and_foreign_files_are_reported_and_skipped(tmp_path, capsys):
    shutil.copytree(FIXTURES, tmp_path / "r")
    sweep = next((tmp_path / "r").rglob("seed"))
    (sweep / "broken.json").write_text('{"schema": 1, "case": ')
    (sweep / "other.json").write_text('{"hello": 1}')
    saved = sweep.parent / "pytest-benchmark" / "Linux-CPython-3.12-64bit"
    saved.mkdir(parents=True)
    (saved / "0001_abc.json").write_text('{"benchmarks": []}')  # pytest-benchmark's own runs: not ours, not a problem
    records, problems = query.load([tmp_path / "r"])
    assert len(records) == 7
    assert len(problems) == 2
    assert any("broken.json: unreadable" in p for p in problems)
    assert any("other.json: not a result of schema 1 or 2" in p for p in problems)
    from bench.cli.main import main
    assert main(["report", str(tmp_path / "r"), "--all"]) == 0
    out = capsys.readouterr()
    assert "warning: skipped" in out.err and "broken.json" in out.err
    row = next(ln for ln in out.out.splitlines() if ln.replace(" ", "").startswith("|4|1,024|"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["4", "1,024", "498.4", "698.3", "+40.1%"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_seed_table_matches_golden(lang):
    recs = fixture_records()
    assert article.seed_table(recs, lang) + "\n" == (GOLDEN / f"seed_{lang}.md").read_text()


def test_full_table_matches_golden():
    assert cases.full_table(fixture_records()) + "\n" == (GOLDEN / "full.md").read_text()


def test_the_best_configuration_found_states_its_noise_and_processes():
    """The summary's best case per GPU count carries its interval and how many processes measured it,
    so a single process's figure is not read as a confirmed one."""
    recs = fixture_records()
    one = [r for r in recs if r.ok and r.case["gpus"] == 1 and not r.case.get("loader_only")]
    top = max(one, key=lambda r: r.images_per_s)
    top.data["metrics"] = {**top.metrics, "processes": 3}
    text = " ".join(report.render(recs).split())
    assert f"1 GPU(s)), {top.images_per_s:,.1f} images/s (+-1.0%, 3 process(es); {top.sweep} sweep)" in text
    zh = " ".join(report.render(recs, "zh").split())
    assert f"{top.images_per_s:,.1f} 图像/秒（+-1.0%，3 个进程；{top.sweep} 扫描）" in zh
    top.data["metrics"] = {**top.metrics, "processes": 1, "images_per_s_ci95": None, "spread_pct": 0.4}
    text = " ".join(report.render(recs).split())
    assert f"1 GPU(s)), {top.images_per_s:,.1f} images/s (spread 0.4%, 1 process(es); {top.sweep} sweep)" in text


def test_the_csv_export_is_tidy_and_typed(tmp_path):
    """One row per record with machine, commit, run and every knob; numbers numeric, the interval as two
    columns; records of two machines and two runs of one case stay apart."""
    import pandas as pd
    recs = query.load([FIXTURES, *committed_machines()])[0]
    every, seed = exports.write_csv(recs, tmp_path / "out.csv")
    d = pd.read_csv(every)
    assert len(d) == len(recs) and d["machine"].nunique() >= 3 and d["run_id"].notna().all()
    assert not d.duplicated(["machine", "commit", "run_id", "sweep", "case_id"]).any()
    for column in ("images_per_s", "images_per_s_ci95_low", "images_per_s_ci95_high", "step_time_median_ms",
                   "peak_memory_gib", "mfu_pct"):
        assert d[column].dtype == "float64", column
    assert d["gpus"].dtype == "int64" and d["batch_size"].dtype == "int64" and d["channels_last"].dtype == "bool"
    assert d["latest_run_of_case"].dtype == "bool" and set(d["status"]) <= {"ok", "oom", "error", "timeout", "skipped"}
    ok = d[d["status"] == "ok"]
    assert ok["images_per_s"].notna().all() and (ok["images_per_s_ci95_low"].dropna() <= ok.loc[
        ok["images_per_s_ci95_low"].notna(), "images_per_s"]).all()
    s = pd.read_csv(seed)
    assert s["improvement_pct"].dtype == "float64" and s["gpus"].dtype == "int64"
    rtx = s[s["machine"] == "4x-nvidia-geforce-rtx-3090"].set_index("gpus")
    assert rtx.loc[4, "baseline_images_per_s"] == pytest.approx(498.4) and rtx.loc[4, "improvement_pct"] == pytest.approx(40.1, abs=0.05)
    assert "resnet50" in set(s["model"]) and s.groupby(["machine", "commit"])["batch_per_gpu"].nunique().max() == 1
    assert s.groupby(["machine", "commit"])["model"].nunique().max() == 1  # a seed table never mixes models


def test_the_seed_table_never_mixes_models_or_image_sizes():
    """A search's small-model yardsticks beside the article's ResNet-50 cases take no cell of its table."""
    recs = fixture_records()
    small = [query.wrap({**r.data, "case": {**r.case, "model": "resnet18", "image_size": 32, "batch_size": 8},
                         "started_at": "2099-01-01", "run_id": "later"})
             for r in recs if r.ok and r.case["name"] in ("seed-baseline", "seed-optimized")]
    text = report.render(recs + small)
    seed_tables = [t.split("Best configuration")[0].split("\n## ")[0] for t in text.split("Seed table")[1:]]
    assert "resnet50, 224 px images, 256 images per GPU" in text and not any("resnet18" in t for t in seed_tables)
    # the answers are given per model: the article's ResNet-50 first, then each other model with its own
    assert text.index("Best configuration for resnet50:") < text.index("Best configuration for resnet18:")
    row = next(ln for ln in text.splitlines() if ln.replace(" ", "").startswith("|4|1,024|"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["4", "1,024", "498.4", "698.3", "+40.1%"]
    summary = " ".join(text.split("## Summary")[1].split("## ")[0].split())
    assert "(resnet18, 32 px," in summary and "(resnet50, 224 px," in summary  # ranked apart, each named


def test_seed_rows_reproduce_the_articles_figures():
    rows = article.seed_rows(query.load([FIXTURES])[0])
    assert [r[:5] for r in rows] == [
        [1, 256, "183.2", "190.0", "3.7%"],
        [2, 512, "312.7", "347.5", "11.1%"],
        [4, 1024, "498.4", "698.3", "40.1%"],
    ]
    assert rows[2][5] == "68.0%"  # 498.4 / (4 x 183.2)


def test_report_with_nothing_stored(tmp_path):
    assert report.render([]) == "no stored results found"


def test_a_record_missing_a_field_is_named_and_skipped(tmp_path, capsys):
    shutil.copytree(FIXTURES, tmp_path / "r")
    victim = next((tmp_path / "r").rglob("seed-baseline-resnet50-dp-g2-*.json"))
    rec = json.loads(victim.read_text())
    del rec["metrics"]["images_per_s"]
    victim.write_text(json.dumps(rec))
    records, problems = query.load([tmp_path / "r"])
    assert len(records) == 6 and problems == [f"{victim}: lacks metrics.images_per_s"]
    from bench.cli.main import main
    for argv in (["report", str(tmp_path / "r"), "--no-files"], ["claims", str(tmp_path / "r")],
                 ["history", "seed-", "--results", str(tmp_path / "r")],
                 ["compare", "a1b2c3d4e5f6", "a1b2c3d4e5f6", "--results", str(tmp_path / "r")]):
        # the schema-1 fixtures are shown but cannot be judged: compare refuses (2)
        assert main(argv) == (2 if argv[0] == "compare" else 0)
        assert "lacks metrics.images_per_s" in capsys.readouterr().err


def test_report_says_which_runs_it_used_and_labels_old_definitions():
    text = report.render(query.load([FIXTURES])[0])
    assert "\n- runs used: the latest run of each case (schema1-" in text
    assert "7 record(s) were made under an older metric definition and lack what today's needs: shown (marked *), " \
        "left out of verdicts" in " ".join(text.split())
    assert "| seed-baseline* [1] " in text and "- [1] seed-baseline: [batch_size=256]" in text
    assert "* older metric definition" in text


def test_machine_peak_file_is_not_a_result(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "r")
    (tmp_path / "r" / "4x-nvidia-geforce-rtx-3090" / "peak.json").write_text('{"flops_per_s": {}}')
    records, problems = query.load([tmp_path / "r"])
    assert len(records) == 7 and problems == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_default_report_fits_a_terminal_with_the_articles_table_first(lang):
    """On the fixtures and on every committed result: no line over 120 columns (a Chinese character
    takes two), the article's table within 100, and it comes first in every machine's section."""
    recs = query.load([FIXTURES, *committed_machines()])[0]
    text = report.render(recs, lang)
    lines = text.splitlines()
    assert max(layout.display_width(ln) for ln in lines) <= 120  # result files' paths included
    # each file compared is named by its folder and run, then its case id: together a stored file
    folder = run = None
    named = []
    for ln in lines:
        if m := re.fullmatch(r"  (\S+/) \(run (\S+)\):", ln):
            folder, run = m.groups()
        elif folder and (m := re.fullmatch(r"    (\S+)", ln)):
            named.append(Path(tree.DEFAULT_ROOT, folder, m.group(1), f"{run}.json"))
        else:
            folder = None
    assert named and all(p.is_file() for p in named)
    # Markdown renders each table as written: no cell wrapped onto a line of its own (a blank first cell)
    rows = [ln for ln in lines if ln.startswith("|") and not set(ln) <= set("|-: ")]
    assert rows and all(ln.strip("|").split("|")[0].strip() for ln in rows)
    answers, *sections = text.split("\n# ")  # each machine's answers first, then each commit
    h100 = "1x-nvidia-h100-80gb-hbm3"
    title = report.i18n.t(lang, "a_title", machine=h100, commits=len({r.commit for r in recs if r.machine == h100}))
    assert answers.startswith(f"# {report.i18n.t(lang, 'answers_title')}\n\n{title}")
    assert len(sections) == len({(r.machine, r.commit) for r in recs}) >= 4  # machines and commits never mixed
    seed_cols = report.i18n.t(lang, "seed_cols")
    for section in sections:
        body = section.split("\n## ", 2)
        assert body[1].startswith(report.i18n.t(lang, "seed_title"))  # the article's table first
        table = []
        for ln in body[1].splitlines()[1:]:  # the first table of the section
            if not ln.startswith("|"):
                break
            table.append(ln)
        if table:
            assert [c.strip() for c in table[0].strip("|").split("|")] == seed_cols
            assert max(layout.display_width(ln) for ln in table) <= 100
    rtx = next(s for s in sections if "4x-nvidia-geforce-rtx-3090" in s.splitlines()[0])
    row = next(ln for ln in rtx.splitlines() if ln.replace(" ", "").startswith("|4|1,024|"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["4", "1,024", "498.4", "698.3", "+40.1%"]


def test_a_missing_cell_of_the_articles_table_says_why():
    recs = query.load([FIXTURES])[0]
    ok_4 = next(r for r in recs if r.data["case"]["gpus"] == 4 and r.data["case"]["name"] == "seed-baseline" and r.ok)
    failed = query.wrap({**ok_4.data, "status": "timeout", "reason": "no result within timeout_s=600", "metrics": {},
                         "started_at": "2026-02-01T00:00:00+00:00", "run_id": "later"})
    text = report.render([r for r in recs if r is not ok_4] + [failed], "en")
    assert "- 4 GPU(s), baseline: failed: timeout: no result within timeout_s=600" in text
    text = report.render([r for r in recs if r is not ok_4], "en")
    assert "- 4 GPU(s), baseline: not stored" in text  # the batch-512 OOM probe is not the table's cell
    cpu = [r for r in recs if r.data["case"]["gpus"] < 4]
    assert "- 4 GPU(s), baseline: not run: needs 4 GPUs" not in report.render(cpu, "en")  # the fixture had 4 GPUs
    two = [query.wrap({**r.data, "env": {**r.data["env"], "gpu_count": 2}}) for r in cpu]
    assert "- 4 GPU(s), baseline: not run: needs 4 GPUs" in report.render(two, "en")


def test_the_one_atomic_write_never_replaces_a_record_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a" / "r.json"
    files.write_json_atomic(path, {"x": 1}, replace=False)
    with pytest.raises(FileExistsError):
        files.write_json_atomic(path, {"x": 2}, replace=False)
    files.write_json_atomic(path, {"x": 3})  # a manifest is rewritten as its run goes on
    assert json.loads(path.read_text()) == {"x": 3} and [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_each_committed_machine_page_is_what_the_report_writes_now():
    """results/<machine>/README.md holds that machine's answers as generated: it cannot drift from the
    stored results or the code (regenerate it with `bin/bench report`)."""
    recs = query.load(committed_machines())[0]
    machines = sorted({r.machine for r in recs})
    assert len(machines) >= 3
    for machine in machines:
        folder = tree.DEFAULT_ROOT / machine
        page = (folder / tree.MACHINE_PAGE).read_text()
        assert page == report.machine_page_text(folder, machine, [r for r in recs if r.machine == machine]), machine
        assert "## Where the evidence lies" in page and f"# {machine}: what its stored results answer" in page
        for link in re.findall(r"\]\(([^)]+)\)", page):
            assert (folder / link).is_file(), link  # every link of the page lands on a committed file


def test_a_machine_page_is_rewritten_only_where_it_changed(tmp_path):
    root = tmp_path / "r"
    shutil.copytree(FIXTURES, root)
    recs = query.load([root])[0]
    first = report.write_machine_pages(recs, root)
    assert first and {p.name for p in first} == {"README.md", "README.zh.md"} and all(p.parent.parent == root
                                                                                     for p in first)
    stamps = {p: p.stat().st_mtime_ns for p in first}
    assert report.write_machine_pages(recs, root) == []  # nothing changed: nothing written
    assert {p: p.stat().st_mtime_ns for p in first} == stamps
    assert query.load([root])[0] and len(query.load([root])[0]) == len(recs)  # a page is not a result


def test_files_nobody_named_go_to_the_ignored_build_folder_for_this_checkout(tmp_path, capsys):
    from bench.cli.main import main
    assert tree.generated_folder(tree.DEFAULT_ROOT, "report") == tree.DEFAULT_ROOT.parent / "build" / "report"
    assert tree.generated_folder(tmp_path, "report") is None  # another results tree keeps its files beside it
    shutil.copytree(FIXTURES, tmp_path / "r")
    assert main(["report", "--results", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "REPORT.md").is_file()
    paths = ["build/report/REPORT.md", "build/history/m/x.png"]
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=tree.DEFAULT_ROOT.parent, capture_output=True,
                             text=True)
    assert ignored.stdout.split() == paths  # git keeps build/ out of the checkout
