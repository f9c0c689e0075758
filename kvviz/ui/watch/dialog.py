"""File > Watch a server...: the servers' URLs (http or https, several side by side), where their KV events are,
an Authorization header for a remote server, whether to check its certificate, a file to record to and the
tokenizer that turns blocks' tokens into text. `request()` is what the window starts a session from; a bad
field is one line under the form and the dialog stays open.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kvviz.peers.watch.client import EVENTS_PORT, REPLAY_PORT, ServerAddress, WatchOptions, address_of, parse_header

SETTINGS = "watch/"  # the dialog's last answers (never the Authorization header)


@dataclass(frozen=True)
class WatchRequest:
    """What to watch: the servers, how, where to record (None: not recorded), the tokenizer ("" none)."""

    addresses: tuple[ServerAddress, ...]
    options: WatchOptions = field(default_factory=WatchOptions)
    record: str | None = None
    model: str = ""


def make_request(urls: str, *, events_port: int = EVENTS_PORT, replay_port: int = REPLAY_PORT, ranks: int = 1,
                 topic: str = "", authorization: str = "", insecure: bool = False, interval_s: float = 1.0,
                 record: str = "", model: str = "") -> WatchRequest:
    """A WatchRequest from the dialog's fields; ValueError (one line) for a bad one."""
    names = urls.replace(",", " ").split()
    if not names:
        raise ValueError("give a vLLM server's URL (http://HOST:PORT or https://HOST:PORT)")
    headers = (parse_header(f"Authorization: {authorization.strip()}"),) if authorization.strip() else ()
    addresses = tuple(address_of(u, events_port=events_port, replay_port=replay_port or None, ranks=ranks,
                                 topic=topic.strip(), headers=headers) for u in names)
    return WatchRequest(addresses, WatchOptions(interval_s=interval_s, insecure=insecure),
                        record.strip() or None, model.strip())


class WatchDialog(QDialog):
    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("watch_dialog")
        self.settings = settings
        self.setWindowTitle(self.tr("Watch a vLLM server"))
        form = QFormLayout()
        self.urls = QLineEdit()
        self.urls.setObjectName("watch_urls")
        self.urls.setPlaceholderText("http://127.0.0.1:8000  https://gpu-box:8443")
        self.urls.setToolTip(self.tr("One URL per server, separated by spaces: several are drawn side by side"))
        self.events_port = self._port(EVENTS_PORT, 1)
        self.replay_port = self._port(REPLAY_PORT, 0)
        self.replay_port.setSpecialValueText(self.tr("none"))
        self.ranks = QSpinBox()
        self.ranks.setRange(1, 64)
        self.ranks.setToolTip(self.tr("Data-parallel ranks per server: rank r's event ports are offset by r"))
        self.topic = QLineEdit()
        self.topic.setPlaceholderText(self.tr("every topic"))
        self.authorization = QLineEdit()
        self.authorization.setObjectName("watch_authorization")
        self.authorization.setEchoMode(QLineEdit.EchoMode.Password)
        self.authorization.setPlaceholderText("Bearer TOKEN")
        self.authorization.setToolTip(self.tr("Sent as the Authorization header with each GET /metrics; never "
                                              "saved"))
        self.insecure = QCheckBox(self.tr("https without checking the server's certificate"))
        self.record = QLineEdit()
        self.record.setObjectName("watch_record")
        self.record.setPlaceholderText(self.tr("not recorded"))
        browse = QPushButton(self.tr("Browse..."))
        browse.clicked.connect(self._browse)
        record_row = QHBoxLayout()
        record_row.addWidget(self.record, 1)
        record_row.addWidget(browse)
        self.model = QLineEdit()
        self.model.setPlaceholderText(self.tr("none: blocks drawn without their text"))
        self.model.setToolTip(self.tr("The server's tokenizer (a model folder or a preset): each block's tokens "
                                      "shown as text"))
        form.addRow(self.tr("Server URLs"), self.urls)
        form.addRow(self.tr("KV events port"), self.events_port)
        form.addRow(self.tr("Replay port"), self.replay_port)
        form.addRow(self.tr("Ranks"), self.ranks)
        form.addRow(self.tr("Event topic"), self.topic)
        form.addRow(self.tr("Authorization"), self.authorization)
        form.addRow("", self.insecure)
        form.addRow(self.tr("Record to"), record_row)
        form.addRow(self.tr("Tokenizer"), self.model)
        self.error = QLabel()
        self.error.setObjectName("watch_dialog_error")
        self.error.setStyleSheet("color: #b00020;")
        self.error.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText(self.tr("Watch"))
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self._restore()
        self._request: WatchRequest | None = None

    @staticmethod
    def _port(value: int, lowest: int) -> QSpinBox:
        box = QSpinBox()
        box.setRange(lowest, 65535)
        box.setValue(value)
        return box

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Record the watch to"), self.record.text(),
                                              self.tr("Watch recordings (*.kvwatch)"))
        if path:
            self.record.setText(path)

    def _restore(self) -> None:
        s = self.settings
        if s is None:
            return
        self.urls.setText(s.value(SETTINGS + "urls", "", type=str))
        self.events_port.setValue(s.value(SETTINGS + "events_port", EVENTS_PORT, type=int))
        self.replay_port.setValue(s.value(SETTINGS + "replay_port", REPLAY_PORT, type=int))
        self.ranks.setValue(s.value(SETTINGS + "ranks", 1, type=int))
        self.topic.setText(s.value(SETTINGS + "topic", "", type=str))
        self.insecure.setChecked(s.value(SETTINGS + "insecure", False, type=bool))
        self.model.setText(s.value(SETTINGS + "model", "", type=str))

    def _save(self) -> None:
        s = self.settings
        if s is None:
            return
        for key, value in (("urls", self.urls.text()), ("events_port", self.events_port.value()),
                           ("replay_port", self.replay_port.value()), ("ranks", self.ranks.value()),
                           ("topic", self.topic.text()), ("insecure", self.insecure.isChecked()),
                           ("model", self.model.text())):
            s.setValue(SETTINGS + key, value)

    def request(self) -> WatchRequest:
        """The fields as a WatchRequest; ValueError (one line) for a bad one."""
        return make_request(self.urls.text(), events_port=self.events_port.value(),
                            replay_port=self.replay_port.value(), ranks=self.ranks.value(), topic=self.topic.text(),
                            authorization=self.authorization.text(), insecure=self.insecure.isChecked(),
                            record=self.record.text(), model=self.model.text())

    def accept(self) -> None:
        try:
            self._request = self.request()
        except ValueError as exc:
            self.error.setText(str(exc))
            return
        self._save()
        super().accept()

    def accepted_request(self) -> WatchRequest | None:
        return self._request
