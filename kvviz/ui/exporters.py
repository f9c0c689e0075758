"""Rendering for exports: a widget to PNG at a scale factor, to SVG, to the clipboard; frames to GIF or MP4.

Every file goes to a temporary name in the target folder and is renamed when complete (kvviz.fileio), so
a full disk, a refused folder or a cancelled animation leaves nothing behind; failures are ValueError
with one line. Widgets and images only: nothing here knows about runs, panels or the window.
"""
from __future__ import annotations

import errno
import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QRegion
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

from kvviz.fileio import atomic_write

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ANIMATION_FORMATS = ("gif", "mp4")
MAX_GIF_FPS = 50  # GIF delays are in hundredths of a second, and viewers slow anything faster
MAX_SCALE = 8.0


class Cancelled(Exception):
    """The user cancelled a long export; the partial file is already gone."""


# -- files ---------------------------------------------------------------------------------------------
def describe_os_error(target: Path, exc: OSError, folder: Path | None = None) -> str:
    """One line saying why `target` (a file, or with `folder` given, that folder) could not be written."""
    folder = folder or (target.parent if str(target.parent) else Path("."))
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full (nothing was saved)"
    elif code in (errno.EACCES, errno.EPERM):
        why = f"no permission to write in {folder}"
    elif code == errno.EROFS:
        why = f"{folder} is on a read-only file system"
    elif code == errno.ENOENT:
        why = f"the folder {folder} does not exist"
    elif code == errno.ENOTDIR:
        why = f"{folder} is not a folder"
    else:
        why = exc.strerror or str(exc)
    return f"cannot write {target}: {why}"


def check_folder(folder: str | Path) -> Path:
    """Raise ValueError unless a file can be created in `folder` (tried for real: a test file made and
    removed, so a read-only mount or a full quota shows up before any rendering work)."""
    folder = Path(folder)
    if not folder.exists():
        raise ValueError(f"the folder {folder} does not exist")
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".kvviz-probe-", dir=folder)
    except OSError as exc:
        raise ValueError(describe_os_error(folder, exc, folder)) from None
    os.close(fd)
    os.unlink(probe)
    return folder


def check_target(path: str | Path) -> Path:
    """Raise ValueError unless `path` can be written: its folder accepts files and it is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"cannot write {path}: it is a folder")
    check_folder(path.parent if str(path.parent) else Path("."))
    return path


def write_file(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Run `write(tmp)` and deliver tmp to `path` by kvviz.fileio's output rule (a rename, with the mode a
    plain open() gives); any failure removes tmp. OSError becomes one-line ValueError; Cancelled passes through
    (the partial file removed)."""
    path = check_target(path)
    try:
        return atomic_write(path, write)
    except OSError as exc:
        raise ValueError(describe_os_error(path, exc)) from exc


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write_file(path, lambda tmp: _write_all(tmp, data))


def _write_all(tmp: Path, data: bytes) -> None:
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())  # a full disk shows here, before the rename, not later


# -- images --------------------------------------------------------------------------------------------
def check_scale(scale: float) -> float:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and 0.25 <= scale <= MAX_SCALE):
        raise ValueError(f"scale must be between 0.25 and {MAX_SCALE:g}, got {scale!r}")
    return float(scale)


def render_widget(widget: QWidget, scale: float = 1.0) -> QImage:
    """The widget as it looks on screen, drawn at `scale` times its size (vector content and text stay
    sharp: the widget paints again at the higher resolution rather than being enlarged)."""
    scale = check_scale(scale)
    size = widget.size()
    if size.width() <= 0 or size.height() <= 0:
        raise ValueError("nothing to render: the view has no size (is it hidden?)")
    image = QImage(max(1, round(size.width() * scale)), max(1, round(size.height() * scale)),
                   QImage.Format.Format_RGB32)
    image.setDevicePixelRatio(scale)
    image.fill(widget.palette().window().color())
    painter = QPainter(image)
    painter.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing
                           | QPainter.RenderHint.SmoothPixmapTransform)
    widget.render(painter, QPoint(0, 0), QRegion(widget.rect()),
                  QWidget.RenderFlag.DrawWindowBackground | QWidget.RenderFlag.DrawChildren)
    painter.end()
    image.setDevicePixelRatio(1.0)  # consumers count pixels
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise ValueError("could not encode the image as PNG")
    buffer.close()
    return bytes(data.data())


def save_png(image: QImage, path: str | Path) -> Path:
    """Encode in memory, then write atomically (so a full disk is an OSError we can name, not a False)."""
    return write_bytes(path, png_bytes(image))


