"""`--lang zh` answers in Chinese throughout: the answers of every committed machine, its Chinese page
(README.zh.md beside README.md) and every section title of a commit's details leave no English sentence;
what stays is data (case and model names, configuration labels, a failure's own message, commands)."""
import re

import pytest

from bench.core.labels import describe
from bench.present import answers_text, i18n, report
from bench.store import query
from stored import committed_machines

SENTENCE = re.compile(r"[A-Za-z][A-Za-z'’]+(?:[ ,]+[A-Za-z][A-Za-z'’]+){2,}")
"""Three English words in a row, or more: a sentence, or part of one, left untranslated."""


def english_left(text: str, records) -> list[str]:
    text = " ".join(text.split())  # wrapped lines joined, so a label cut in two is still found whole
    data = {describe(r.case) for r in records} | {str(r.data.get("reason") or "") for r in records}
    for d in sorted(data, key=len, reverse=True):
        if d:
            text = text.replace(d, " ")
    text = re.sub(r"`[^`]*`", " ", text)  # commands and code, as typed
    return sorted(set(SENTENCE.findall(text)))


@pytest.mark.parametrize("folder", committed_machines(), ids=lambda p: p.name)
def test_the_chinese_answers_and_page_leave_no_english_sentence(folder):
    recs, _ = query.load([folder])
    answers = answers_text.render(recs, "zh")
    assert english_left(answers, recs) == []
    assert "答案" in answers and "论断" in answers
    page = (folder / "README.zh.md").read_text()
    assert page == report.machine_page_text(folder, folder.name, recs, "zh")  # committed, and what it writes now
    assert english_left(page, recs) == []
    for (commit,), mine in query.group(recs, "commit").items():  # every section title of each commit's details
        titles = [ln for ln in report.render(query.latest(mine), "zh", answers_first=False, wide=True).splitlines()
                  if ln.startswith("#")]
        assert titles and not [t for t in titles if SENTENCE.search(re.sub(r"`[^`]*`|[\w.-]+-[\w.-]+", " ", t))], commit


def test_the_detector_finds_an_english_sentence():
    assert english_left("文章的建议 holds here for resnet50", []) == ["holds here for resnet"]
    assert english_left("运行 `make bench` 测量：single, fp16, NHWC", []) == []


def test_every_english_text_has_its_chinese():
    assert set(i18n.TEXT["en"]) <= set(i18n.TEXT["zh"])
    from bench.core import phrases
    assert set(phrases.TEMPLATES["en"]) == set(phrases.TEMPLATES["zh"])
