"""The serve page's counters table at 1280x900: the panel never scrolls sideways as a whole; a table wider than
its panel scrolls its columns in its own box, with the counters' names kept in view, and keeps the place the reader
scrolled to from step to step. Skips, saying why, where chromium or websocket-client is missing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import html_page_cdp
import pytest

pytestmark = pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("servefit")
    record = folder / "serve.json"
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                           "static,paged,prefix", "--threads", "1", "--json", str(record)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from kvviz.cli import main

    assert main(["export", "--from", str(record), "--out", str(folder / "o"), "--html"]) == 0
    return folder / "o" / "run.html"


def test_the_counters_scroll_their_columns_under_the_names(page):
    browser = html_page_cdp.Browser(1280, 900)
    try:
        browser.open(page)
        shown = browser.eval("""(() => {
          const body = document.querySelector('#panel-counters .body');
          const box = document.querySelector('#panel-counters table').parentElement;
          box.scrollLeft = box.scrollWidth;
          const name = document.querySelector('#panel-counters tbody th').getBoundingClientRect();
          const last = [...document.querySelectorAll('#panel-counters tbody tr:first-child td')].pop()
            .getBoundingClientRect();
          const b = box.getBoundingClientRect();
          return { body: [body.scrollWidth, body.clientWidth], box: box.className, left: box.scrollLeft,
                   name: [name.left, name.right], last: [last.left, last.right], edges: [b.left, b.right],
                   hit: document.elementFromPoint(name.left + 2, (name.top + name.bottom) / 2).closest('th') !== null };
        })()""")
        assert shown["box"] == "table-scroll", shown  # the table in its own scrolling box
        assert shown["body"][0] <= shown["body"][1], shown  # the panel itself does not scroll sideways
        assert shown["edges"][0] - 0.5 <= shown["name"][0] and shown["name"][1] <= shown["edges"][1], shown
        assert shown["hit"], shown  # the name is on top, not under the scrolled figures
        assert shown["last"][1] <= shown["edges"][1] + 0.5, shown  # the last column scrolled into view
        before = shown["left"]
        browser.eval("window.kvviz.setStep(1)")
        browser.pump()
        after = browser.eval("document.querySelector('#panel-counters .table-scroll').scrollLeft")
        assert after == before  # a step drawn keeps the columns the reader scrolled to
        assert browser.eval("window.kvviz.errors") == []
    finally:
        browser.close()