def copy_image(image: QImage) -> None:
    QGuiApplication.clipboard().setImage(image)


def image_array(image: QImage) -> np.ndarray:
    """(H, W, 3) uint8 RGB copy of a QImage."""
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    h, w, stride = rgb.height(), rgb.width(), rgb.bytesPerLine()
    buf = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=stride * h).reshape(h, stride)
    return buf[:, : w * 3].reshape(h, w, 3).copy()


def _grid(sizes: list[tuple[int, int]], cols: int, gap: int) -> tuple[list[int], list[int]]:
    rows = math.ceil(len(sizes) / cols)
    col_w = [max(w for w, _ in sizes[c::cols]) for c in range(cols)]
    row_h = [max(h for _, h in sizes[r * cols:(r + 1) * cols]) for r in range(rows)]
    return col_w, row_h


def tile(images: list[QImage], caption: str = "", gap: int = 8, background: QColor | None = None,
         aspect: float = 16 / 9) -> QImage:
    """Images in a grid whose shape comes closest to `aspect` (wide panels stack, tall ones sit side by
    side), on a plain background, with an optional caption strip under them."""
    if not images:
        raise ValueError("no images to tile")
    background = background or QColor("white")
    sizes = [(im.width(), im.height()) for im in images]

    def shape_error(cols: int) -> float:
        col_w, row_h = _grid(sizes, cols, gap)
        w, h = sum(col_w) + gap * (cols - 1), sum(row_h) + gap * (len(row_h) - 1)
        return abs(math.log((w / h) / aspect))

    cols = min(range(1, len(images) + 1), key=shape_error)
    col_w, row_h = _grid(sizes, cols, gap)
    font = QFont()
    caption_h = 0
    if caption:
        font.setPixelSize(max(12, min(28, sum(row_h) // 30)))
        caption_h = font.pixelSize() * 2
    width = sum(col_w) + gap * (cols - 1)
    height = sum(row_h) + gap * (len(row_h) - 1) + caption_h
    out = QImage(width, height, QImage.Format.Format_RGB32)
    out.fill(background)
    painter = QPainter(out)
    for i, im in enumerate(images):
        r, c = divmod(i, cols)
        painter.drawImage(QPoint(sum(col_w[:c]) + gap * c, sum(row_h[:r]) + gap * r), im)
    if caption:
        painter.setFont(font)
        painter.setPen(QColor("#333333"))
        painter.drawText(QRect(0, height - caption_h, width, caption_h), Qt.AlignmentFlag.AlignCenter, caption)
    painter.end()
    return out


# -- SVG -----------------------------------------------------------------------------------------------
def widget_svg(widget: QWidget) -> bytes:
    """The widget as SVG: Qt's SVG generator for the widgets (labels, tables, legends, as vector text),
    with each pyqtgraph view replaced by pyqtgraph's own SVG export of its scene, which keeps curves,
    markers and images right where Qt's generator garbles them."""
    import pyqtgraph as pg
    from pyqtgraph.exporters import SVGExporter

    w, h = widget.width(), widget.height()
    if w <= 0 or h <= 0:
        raise ValueError("nothing to render: the view has no size (is it hidden?)")
    views = [v for v in widget.findChildren(pg.GraphicsView) if v.isVisibleTo(widget) and v.width() > 0]
    if isinstance(widget, pg.GraphicsView):
        views.insert(0, widget)
    region = QRegion(widget.rect())
    placed = []
    for view in views:
        top_left = view.mapTo(widget, QPoint(0, 0)) if view is not widget else QPoint(0, 0)
        rect = QRect(top_left, view.size())
        region -= QRegion(rect)
        placed.append((rect, SVGExporter(view.scene()).export(toBytes=True)))

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(QSize(w, h))
    generator.setViewBox(QRect(0, 0, w, h))
    generator.setResolution(96)
    generator.setTitle(widget.windowTitle() or "kvviz")
    painter = QPainter(generator)
    if not region.isEmpty():
        widget.render(painter, QPoint(0, 0), region,
                      QWidget.RenderFlag.DrawWindowBackground | QWidget.RenderFlag.DrawChildren)
    painter.end()
    buffer.close()

    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(bytes(data.data()))
    root.set("width", f"{w}px")
    root.set("height", f"{h}px")
    for rect, svg in placed:
        child = ET.fromstring(svg)
        child.set("x", str(rect.x()))
        child.set("y", str(rect.y()))
        child.set("width", str(rect.width()))
        child.set("height", str(rect.height()))
        root.append(child)
    return b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + ET.tostring(root, encoding="utf-8",
                                                                                     xml_declaration=False)


def save_svg(widget: QWidget, path: str | Path) -> Path:
    return write_bytes(path, widget_svg(widget))


# -- animations ----------------------------------------------------------------------------------------
def check_fps(fps: float, fmt: str) -> float:
    top = MAX_GIF_FPS if fmt == "gif" else 120
    if not (isinstance(fps, (int, float)) and math.isfinite(fps) and 0.1 <= fps <= top):
        raise ValueError(f"frames per second for {fmt.upper()} must be between 0.1 and {top}, got {fps!r}")
    return float(fps)


def animation_format(path: str | Path, fmt: str | None = None) -> str:
    fmt = (fmt or Path(path).suffix.lstrip(".")).lower()
    if fmt not in ANIMATION_FORMATS:
        raise ValueError(f"animation format must be GIF or MP4 (.gif or .mp4), got {fmt or 'no extension'!r}")
    return fmt


def ffmpeg_exe() -> str:
    """The ffmpeg that imageio-ffmpeg ships; ValueError saying how to get it otherwise."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:  # ImportError, or its RuntimeError when no binary is found
        raise ValueError(f"MP4 needs ffmpeg: pip install imageio-ffmpeg ({type(exc).__name__}: {exc})") from None


def _even(a: np.ndarray) -> np.ndarray:
    """Pad to even width and height with the edge colour: H.264 in yuv420p needs both even."""
    h, w = a.shape[:2]
    if h % 2 or w % 2:
        a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    return a


def _fit(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Pad (or crop) a frame to the first frame's (H, W): every frame of a video has one size."""
    h, w = size
    if a.shape[:2] == (h, w):
        return a
    out = np.full((h, w, 3), 255, dtype=np.uint8)
    ch, cw = min(h, a.shape[0]), min(w, a.shape[1])
    out[:ch, :cw] = a[:ch, :cw]
    return out


def _write_gif(tmp: Path, frames: Iterable[np.ndarray], fps: float) -> int:
    """Pillow directly (imageio's GIF path would quantise with median cut, ~6x slower on UI images):
    each frame is reduced to its own 256-colour palette as it arrives (fast octree, no dithering, which
    keeps flat UI colours flat), so memory holds one byte per pixel per frame and the cost shows in
    the progress rather than at the end."""
    from PIL import Image

    palettes: list[Image.Image] = []
    size: tuple[int, int] | None = None
    for frame in frames:
        size = size or frame.shape[:2]
        rgb = Image.fromarray(np.ascontiguousarray(_fit(frame, size)), "RGB")
        palettes.append(rgb.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE))
    if not palettes:
        raise ValueError("no frames to write")
    with open(tmp, "wb") as fh:
        palettes[0].save(fh, format="GIF", save_all=True, append_images=palettes[1:],
                         duration=round(1000.0 / fps), loop=0)
        fh.flush()
        os.fsync(fh.fileno())
    return len(palettes)


def _ffmpeg_failed(stderr: bytes, code: int | None = None) -> OSError:
    """ffmpeg's own last lines are the useful part (a full disk: `No space left on device`)."""
    text = " ".join(stderr.decode("utf-8", "replace").split())[-300:]
    lower = text.lower()
    if "no space left" in lower or "disk quota" in lower:
        return OSError(errno.ENOSPC, "No space left on device")
    status = f" (exit status {code})" if code else ""
    return OSError(errno.EIO, f"ffmpeg failed{status}: {text or 'no message'}")


def mp4_boxes(path: str | Path) -> dict[str, int]:
    """The top-level boxes of an MP4 file, name -> size; ValueError unless the boxes tile the whole file
    (a file cut short by a full disk, or missing its index, fails here)."""
    path = Path(path)
    total = path.stat().st_size
    boxes: dict[str, int] = {}
    with open(path, "rb") as fh:
        at = 0
        while at < total:
            head = fh.read(8)
            if len(head) < 8:
                raise ValueError(f"{path}: the file ends inside a box header at byte {at}")
            size, name = int.from_bytes(head[:4], "big"), head[4:].decode("latin-1")
            header = 8
            if size == 1:  # a 64-bit size follows
                big = fh.read(8)
                if len(big) < 8:
                    raise ValueError(f"{path}: the file ends inside a box header at byte {at}")
                size, header = int.from_bytes(big, "big"), 16
            elif size == 0:  # to the end of the file
                size = total - at
            if size < header or at + size > total:
                raise ValueError(f"{path}: box {name!r} at byte {at} runs past the end of the file")
            boxes[name] = boxes.get(name, 0) + size
            at += size
            fh.seek(at)
    return boxes


def probe_mp4(path: str | Path, frames: int) -> None:
    """Raise OSError unless `path` is a complete MP4 holding `frames` video frames: its boxes tile the
    file with ftyp, moov and mdat present, and ffmpeg reads back the frame count (packets copied, not
    decoded: a fraction of the encoding time)."""
    import subprocess

    path = Path(path)
    try:
        boxes = mp4_boxes(path)
    except ValueError as exc:
        raise OSError(errno.EIO, f"the encoder left an incomplete file: {exc}") from None
    absent = [b for b in ("ftyp", "moov", "mdat") if b not in boxes]
    if absent:
        raise OSError(errno.EIO, f"the encoder left an incomplete file (no {', '.join(absent)} box)")
    proc = subprocess.run([ffmpeg_exe(), "-nostdin", "-hide_banner", "-i", str(path), "-map", "0:v:0",
                           "-c", "copy", "-f", "null", "-"], capture_output=True, timeout=120)
    out = proc.stderr.decode("utf-8", "replace")
    counts = [int(m) for m in re.findall(r"frame=\s*(\d+)", out)]
    if proc.returncode != 0 or not counts:
        raise _ffmpeg_failed(proc.stderr, proc.returncode)
    if counts[-1] != frames:
        raise OSError(errno.EIO, f"the encoder wrote {counts[-1]} frames of {frames}")


def _start_ffmpeg(cmd: list[str], log):
    import subprocess

    try:
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
    except OSError as exc:  # not the target's fault: say it is ffmpeg that could not run
        raise OSError(errno.EIO, f"ffmpeg could not start ({cmd[0]}: {exc.strerror or exc})") from None


def _write_mp4(tmp: Path, frames: Iterable[np.ndarray], fps: float) -> int:
    """H.264 through ffmpeg, whose exit status is checked and whose file is read back (probe_mp4):
    ffmpeg can fail writing the index at the end, after every frame was accepted."""
    import subprocess
    from fractions import Fraction

    exe = ffmpeg_exe()
    count = 0
    proc: subprocess.Popen | None = None
    size: tuple[int, int] | None = None
    with tempfile.TemporaryFile() as log:
        try:
            for frame in frames:
                frame = _even(frame)
                if proc is None:
                    size = frame.shape[:2]
                    rate = str(Fraction(fps).limit_denominator())
                    proc = _start_ffmpeg(
                        [exe, "-y", "-nostdin", "-v", "error", "-f", "rawvideo", "-vcodec", "rawvideo",
                         "-s", f"{size[1]}x{size[0]}", "-pix_fmt", "rgb24", "-r", rate, "-i", "-", "-an",
                         "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-crf", "10", "-movflags", "+faststart",
                         "-f", "mp4", str(tmp)],
                        log)
                try:
                    proc.stdin.write(np.ascontiguousarray(_fit(frame, size)).tobytes())
                except (BrokenPipeError, OSError):
                    proc.wait(timeout=60)
                    log.seek(0)
                    raise _ffmpeg_failed(log.read(), proc.returncode) from None
                count += 1
            if not count:
                raise ValueError("no frames to write")
            proc.stdin.close()
            code = proc.wait(timeout=600)
            if code != 0:
                log.seek(0)
                raise _ffmpeg_failed(log.read(), code)
        finally:
            if proc is not None and proc.poll() is None:  # cancelled, or an error: ffmpeg must not linger
                proc.kill()
                proc.wait()
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())  # a full disk shows here too, before the rename
    probe_mp4(tmp, count)
    return count


def write_animation(path: str | Path, frames: Iterable[np.ndarray], fps: float, fmt: str | None = None) -> int:
    """Write (H, W, 3) uint8 frames, one per step, as an animated GIF or an H.264 MP4; return the frame
    count. `frames` is consumed lazily, so it may render as it goes and raise Cancelled to stop (the
    partial file is removed either way)."""
    fmt = animation_format(path, fmt)
    fps = check_fps(fps, fmt)
    if fmt == "mp4":
        ffmpeg_exe()
    counted: list[int] = []
    writer = _write_gif if fmt == "gif" else _write_mp4
    write_file(path, lambda tmp: counted.append(writer(tmp, frames, fps)))
    return counted[0]
