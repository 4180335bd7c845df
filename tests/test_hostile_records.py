"""Stored results are data from elsewhere: a record whose every string is markup renders as inert text
in the HTML page (checked in headless Chromium: no script runs, no element is injected, nothing is
loaded) and in the terminal; one holding control characters or an endless string is skipped with a
warning naming its file; nothing a record says is used as a path out of the results tree."""
import copy
import json

import pytest

from bench.cli.main import main
from bench.core import untrusted
from tests.stored import fixture_dicts
from tests.test_html_report import CHROMIUM, _chromium_or_skip

MARKUP = ('<script>window.__pwned=1</script><b id="injected">b</b><img src=x onerror="window.__pwned=2">'
          '[l](javascript:window.__pwned=3) ![i](http://127.0.0.1:9/x.png) <http://127.0.0.1:9/> **s** `c` | cell')
NAME = '<img src=x onerror="window.__pwned=4">[l](javascript:x)'  # a folder name: no slash
KEEP = {"status", "started_at", "collected_at", "finished_at", "commit_folder", "run_id", "case_id", "commit"}
PLAIN_NAMES = {"machine", "sweep"}


def hostile(d: dict) -> dict:
    """The record with markup in every string a report shows (the case's knobs that select code paths,
    its identity and dates aside)."""
    def walk(v, key=""):
        if isinstance(v, dict):
            return {k: (walk(x, k) if k != "case" else x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, key) for x in v]
        if isinstance(v, str) and key not in KEEP:
            return NAME if key in PLAIN_NAMES else MARKUP
        return v
    out = walk(copy.deepcopy(d))
    out["case"] = {**d["case"], "name": MARKUP, "model": MARKUP}
    return out


@pytest.fixture
def hostile_tree(tmp_path):
    root = tmp_path / "results"
    for i, d in enumerate(fixture_dicts()):
        f = root / "m" / "c" / "s" / f"case{i}" / "r.json"
        f.parent.mkdir(parents=True)
        f.write_text(json.dumps(hostile(d)))
    return root


def test_a_hostile_record_is_inert_text_in_the_terminal(hostile_tree, capsys):
    assert main(["report", str(hostile_tree), "--all", "--no-files"]) == 0
    out = capsys.readouterr()
    assert "<script>window.__pwned=1</script>" in out.out  # shown as what it is: text
    assert "warning" not in out.err and "\x1b" not in out.out + out.err


def test_a_hostile_record_is_inert_text_in_the_html_page(hostile_tree, tmp_path):
    assert main(["report", str(hostile_tree), "--html", "--no-files", "--out", str(tmp_path / "page")]) == 0
    page = tmp_path / "page" / "REPORT.html"
    text = page.read_text()
    for tag in ("<script", '<b id="injected"', '<img src=x', 'href="javascript', 'src="http', "<strong", "<code"):
        assert tag not in text, tag  # as markup: the same words stand escaped, as text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in text
    assert "Content-Security-Policy" in text and "script-src" not in text and "default-src 'none'" in text
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync", "--no-first-run"])
        page_ = browser.new_page()
        asked, errors = [], []
        page_.on("request", lambda r: asked.append(r.url))
        page_.on("pageerror", lambda e: errors.append(str(e)))
        page_.goto(page.as_uri())
        page_.wait_for_timeout(300)
        assert page_.evaluate("typeof window.__pwned") == "undefined"  # no script of a record ran
        assert page_.locator("#injected").count() == 0 and page_.locator("script").count() == 0
        assert page_.evaluate("[...document.images].every(i => i.src.startsWith('data:'))")
        hrefs = page_.evaluate("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
        assert hrefs and all(h.startswith("#") for h in hrefs)  # the contents list's own links alone
        assert page_.evaluate("document.querySelectorAll('strong, em, code').length") == 0
        body = page_.inner_text("body")
        assert "<script>window.__pwned=1</script>" in body and "[l](javascript:window.__pwned=3)" in body
        assert asked == [page.as_uri()] and not errors  # nothing loaded, nothing failed
        browser.close()


@pytest.mark.parametrize("bad", ["\x1b[2J\x1b]0;pwned\x07", "line\rover", "\u202egnp.exe", "x" * 5000])
def test_a_record_with_control_characters_or_an_endless_string_is_skipped_with_a_warning(bad, tmp_path, capsys):
    d = fixture_dicts()[0]
    d["env"]["gpu_model"] = bad
    f = tmp_path / "r" / "bad.json"
    f.parent.mkdir()
    f.write_text(json.dumps(d))
    good = fixture_dicts()[1]
    (tmp_path / "r" / "good.json").write_text(json.dumps(good))
    assert main(["report", str(tmp_path / "r"), "--no-files"]) == 0
    out = capsys.readouterr()
    [warning] = [ln for ln in out.err.splitlines() if "bad.json" in ln]
    assert warning.startswith("warning: skipped ") and "env.gpu_model" in warning
    assert ("control characters" in warning) == (len(bad) < 5000)
    assert not untrusted.CONTROL.search(out.out + out.err)


def test_a_run_manifest_with_control_characters_is_skipped_with_a_warning(capsys, tmp_path):
    """The manifest beside a run's records is data too: skipped and named, as a record is, never shown."""
    import shutil
    from conftest import ROOT
    src = ROOT / "results" / "1x-nvidia-h100-80gb-hbm3" / "6b45861ecaf0"
    dst = tmp_path / "r" / "1x-nvidia-h100-80gb-hbm3" / "6b45861ecaf0"
    shutil.copytree(src / "feed", dst / "feed")
    manifest = json.loads((src / "runs" / "20261206T184728Z-74d6.json").read_text())
    manifest["feed_pace"].update(gpu="\x1b[31mH100\x1b]0;pwned\x07", images_per_s=1000.0)
    (dst / "runs").mkdir()
    (dst / "runs" / "20261206T184728Z-74d6.json").write_text(json.dumps(manifest))
    assert main(["report", "--results", str(tmp_path / "r"), "--no-files"]) == 0
    out = capsys.readouterr()
    [warning] = [ln for ln in out.err.splitlines() if "20261206T184728Z-74d6.json" in ln]
    assert warning.startswith("warning: skipped ") and warning.endswith(": feed_pace.gpu holds control characters")
    assert "no pace to judge by" in out.out and not untrusted.CONTROL.search(out.out + out.err)


def test_captured_output_is_cleaned_not_refused():
    d = fixture_dicts()[0]
    d["stderr_tail"] = ["\x1b[33mUserWarning\x1b[0m: slow", "100%|\r███"]
    assert untrusted.problem(d) is None
    assert d["stderr_tail"] == ["UserWarning: slow", "100%|?███"]


def test_a_record_naming_a_way_out_of_the_tree_is_skipped(tmp_path, capsys):
    d = fixture_dicts()[0]
    d["machine"] = "../../outside"
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "out.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path / "r"), "--no-files"]) == 0
    out = capsys.readouterr()
    assert "machine '../../outside' is not a plain folder name" in out.err and "no stored results found" in out.out


def test_a_hostile_record_writes_no_html_into_a_markdown_file(hostile_tree, tmp_path):
    from bench.present import report
    from bench.store import query
    recs, _ = query.load([hostile_tree])
    text = report.write_report(recs, tmp_path).read_text()
    assert "&lt;script>window.__pwned=1&lt;/script>" in text and "<" not in text
