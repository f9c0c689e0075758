"""The work matrix (and the attention map) as pixels: each engine's matrix fills its view after the
window has sat idle, at 8 and 200 tokens, while scrubbing, with the panel alone and in an export.

The window's idle ticks warm the panels up (kvviz.ui.window._warm_up_one): the work matrix lays its
plots out for the model's longest run then, and a run must not keep that range, or it draws its
matrices as a few pixels in the top-left of 0..max_seq_len. Grabs are saved to
/tmp/kvviz_panels/ for a human to look at.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication

from kvviz.records.trace import MaskSpec, RunInfo, StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory

ENGINES = ("naive", "concat", "static", "paged")
GRAB_DIR = Path("/tmp/kvviz_panels")
# The cells' colours, and the frame drawn around the rows a step computed (all of naive's: its edges).
CELL_RGB = np.array([[QColor(c).red(), QColor(c).green(), QColor(c).blue()]
                     for c in [*style.CELL_COLORS.values(), style.STEP_OUTLINE]])


# -- pixels ----------------------------------------------------------------------------------------
def to_array(image: QImage) -> np.ndarray:
    """uint8 [height, width, 3] RGB."""
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())
    return rows.reshape(image.height(), image.bytesPerLine())[:, : image.width() * 3].reshape(
        image.height(), image.width(), 3).copy()


def near(pixels: np.ndarray, colour: str | np.ndarray, tol: int = 24) -> np.ndarray:
    rgb = np.array([QColor(colour).red(), QColor(colour).green(), QColor(colour).blue()]) \
        if isinstance(colour, str) else colour
    return np.abs(pixels.astype(int) - rgb).sum(axis=-1) <= tol


def view_pixels(plot: pg.PlotItem, name: str, item=None) -> np.ndarray:
    """The pixels of the plot's data area (its ViewBox), or of another of its items, as the screen
    shows them once the layouts the draw asked for have settled (as the event loop settles them)."""
    for _ in range(3):
        QApplication.processEvents()
    item = item or plot.getViewBox()
    view = next(v for v in QApplication.allWidgets() if isinstance(v, pg.GraphicsView) and v.scene() is item.scene())
    image = view.grab().toImage()
    GRAB_DIR.mkdir(parents=True, exist_ok=True)
    image.save(str(GRAB_DIR / f"{name}.png"))
    ratio = image.devicePixelRatio()
    rect = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
    pixels = to_array(image)
    top, left = round(rect.top() * ratio), round(rect.left() * ratio)
    return pixels[top: top + round(rect.height() * ratio), left: left + round(rect.width() * ratio)]


def canvas_grab(panel, name: str) -> tuple[pg.GraphicsView, QImage]:
    """The panel's whole canvas (every engine's plot) and a grab of it once its layouts have settled."""
    for _ in range(3):
        QApplication.processEvents()
    view = panel.findChild(pg.GraphicsView)
    image = view.grab().toImage()
    GRAB_DIR.mkdir(parents=True, exist_ok=True)
    image.save(str(GRAB_DIR / f"{name}.png"))
    return view, image


def matrix_extent(pixels: np.ndarray) -> tuple[float, float]:
    """(width, height) of the box holding every pixel of the matrix, as fractions of the view's."""
    cell = np.zeros(pixels.shape[:2], dtype=bool)
    for rgb in CELL_RGB:
        cell |= near(pixels, rgb, 6)
    ys, xs = np.nonzero(cell)
    if not len(xs):
        return 0.0, 0.0
    h, w = cell.shape
    return (xs.max() - xs.min() + 1) / w, (ys.max() - ys.min() + 1) / h


