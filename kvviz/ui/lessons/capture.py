"""The compare window's view as a lesson scene, and a scene shown in the window: capture_view reads the form (the
run it describes), the step shown, the panels shown and the zoom through the window's public surface;
add_scene appends it to a lesson file as a [[scene]] table; apply_scene sets a window to a scene's view.
Knows the window's public methods and the lesson format; no torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kvviz.lessons.lesson import Scene, toml_key, toml_value


def capture_view(window, title: str, caption: str = "") -> dict[str, Any]:
    """The window as a scene's table: a compare source of the form's settings, the step shown (when a run is
    drawn), the panels laid out in the grid with the largest of them large (the one alone, if one is), the zoom."""
    request = window.build_request()
    run = request.run
    source: dict[str, Any] = {
        "kind": "compare", "prompt": run.prompt, "engines": list(run.engines), "tokens": run.max_new_tokens,
        "model": request.model, "device": request.device, "dtype": request.dtype,
        "temperature": run.sampling.temperature, "seed": run.sampling.seed, "block_size": run.block_size,
        "window": run.window, "sinks": run.sinks, "kernel": run.kernel,
        "layer": -1 if run.trace.weights_layer is None else run.trace.weights_layer, "head": run.trace.weights_head,
    }
    for key, value in (("top_k", run.sampling.top_k), ("top_p", run.sampling.top_p), ("residual", run.residual),
                       ("threads", request.threads)):
        if value is not None:
            source[key] = value
    panels, large = seen_panels(window.grid)
    doc: dict[str, Any] = {"title": {"en": title}, "caption": {"en": caption or title}, "source": source,
                           "panels": panels, "large": large, "zoom": window.presentation.zoom}
    if window.history.n_steps():
        doc["step"] = selected_step(window)
    return doc


def seen_panels(grid) -> tuple[list[str], str]:
    """The panels the grid lays out now, in View's order, and the one shown largest (the one alone, where one is):
    those behind tabs or hidden in View are not what the user saw. A grid not laid out yet: the panels checked in
    View, the first the large one."""
    laid = grid.laid_out()
    panels = [k for k in grid.shown_panels() if k in laid] or grid.shown_panels()
    if not panels:
        raise ValueError("no panel is shown (View > Panels)")
    frames = getattr(grid, "frames", {})

    def area(key: str) -> int:
        frame = frames.get(key)
        return frame.width() * frame.height() if frame is not None and key in laid else 0

    return panels, max(panels, key=lambda k: (area(k), -panels.index(k)))


def selected_step(window) -> int:
    """The step the window shows (the shell's property, or a method where a window still has one)."""
    step = window.selected_step
    return step() if callable(step) else step


def scene_toml(doc: dict[str, Any]) -> str:
    return "\n[[scene]]\n" + "".join(f"{toml_key(key)} = {toml_value(value)}\n" for key, value in doc.items())


def add_scene(path: str | Path, doc: dict[str, Any]) -> Path:
    """Append the scene to a .toml lesson (a new file gets a title from the scene's); the lesson is read back
    before it is written, so a scene it would refuse is refused here in its one line and the file is untouched."""
    import tomllib

    from kvviz.fileio import atomic_write_text
    from kvviz.lessons.lesson import lesson_from_dict

    path = Path(path)
    if path.suffix.lower() != ".toml":
        raise ValueError(f"{path.name}: scenes are added to a .toml lesson")
    text = path.read_text(encoding="utf-8") if path.exists() else f"title = {toml_value(doc['title'])}\n"
    text = text.rstrip("\n") + "\n" + scene_toml(doc)
    lesson_from_dict(tomllib.loads(text), path)
    return atomic_write_text(path, text)


def apply_scene(window, scene: Scene) -> None:
    """The window set to a compare scene's view: its form, its panels (the large one first), its zoom; its step
    once the window shows a run of that many steps (select_step). ValueError for a scene of another kind."""
    from kvviz.ui.job import ExportJob, fill_form

    if scene.source.kind != "compare":
        raise ValueError(f"scene {scene.index}: the compare window shows compare scenes, not {scene.source.kind}")
    s = scene.source.settings
    fill_form(window, ExportJob(out=Path("."), prompt=s["prompt"], tokens=s["tokens"], engines=tuple(s["engines"]),
                                model=s["model"], panels=(), device=s["device"], dtype=s["dtype"],
                                temperature=s["temperature"], top_k=s["top_k"], top_p=s["top_p"], seed=s["seed"],
                                threads=s["threads"], block_size=s["block_size"], window=s["window"],
                                sinks=s["sinks"], residual=s["residual"], kernel=s["kernel"]))
    for key, act in window.grid.panel_actions.items():
        act.setChecked(key in scene.panels)
    window.grid.show_checked_panels()
    window.presentation.set_zoom(scene.zoom, save=False)
    n = window.history.n_steps()
    if n:
        window.select_step(scene.step + n if scene.step < 0 else min(scene.step, n - 1))
