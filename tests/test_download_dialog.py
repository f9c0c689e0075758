"""Model > Download model against the Hub stand-in on 127.0.0.1 (tests/hubserver.py): progress with bytes
and time left, Cancel then resume, one-line errors, the GUI thread never blocked; and the model box offering
the cached checkpoints the worker listed (the reason as tooltip for one kvviz cannot open)."""
from __future__ import annotations

from pathlib import Path

import pytest
import test_download
from hubserver import HubServer, Repo
from PySide6.QtCore import Qt
from test_download import REPO, WEIGHTS

checkpoint = test_download.checkpoint  # the fixture: a tiny Qwen3 checkpoint in Hugging Face format


# test_download's fixtures: HF_HUB_CACHE in tmp_path, 16 KiB chunks, and no request to the internet.
cache, small_chunks, quiet_local_hub_client = test_download.cache, test_download.small_chunks, \
    test_download.quiet_local_hub_client


@pytest.fixture(autouse=True)
def every_chunk_reported(small_chunks, monkeypatch):
    monkeypatch.setattr("kvviz.ui.download_worker.REPORT_EVERY_S", 0.0)  # a cancel lands inside the weights


def serve(checkpoint: Path, monkeypatch, **kwargs) -> HubServer:
    server = HubServer({REPO: Repo.from_folder(checkpoint)}, **kwargs)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    return server


def test_download_shows_progress_and_offers_the_model(qtbot, checkpoint, cache, monkeypatch):
    from kvviz.ui.dialogs.download import DownloadDialog

    with serve(checkpoint, monkeypatch):
        dialog = DownloadDialog(model_id=REPO)
        qtbot.addWidget(dialog)
        formats = []
        dialog.bar.valueChanged.connect(lambda _v: formats.append(dialog.bar.format()))
        with qtbot.waitSignal(dialog.model_downloaded, timeout=60_000) as done:
            qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
            assert dialog.busy() and not dialog.download_button.isEnabled() and dialog.cancel_button.isEnabled()
        model_id, folder = done.args
    assert model_id == REPO and (Path(folder) / WEIGHTS).read_bytes() == (checkpoint / WEIGHTS).read_bytes()
    assert dialog.bar.value() == 1000 and dialog.status_label.text().startswith("Done")
    assert any(" of " in f and "/s" in f and " left" in f for f in formats), formats
    qtbot.waitUntil(lambda: not dialog.busy())
    assert dialog.download_button.isEnabled() and not dialog.cancel_button.isEnabled()


def test_cancel_keeps_the_partial_and_download_resumes(qtbot, checkpoint, cache, monkeypatch):
    from kvviz.ui.dialogs.download import DownloadDialog

    with serve(checkpoint, monkeypatch) as server:
        dialog = DownloadDialog(model_id=REPO)
        qtbot.addWidget(dialog)

        size = (checkpoint / WEIGHTS).stat().st_size

        def cancel_in_weights(p):  # the weights come last: cancel once 100 kB of them have come
            if p.file == WEIGHTS and p.done_bytes - (p.total_bytes - size) > 100_000:
                dialog.cancel()

        dialog.start()
        dialog._job.progressed.connect(cancel_in_weights)
        qtbot.waitUntil(lambda: not dialog.busy(), timeout=60_000)
        assert dialog.status_label.text().startswith("Cancelled:"), dialog.status_label.text()
        partial = list(cache.rglob("*.kvviz-partial"))
        assert len(partial) == 1
        kept = partial[0].stat().st_size
        with qtbot.waitSignal(dialog.model_downloaded, timeout=60_000):
            qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
        ranges = [rng for method, _path, rng in server.requested(WEIGHTS) if method == "GET"]
    assert ranges[-1] == f"bytes={kept}-"  # resumed from the kept bytes


@pytest.mark.parametrize("failure, expected", [(404, "no such model repo"), ("html", "did not answer with JSON")])
def test_server_errors_are_one_line_in_the_dialog(qtbot, checkpoint, cache, monkeypatch, failure, expected):
    from kvviz.ui.dialogs.download import DownloadDialog

    with serve(checkpoint, monkeypatch, fail={"/api/models": failure}):
        dialog = DownloadDialog(model_id=REPO)
        qtbot.addWidget(dialog)
        dialog.start()
        qtbot.waitUntil(lambda: not dialog.busy(), timeout=60_000)
    text = dialog.status_label.text()
    assert "\n" not in text and expected in text, text
    assert not list(cache.rglob("*.safetensors"))