def assert_fills(panel, engines, name: str) -> None:
    """Each engine's matrix spans its view (the last pixel column and row may be the view's edge);
    naive's recomputed triangle is drawn (about half the view, less the rows computed new)."""
    for engine in engines:
        plot = panel._views[engine].plot
        pixels = view_pixels(plot, f"{name}-{engine}")
        w, h = matrix_extent(pixels)
        assert w >= 0.97 and h >= 0.97, f"{engine}: the matrix spans {w:.0%} x {h:.0%} of its view ({name})"
        if engine == "naive":
            red = near(pixels, style.CELL_COLORS["recomputed"]).mean()
            assert red >= 0.3, f"naive: {red:.1%} of its view is recomputed red ({name})"
        # Positions numbered along the outer bottom axis: numbers across it, not the one "0" that a
        # matrix drawn in a far-off range's corner left.
        if panel._views[engine].outer[0]:
            axis = view_pixels(plot, f"{name}-{engine}-axis", plot.getAxis("bottom"))
            below_ticks = axis[len(axis) // 2:]  # the axis line and tick marks run along its top
            text = near(below_ticks, style.PLOT_FOREGROUND, 200).any(axis=0).mean()
            assert text >= 0.15, f"{engine}: {text:.0%} of the bottom axis's columns hold tick text ({name})"


# -- the panel alone, warmed up as the idle window does ---------------------------------------------
def shown(qtbot, panel, width: int, height: int):
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def synthetic_history(n_prompt: int, new: int, engines: tuple[str, ...], weights: bool = False) -> RunHistory:
    """Steps as naive (every row again) and a cache (one new row) record them, with uniform attention
    weights over the keys each row sees if asked; no model needed."""
    info = RunInfo(run_id="s", prompt_ids=tuple(range(n_prompt)), engines=engines, max_new_tokens=new)
    hist = RunHistory()
    hist.reset(info)
    for step in range(new):
        for engine in engines:
            stop = n_prompt + step
            start = 0 if engine == "naive" or step == 0 else stop - 1
            hist.add(StepTrace(run_id="s", engine=engine, step=step, phase="prefill" if step == 0 else "decode",
                               token_id=65, token_text="A", pos_start=start, pos_stop=stop, cache_len=stop,
                               cache_capacity=stop, cache_bytes=0, bytes_copied=0, bytes_written=0,
                               bytes_gathered=0, kv_projections=stop - start, latency_ms=1.0,
                               mask_spec=MaskSpec(q_len=stop - start, kv_len=stop, past_len=start),
                               attn_weights=uniform_weights(start, stop) if weights else None,
                               weights_layer=0, weights_head=0))
    return hist


def uniform_weights(start: int, stop: int) -> np.ndarray:
    """float32 [stop - start, stop]: row i spreads its weight evenly over keys 0..i."""
    rows = np.arange(start, stop)[:, None]
    return np.where(np.arange(stop)[None, :] <= rows, 1.0 / (rows + 1), 0.0).astype(np.float32)


@pytest.mark.parametrize("engines", [ENGINES, ("naive", "concat")])
@pytest.mark.parametrize("new", [8, 200, 2000])
def test_a_warmed_up_work_matrix_draws_each_run_across_its_views(qtbot, engines, new):
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    panel = shown(qtbot, WorkMatrixPanel(), 900, 600)
    # What the idle window's ticks do before the first run (4096: the `wide` preset's longest run).
    while panel.warm_up(ENGINES, 4096):
        pass
    hist = synthetic_history(13, new, engines)
    last = hist.n_steps() - 1
    panel.show_step(hist, last)
    assert_fills(panel, engines, f"warmed-{len(engines)}-{new}-last")
    panel.show_step(hist, last // 2)  # scrubbing back: the shorter sequence fills the view too
    assert_fills(panel, engines, f"warmed-{len(engines)}-{new}-mid")
    panel.resize(600, 400)  # and after a resize
    qtbot.waitUntil(lambda: panel._views[engines[0]].plot.getViewBox().width() < 300)
    panel.show_step(hist, last)
    assert_fills(panel, engines, f"warmed-{len(engines)}-{new}-small")


def test_a_grid_of_matrices_fills_a_panel_that_grew(qtbot):
    """A panel too short for two rows lays its four matrices out 1x4, and 2x2 once it grows (Ctrl+2
    gives it the grid): the matrices then reach across the whole panel, not two thirds of it."""
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    panel = shown(qtbot, WorkMatrixPanel(), 300, 200)
    hist = synthetic_history(13, 20, ENGINES)
    panel.show_step(hist, 19)
    assert panel._cols == 4  # 1x4 in a short panel
    panel.resize(940, 600)
    qtbot.waitUntil(lambda: panel._cols == 2)
    panel.show_step(hist, 19)
    pixels = to_array(canvas_grab(panel, "grown-grid")[1])
    cell = np.zeros(pixels.shape[:2], dtype=bool)
    for rgb in CELL_RGB:
        cell |= near(pixels, rgb, 6)
    right = np.nonzero(cell.any(axis=0))[0].max() + 1
    assert right >= 0.97 * pixels.shape[1], f"the matrices end at {right} of {pixels.shape[1]} pixels"
    assert_fills(panel, ENGINES, "grown-grid")


def label_pixels(panel, engine: str, name: str) -> int:
    """Pixels of the frame's colour in the right half of the view, above the frame's band at its
    bottom and clear of the tick marks along its edges: the right-aligned 'this step' label's text."""
    pixels = view_pixels(panel._views[engine].plot, name)
    pixels = pixels[3:-8, pixels.shape[1] // 2: -3]
    return int(near(pixels, style.STEP_OUTLINE, 120).sum())  # glyphs' cores; not the #606060 prompt lines


def test_the_this_step_label_is_drawn_only_where_it_leaves_the_matrix_visible(qtbot):
    """In a view three times its height or more the label names the one-pixel frame; in a shorter
    one (each of a 2x2 grid at 1280x720 is ~25 px) it would cover half the matrix: not drawn."""
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    panel = shown(qtbot, WorkMatrixPanel(), 900, 600)
    hist = synthetic_history(13, 200, ENGINES)
    panel.show_step(hist, 199)
    assert label_pixels(panel, "concat", "label-tall") > 20
    panel.resize(280, 300)
    vb = panel._views["concat"].plot.getViewBox()
    qtbot.waitUntil(lambda: vb.height() < 40)
    panel.show_step(hist, 199)
    assert 24 < vb.height() < 3 * panel._views["concat"].row_label.boundingRect().height()
    assert label_pixels(panel, "concat", "label-short") == 0
    assert_fills(panel, ENGINES, "label-short")


def numbered(plot: pg.PlotItem, side: str) -> list[str]:
    """The position numbers the plot's axis on `side` draws (none where it draws no labels)."""
    axis = plot.getAxis(side)
    return [text for _value, text in axis._tickLevels[0]] if axis.style["showValues"] else []


@pytest.mark.parametrize("size", [(290, 490), (280, 480), (300, 500)])
def test_matrices_of_one_size_are_numbered_alike(qtbot, size):
    """In a 2x2 grid the two columns may differ by a pixel in width; the two matrices along the bottom, and
    the two down the left, number the same positions at every step of a live run (not every 20 positions on
    one and every 50 on the other)."""
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    panel = shown(qtbot, WorkMatrixPanel(), *size)
    full = synthetic_history(58, 40, ENGINES)
    hist = RunHistory()
    hist.reset(full.info)
    for step in range(40):
        for engine in ENGINES:
            hist.add(full.traces[engine][step])
        panel.show_step(hist, step)
        for _ in range(3):
            QApplication.processEvents()
        views = panel._views
        assert panel._cols == 2
        bottom = [numbered(views[e].plot, "bottom") for e in ("static", "paged")]
        left = [numbered(views[e].plot, "left") for e in ("naive", "static")]
        assert bottom[0] and bottom[0] == bottom[1], f"step {step}: bottom axes {bottom}"
        assert left[0] and left[0] == left[1], f"step {step}: left axes {left}"


def attention_extent(plot: pg.PlotItem, name: str) -> tuple[float, float]:
    """(width, height) of the box holding the attention map's drawn pixels, as fractions of the
    square side its aspect-locked view gives it."""
    pixels = view_pixels(plot, name)
    # Neither the background nor the axes' lines and tick marks along the view's edges.
    drawn = ~near(pixels, style.PLOT_BACKGROUND, 12) & ~near(pixels, style.PLOT_FOREGROUND, 30)
    ys, xs = np.nonzero(drawn)
    if not len(xs):
        return 0.0, 0.0
    side = min(drawn.shape)
    return (xs.max() - xs.min() + 1) / side, (ys.max() - ys.min() + 1) / side


def wheel_over(plot: pg.PlotItem, turns: int) -> None:
    """Turn the mouse wheel over the plot's data area (away from the user: zoom out)."""
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent

    vb = plot.getViewBox()
    view = next(v for v in QApplication.allWidgets() if isinstance(v, pg.GraphicsView) and v.scene() is vb.scene())
    centre = view.mapFromScene(vb.sceneBoundingRect().center())
    for _ in range(turns):
        QApplication.sendEvent(view.viewport(), QWheelEvent(
            QPointF(centre), QPointF(view.mapToGlobal(centre)), QPoint(0, 0), QPoint(0, -240),
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False))


def test_a_wheel_over_a_matrix_leaves_it_whole(qtbot):
    """The panels own their matrices' ranges: a mouse wheel over a view (which turned pyqtgraph's
    auto-range off) does not leave the matrix zoomed off its view for the steps after."""
    from kvviz.ui.panels.attention import AttentionPanel
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    hist = synthetic_history(13, 30, ("naive", "concat"), weights=True)
    panel, attention = shown(qtbot, WorkMatrixPanel(), 900, 600), shown(qtbot, AttentionPanel(), 900, 600)
    for widget in (panel, attention):
        widget.show_step(hist, 10)
    wheel_over(panel._views["naive"].plot, 5)
    wheel_over(attention.export_items()[0], 5)
    panel.show_step(hist, 29)
    assert_fills(panel, ("naive", "concat"), "wheel")
    attention.show_step(hist, 29)
    w, h = attention_extent(attention.export_items()[0], "wheel-attention")
    assert 0.97 <= w <= 1.03 and 0.97 <= h <= 1.03, f"attention: the map spans {w:.0%} x {h:.0%} of its square"


# -- the real window, left idle before Run ----------------------------------------------------------
@pytest.fixture
def idle_window(qtbot, tmp_path, torch_cpu):
    """A shown window whose idle ticks have warmed every panel up (what ~20 s of a window left open
    before Run did), tiny-random selected."""
    from kvviz.ui import app

    window = app.create_window(QSettings(str(tmp_path / "kvviz.ini"), QSettings.Format.IniFormat), isolate=False)
    qtbot.addWidget(window)
    window.resize(1500, 920)
    window.show()
    qtbot.waitUntil(lambda: window.env is not None, timeout=90_000)
    window.form.set_model("tiny-random")
    window.torch_threads = 1
    window.toolbar.speed_spin.setValue(0)
    qtbot.waitUntil(lambda: not window.grid.warming, timeout=30_000)  # every panel warmed up while idle
    assert all(v.plot.opacity() == 0 for v in window.grid.panels["work_matrix"]._views.values())  # laid out ahead
    return window


def run_to_end(qtbot, window, engines, tokens: int) -> None:
    window.form.prompt_edit.setPlainText("A cache is a promise")
    window.form.set_engines(engines)
    window.form.tokens_spin.setValue(tokens)
    with qtbot.waitSignal(window.run_finished, timeout=300_000):
        qtbot.mouseClick(window.form.run_button, Qt.MouseButton.LeftButton)
    window.refresh()


def test_an_idle_window_then_run_draws_every_matrix(qtbot, idle_window):
    window = idle_window
    window.resize(1920, 1080)  # room for every panel: at 1500x920 the attention map gives way to a tab
    qtbot.waitUntil(lambda: window.grid.panels["attention"].isVisible(), timeout=10_000)
    run_to_end(qtbot, window, ENGINES, 6)
    assert_fills(window.grid.panels["work_matrix"], ENGINES, "idle-window")
    # The attention map (aspect locked) fills the square its view holds, warmed up as well.
    w, h = attention_extent(window.grid.panels["attention"].export_items()[0], "idle-window-attention")
    assert 0.97 <= w <= 1.03 and 0.97 <= h <= 1.03, f"attention: the map spans {w:.0%} x {h:.0%} of its square"


def test_a_200_token_run_fills_the_views_when_scrubbed_alone_and_exported(qtbot, idle_window, tmp_path):
    from kvviz.ui.export_actions import export_image

    window = idle_window
    engines = ("naive", "concat")
    run_to_end(qtbot, window, engines, 200)
    panel = window.grid.panels["work_matrix"]
    assert_fills(panel, engines, "long-last")
    window.select_step(100)  # scrubbing
    window.refresh()
    assert_fills(panel, engines, "long-step100")
    window.grid.show_alone("work_matrix")  # Ctrl+2: the panel alone
    qtbot.waitUntil(lambda: panel._views["naive"].plot.getViewBox().width() > 400)
    window.refresh()
    assert_fills(panel, engines, "long-alone")
    vb = panel._views["naive"].plot.getViewBox()
    area = vb.width() * vb.height()
    path = export_image(window, "work_matrix", "png", tmp_path / "wm.png", step=150)
    exported = to_array(QImage(str(path)))
    red = near(exported, style.CELL_COLORS["recomputed"]).sum()
    assert red >= 0.3 * area, f"export: {red} recomputed pixels, the naive view holds {area:.0f}"


# -- the title above each matrix and the frame of the step's rows --------------------------------------------
@pytest.fixture
def zoomed():
    """Sets the panels' zoom (as View > Zoom does before the panels are built); back to what it was after."""
    before = round(style.ZOOM * 100)
    yield style.set_zoom
    style.set_zoom(before)


@pytest.mark.parametrize("zoom", [100, 150, 200])
def test_the_step_frame_never_touches_the_title_text_above_the_matrix(qtbot, zoomed, zoom):
    """Each engine's two-line title (its name, then "97 rows, 96 again") sits wholly above the frame drawn
    around the step's rows, with the frame's pen width clear between them: in the geometry the panel lays
    out and in the pixels drawn (no pixel of the frame's colour inside the title's text). naive's frame
    runs along the matrix's top edge; at 150% the title's lines are taller than pyqtgraph's 30 px title row."""
    from kvviz.ui.panels._plots import scenes_in, zoom_items
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    zoomed(zoom)
    panel = shown(qtbot, WorkMatrixPanel(), 1100, 760)
    hist = synthetic_history(58, 40, ENGINES)
    panel.show_step(hist, 39)
    zoom_items(scenes_in(panel))  # the pens at the zoom, as the window's grid sets them after a draw
    panel.show_step(hist, 39)
    assert_title_clear_of_frame(panel, f"title-frame-{zoom}")
    naive_frame = panel._views["naive"].outline.rect()
    assert naive_frame.top() == 0 and naive_frame.height() == 58 + 39  # naive's frame: every row, top edge up
    if zoom == 100:
        return  # the titles fit a 1x4 grid's narrow plots at 100%
    # A panel too short for two rows of plots and too narrow for the titles in one row of four scales them
    # down (style.fit_title); widened again, without a step drawn, they grow back, and their rows with them.
    label = panel._views["naive"].plot.titleLabel
    panel.resize(520, 300)
    qtbot.waitUntil(lambda: panel._cols == 4 and label.item.scale() < 0.9)
    assert_title_clear_of_frame(panel, f"title-frame-{zoom}-narrow")
    panel.resize(1100, 760)
    qtbot.waitUntil(lambda: label.item.scale() == 1.0)
    assert_title_clear_of_frame(panel, f"title-frame-{zoom}-widened")


def assert_title_clear_of_frame(panel, name: str) -> None:
    """Each engine's title text ends at least the frame's pen width above the matrix, and no more than a pen
    width and a pixel above it (the matrix keeps the rest of the height); no frame pixel inside the text."""
    assert_titles_clear(panel, [(engine, v.plot, v.outline) for engine, v in panel._views.items()], name)


@pytest.mark.parametrize("zoom", [100, 150, 200])
def test_the_attention_maps_step_frame_never_touches_its_title_text(qtbot, zoomed, zoom):
    """The attention map's two-line title ("naive", then "layer 0, head 0, step 39") sits wholly above the frame
    of the step's rows, as the work matrix's titles do: naive's frame runs along the map's top edge, and a panel
    wider than tall gives the aspect-locked map the view's full height. Also with the title scaled to a narrow
    panel (style.fit_title), and widened back."""
    from kvviz.ui.panels._plots import scenes_in, zoom_items
    from kvviz.ui.panels.attention import AttentionPanel

    zoomed(zoom)
    panel = shown(qtbot, AttentionPanel(), 1100, 600)
    hist = synthetic_history(58, 40, ("naive", "concat"), weights=True)
    panel.show_step(hist, 39)
    zoom_items(scenes_in(panel))  # the pens at the zoom, as the window's grid sets them after a draw
    panel.show_step(hist, 39)
    plot, outline = panel._plot, panel._outline
    assert outline.rect().top() == 0 and outline.rect().height() == 58 + 39  # naive's frame: every row
    vb = plot.getViewBox()
    assert abs(vb.mapViewToScene(pg.Point(0, 0)).y() - vb.sceneBoundingRect().top()) < 1  # the map's top: the view's
    assert_titles_clear(panel, [("naive", plot, outline)], f"attention-title-{zoom}")
    label = plot.titleLabel
    panel.resize(240, 220)
    qtbot.waitUntil(lambda: label.item.scale() < 0.9)
    assert_titles_clear(panel, [("naive", plot, outline)], f"attention-title-{zoom}-narrow")
    panel.resize(1100, 600)
    qtbot.waitUntil(lambda: label.item.scale() == 1.0)
    assert_titles_clear(panel, [("naive", plot, outline)], f"attention-title-{zoom}-widened")


def assert_titles_clear(panel, plots: list, name: str) -> None:
    """assert_title_clear_of_frame for (what, plot, frame) triples of the panel's canvas."""
    view, image = canvas_grab(panel, name)
    pixels, ratio = to_array(image), image.devicePixelRatio()
    for engine, plot, outline in plots:
        label = plot.titleLabel
        text = label.mapRectToScene(label.itemRect())
        pen = outline.pen().widthF()
        assert pen >= 2 * style.ZOOM - 1e-6, f"{engine}: the frame's pen is {pen} px ({name})"
        frame = outline.mapRectToScene(outline.rect()).adjusted(-pen, -pen, pen, pen)
        assert not text.intersects(frame), f"{engine}: the title's text {text} meets the frame {frame} ({name})"
        vb_top = plot.getViewBox().sceneBoundingRect().top()
        assert pen <= vb_top - text.bottom() <= pen + 1 + 1e-6, \
            f"{engine}: the text ends at {text.bottom()}, the matrix starts at {vb_top} ({name})"
        box = view.mapFromScene(text).boundingRect()
        top, left = round(box.top() * ratio), round(box.left() * ratio)  # a text above the scene: negative
        bottom, right = top + round(box.height() * ratio), left + round(box.width() * ratio)
        inside = pixels[max(top, 0): bottom, max(left, 0): right]
        assert inside.size and near(inside, style.STEP_OUTLINE, 24).sum() == 0, \
            f"{engine}: the frame's colour inside the title's text ({name})"
