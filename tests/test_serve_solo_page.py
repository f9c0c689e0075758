"""The serve page (kvviz export --from SERVE.json --html) in headless Chromium carries the solo check the record
holds: a line per scheduler in the Serve view's words (text.py's solo_text), red where a planted difference
is, naming the request, the token and the step; and its status line in Chinese like the rest of the page."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import html_page_cdp
import pytest

# The page's new strings, as /tmp/serve_solo_zh.json hands them to assets/i18n (what a Chinese page shows once
# the .ts holds them; the .ts wins where it has them).
ZH = {"{0}: {1} requests": "{0}：{1} 个请求",
      "tokens = solo runs: {0} of {1}": "token = 单独运行：{1} 个中 {0} 个",
      "tokens ≠ solo runs: {0} of {1} equal; {2}": "token ≠ 单独运行：{1} 个中 {0} 个相同；{2}",
      "request {0} from token {1} (step {2})": "请求 {0} 自第 {1} 个 token 起不同（第 {2} 步）",
      "request {0} from token {1} (cut short)": "请求 {0} 自第 {1} 个 token 起不同（提前结束）",
      "the schedulers generated different text": "各调度器生成的文本不同"}


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "serve.json"
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                           "static,paged", "--threads", "1", "--json", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return path


def _planted(record: Path, out: Path) -> Path:
    """paged's request 2 (index 2) with its 6th token changed."""
    doc = json.loads(record.read_text())
    ids = doc["runs"][1]["results"][2]["token_ids"]
    ids[5] = (ids[5] + 1) % 256
    out.write_text(json.dumps(doc))
    return out


def _shown(browser) -> tuple[str, str, dict, dict]:
    return browser.eval("""(() => { const words = {}, kinds = {};
      for (const p of document.querySelectorAll('#panel-text p.solo')) {
        words[p.dataset.scheduler] = p.querySelector('span').textContent;
        kinds[p.dataset.scheduler] = p.querySelector('span').className; }
      const head = document.querySelector('#panel-text .solo-head');
      return [document.getElementById('status').textContent, head ? head.textContent : '', words, kinds]; })()""")


@pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")
def test_the_serve_page_shows_the_solo_check(record, tmp_path, qapp, monkeypatch):
    import kvviz.page.serve as page
    from kvviz.cli import main
    from kvviz.page.strings import page_strings
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs
    from kvviz.ui.serve.panels.text import solo_text

    strings = {c: dict(t) for c, t in page_strings().items()}
    strings["TextPanel"] = {**ZH, **strings.get("TextPanel", {})}
    monkeypatch.setattr(page, "page_strings", lambda: strings)
    planted = _planted(record, tmp_path / "planted.json")
    browser = html_page_cdp.Browser(1600, 1000)
    try:
        for path in (record, planted):
            out = tmp_path / path.stem
            assert main(["export", "--from", str(path), "--out", str(out), "--html", "--step", "3"]) == 0
            history = ServeHistory.from_runs(load_runs(path))
            browser.open(out / "run.html")
            status, head, words, kinds = _shown(browser)
            assert status.endswith("· course-batch: 4 requests") and head == "course-batch: 4 requests"
            assert words == {k: solo_text(history.solo_checks(k))[1] for k in history.schedulers}
            assert words["static"] == "tokens = solo runs: 4 of 4" and kinds["static"] == "same"
            if path == record:
                assert words["paged"] == "tokens = solo runs: 4 of 4" and kinds["paged"] == "same"
            else:
                step = [s.step for s in history.steps["paged"] for r, _t in s.emitted if r == 2][5]
                assert words["paged"] == f"tokens ≠ solo runs: 3 of 4 equal; request 2 from token 6 (step {step})"
                assert kinds["paged"] == "differ"
            browser.eval("document.querySelector('#langs button[data-lang=zh_CN]').click()")
            status, head, words, kinds = _shown(browser)
            assert status.endswith("· course-batch：4 个请求") and head == "course-batch：4 个请求", status
            assert words["static"] == "token = 单独运行：4 个中 4 个"
            if path == planted:
                assert words["paged"] == ("token ≠ 单独运行：4 个中 3 个相同；"
                                          f"请求 2 自第 6 个 token 起不同（第 {step} 步）")
            assert browser.eval("window.kvviz.untranslated") == []
            browser.eval("document.querySelector('#langs button[data-lang=en]').click()")
        browser.pump()
        assert not browser.problems, browser.problems
        assert browser.eval("window.kvviz.errors") == []
    finally:
        browser.close()


def test_a_record_without_solo_runs_gives_none(record):
    from kvviz.page.serve import serve_data
    from kvviz.serving.record import load_runs, runs_from_dict

    assert [s["solo"] for s in serve_data(load_runs(record))["schedulers"]] == [[4, []], [4, []]]
    doc = json.loads(record.read_text())
    for run in doc["runs"]:
        for r in run["results"]:
            del r["solo_token_ids"]
    assert [s["solo"] for s in serve_data(runs_from_dict(doc))["schedulers"]] == [None, None]