def test_a_malformed_id_is_one_line(qtbot, cache):
    from kvviz.ui.dialogs.download import DownloadDialog

    dialog = DownloadDialog(model_id="not an id")
    qtbot.addWidget(dialog)
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.busy(), timeout=30_000)
    assert "is not a model id" in dialog.status_label.text()


def test_the_model_box_offers_cached_checkpoints(qtbot, checkpoint, cache, monkeypatch, tmp_path):
    """The worker lists the caches (an openable checkpoint and one of an unsupported architecture); the form
    offers both by id, the second with its reason as tooltip and as the line that keeps Run disabled."""
    import json
    import shutil

    from PySide6.QtCore import QSettings

    from kvviz.download import download_model
    from kvviz.runtime.session import EngineSession
    from kvviz.ui.form import RunForm

    bert = tmp_path / "bert"
    shutil.copytree(checkpoint, bert)
    data = json.loads((bert / "config.json").read_text())
    data.update(model_type="bert", architectures=["BertModel"])
    (bert / "config.json").write_text(json.dumps(data))
    server = HubServer({REPO: Repo.from_folder(checkpoint), "org/bert": Repo.from_folder(bert)})
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    with server:
        download_model(REPO)
        with pytest.raises(ValueError, match="unsupported architecture bert"):
            download_model("org/bert")  # config.json stays in the cache: listed, not openable
    env = EngineSession().environment()
    cached = {m.name: m for m in env.cached_models}
    assert set(cached) == {REPO, "org/bert"}
    assert cached[REPO].available and cached[REPO].config is not None and cached[REPO].config.n_layer == 2
    assert not cached["org/bert"].available and "bert" in cached["org/bert"].reason

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    form = RunForm(settings)
    qtbot.addWidget(form)
    form.set_environment(env)
    combo = form.model_combo
    ids = [combo.itemData(i) for i in range(combo.count())]
    assert REPO in ids and "org/bert" in ids and ids.index(REPO) > ids.index("tiny")
    tip = combo.itemData(ids.index("org/bert"), Qt.ItemDataRole.ToolTipRole)
    assert "unsupported architecture bert" in tip
    form.prompt_edit.setPlainText("hello")
    form.set_model("org/bert")
    assert "unsupported architecture bert" in form.problem()
    form.set_model(REPO)
    assert form.problem() == "" and form.model_choice().config.n_layer == 2


def test_a_downloaded_model_is_added_to_the_model_box(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from kvviz.runtime.messages import Environment, ModelChoice
    from kvviz.ui.form import RunForm

    form = RunForm(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(form)
    form.set_environment(Environment(models=(ModelChoice("tiny"),), default_model="tiny", devices=("cpu",),
                                     auto_device="cpu", engines=(("static", ""),)))
    form.add_downloaded("org/new", str(tmp_path))
    assert form.current_model() == "org/new"
    assert form.model_combo.findData("org/new") >= 0


def test_model_menu_download_adds_the_model_to_the_window(qtbot, checkpoint, cache, monkeypatch, tmp_path):
    """The real window: Model > Download model..., an id, Download; the model box then holds and selects it."""
    from PySide6.QtCore import QObject, QSettings, Signal

    from kvviz.runtime.messages import Environment, ModelChoice
    from kvviz.ui.window import MainWindow

    class IdleWorker(QObject):
        environment_listed, model_loaded, run_started, step_traced = (Signal(object) for _ in range(4))
        run_noted, run_failed = Signal(str, str), Signal(str, str)
        run_finished = Signal(str)

        def __getattr__(self, name):  # every control slot: accepted, ignored
            return lambda *args: None

    worker = IdleWorker()
    window = MainWindow(worker, QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.show()
    worker.environment_listed.emit(Environment(models=(ModelChoice("tiny"),), default_model="tiny",
                                               devices=("cpu",), auto_device="cpu", engines=(("static", ""),)))
    qtbot.waitUntil(lambda: window.form.current_model() == "tiny")
    action = next(a for a in window.model_menu.actions() if a.text() == "Download model...")
    with serve(checkpoint, monkeypatch):
        action.trigger()
        dialog = window.download_dialog
        assert dialog.isVisible()
        qtbot.keyClicks(dialog.id_edit, REPO)
        with qtbot.waitSignal(dialog.model_downloaded, timeout=60_000):
            qtbot.keyClick(dialog.id_edit, Qt.Key.Key_Return)
    assert window.form.current_model() == REPO and window.form.model_combo.findData(REPO) >= 0
    qtbot.waitUntil(lambda: not dialog.busy())
    dialog.close()
