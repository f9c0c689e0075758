"""`kvviz shot --zoom` is View > Zoom: the window laid out in --size as the app lays it out at that zoom, so a
1280x720 projector at 150% gives its picture (the app opens at that size and zoom), its text larger than at 100%."""
from __future__ import annotations

import re

import numpy as np
from test_shot import shot


def menu_text_right_edge(path) -> int:
    """The right end of the menu bar's words (File ... Help): the last column with dark text in its band."""
    from PIL import Image

    with Image.open(path) as image:
        grey = np.asarray(image.convert("L"), dtype=np.int32)
    band = grey[4:16]  # inside the menu bar's text at 100% and at 150%
    columns = np.flatnonzero((band < 90).any(axis=0))
    assert columns.size, "no menu text drawn"
    return int(columns[-1])


def test_a_1280x720_shot_at_zoom_150_is_laid_out_as_the_app_at_that_zoom(tmp_path):
    edges = {}
    for zoom in (100, 150):
        out = tmp_path / f"z{zoom}.png"
        proc = shot("--out", str(out), "--model", "tiny-random", "--tokens", "4", "--engines", "naive,concat",
                    "--size", "1280x720", "--zoom", str(zoom), "--threads", "1")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert ("1280x720, zoom 150%, step 3 of 4" if zoom == 150 else "1280x720, step 3 of 4") in proc.stdout
        from PIL import Image

        with Image.open(out) as image:
            assert image.size == (1280, 720)
        edges[zoom] = menu_text_right_edge(out)
    # The menu's words at 1.5x their width, the gaps between them at their pixel size (Qt's style margins do not
    # follow a font): File ... Help ends 1.34x as far right (257 -> 344 px offscreen).
    assert 1.25 < edges[150] / edges[100] < 1.5, edges


def test_a_size_below_the_windows_minimum_at_the_zoom_says_the_size_it_needs(tmp_path):
    out = tmp_path / "small.png"
    args = ("--model", "tiny-random", "--tokens", "2", "--engines", "naive", "--zoom", "150", "--threads", "1")
    proc = shot("--out", str(out), "--size", "640x400", *args)
    assert proc.returncode == 2 and not out.exists()
    said = proc.stderr.strip()
    found = re.fullmatch(r"kvviz shot: error: the window cannot be 640x400 at zoom 150%: its menus, Inputs dock and "
                         r"panels need at least (\d+) pixels wide; give a larger --size or a smaller --zoom", said)
    assert found, said
    width = int(found.group(1))
    assert width > 640
    proc = shot("--out", str(out), "--size", f"{width}x400", *args)  # the width it named is enough
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{width}x400, zoom 150%" in proc.stdout
