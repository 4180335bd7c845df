"""`bench report --html`: one self-contained page, checked as a person sees it, in headless Chromium."""
import io
import os
import re
import shutil
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.present.html import blocks_apart

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "results" / "1x-nvidia-h200"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_tables_and_lists_become_blocks_of_their_own():
    text = "## Title\n| a | b |\n|---|---|\n| 1 | 2 |\nEvidence:\n- one\n  more of one\n- two\nafter"
    assert blocks_apart(text).split("\n") == ["## Title", "", "| a | b |", "|---|---|", "| 1 | 2 |", "",
                                              "Evidence:", "", "- one", "  more of one", "- two", "", "after"]


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    """The page of one H200 commit's committed results, with the machine's history."""
    out = tmp_path_factory.mktemp("html")
    commit = "834f1c7db0c6"
    assert main(["report", str(H200 / commit), "--html", "--no-files", "--out", str(out)]) == 0
    return out / "REPORT.html", commit


def test_the_page_holds_everything_and_needs_no_other_file(page_file):
    path, commit = page_file
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and 'charset="utf-8"' in text
    assert text.count('src="data:image/png;base64,') >= 4  # the commit's plots and the history plots, inlined
    assert 'src="plots/' not in text and "http://" not in text and "https://" not in text
    for part in ("Seed table: DataParallel baseline", "The articles&#x27; claims" if "&#x27;" in text
                 else "The articles' claims", "Runs and noise", "History: each machine",
                 "The noise floor of every run", f"commit {commit}"):
        assert part in text, part
    assert text.count("<table>") >= 6  # seed, details, claims, cases, phases, history, noise


def test_the_page_opens_with_a_contents_list_and_right_aligns_numbers(page_file):
    path, commit = page_file
    text = path.read_text()
    nav = text[text.index("<nav>"):text.index("</nav>")]
    assert text.index("<nav>") < text.index("<table>")  # the contents come before any table
    for anchor in ("#answers-per-machine", f"-commit-{commit}", "#history-each-machines-headline-cases"):
        assert anchor in nav, anchor
    for target in re.findall(r'href="#([^"]+)"', nav):
        assert f'id="{target}"' in text, target  # each link lands on its heading
    assert nav.count("<li>") < 40  # the top sections and machines, not every commit's subsections
    assert '<td class="num">860.2 [183.2]</td>' in text or re.search(r'<td class="num">[\d,]+\.\d</td>', text)
    assert re.search(r'<td class="num">[+-][\d.]+%</td>', text)  # a change, signed, right-aligned
    assert '<td class="num">resnet50' not in text  # words stay left


def test_the_chinese_page_is_its_own_file(tmp_path):
    assert main(["report", str(H200 / "834f1c7db0c6"), "--html", "--no-files", "--lang", "zh",
                 "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["REPORT.zh.html"]
    assert "历史：各机器的主要用例" in (tmp_path / "REPORT.zh.html").read_text()


def _chromium_or_skip():
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError:
        sync_playwright = None
    if CHROMIUM and sync_playwright:
        return
    if os.environ.get("BENCH_REQUIRE_BROWSER"):  # CI installs both: there the test must run
        pytest.fail(f"headless Chromium test cannot run: chromium {CHROMIUM or 'missing'}, "
                    f"playwright {'present' if sync_playwright else 'missing'}")
    pytest.skip("needs Debian's chromium and the playwright package (.ci/run installs both)")


def _drawn(png: bytes) -> int:
    """How many distinct colours a screenshot holds: a blank area has one or two."""
    from PIL import Image
    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


def test_the_page_in_headless_chromium_shows_the_seed_table_and_drawn_plots(page_file, tmp_path):
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright
    path, _ = page_file
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(path.as_uri())
        shot = page.screenshot(full_page=True)
        (tmp_path / "page.png").write_bytes(shot)
        # the seed table as rendered: its title, its header and the baseline's figure, visible on screen
        title = page.get_by_text("Seed table: DataParallel baseline against the seed-optimized")
        assert title.is_visible()
        seed = page.locator("h2:has-text('Seed table') + table")
        assert seed.is_visible()
        cells = seed.inner_text()
        assert "Batch Size" in cells and "baseline (images/s)" in cells and "912.5" in cells
        box = seed.bounding_box()
        assert box["width"] > 300 and box["height"] > 40
        assert _drawn(seed.screenshot()) > 10  # text and rules, not an empty box
        # every plot decoded and drawn: a real picture, not a broken-image icon or a blank frame
        images = page.locator("img")
        assert images.count() >= 4
        for i in range(images.count()):
            img = images.nth(i)
            assert img.evaluate("e => e.complete && e.naturalWidth > 200 && e.naturalHeight > 100"), i
            assert _drawn(img.screenshot()) > 50, i
        browser.close()
    assert _drawn(shot) > 100
