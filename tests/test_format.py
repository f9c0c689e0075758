"""kvviz.format: bytes, counts and durations against figures worked out by hand."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kvviz.format import (
    DEFAULT_PROMPT,
    byte_unit,
    duration_unit,
    fmt_bytes,
    fmt_count,
    fmt_count_short,
    fmt_figure,
    fmt_ms,
)


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"),
    (512, "512 B"),
    (1023, "1023 B"),
    (1024, "1.0 KiB"),
    (1536, "1.5 KiB"),  # 1536 / 1024 = 1.5
    (12 * 1024 * 1024, "12.0 MiB"),
    (1048575, "1.0 MiB"),  # 1023.999 KiB rounds to 1024.0: shown in the next unit
    (3 * 2**30 + 2**29, "3.5 GiB"),
    (5 * 2**40, "5.0 TiB"),
    (2621420 * 2**30, "2.5 PiB"),  # the memory calculator's "2621420.0 GiB": 2621420 / 1024**2 = 2.49998
    (3072 * 2**50, "3,072.0 PiB"),  # past the last unit: separators, never a longer unit name
])
def test_fmt_bytes(n, text):
    assert fmt_bytes(n) == text


def test_units_named_once_for_a_column():
    """A column of figures names its unit once (the summary's rows): the unit of its largest figure,
    and each figure to three significant figures in it."""
    assert [byte_unit(n) for n in (0, 1023, 1024, 7_247_757, 3 * 2**60)] == [
        ("B", 1), ("B", 1), ("KiB", 1024), ("MiB", 2**20), ("PiB", 2**50)]
    assert [duration_unit(ms)[0] for ms in (0.5, 999.9, 4_800, 1_407_364.1, 9e6)] == ["ms", "ms", "s", "min", "h"]
    # 7,247,757 B / 2**20 = 6.912 MiB; 16,420 B / 2**20 = 0.01566; 512 B / 2**20 = 0.00049
    assert [fmt_figure(n / 2**20) for n in (0, 512, 16_420, 7_247_757)] == ["0", "<0.01", "0.02", "6.91"]
    assert [fmt_figure(x) for x in (0.25, 15.66, 156.4, 4123.2)] == ["0.25", "15.7", "156", "4,123"]


def test_counts():
    assert [fmt_count(n) for n in (0, 98, 3140, 4152060)] == ["0", "98", "3,140", "4,152,060"]
    assert fmt_count(2076030.0) == "2,076,030"  # a float sum of whole counts prints as the count
    assert [fmt_count_short(n) for n in (98_304, 27_530_000, 1_540_000_000)] == ["98,304", "27.53 M", "1.54 B"]


@pytest.mark.parametrize(("ms", "text"), [
    (0.0000507, "51 ns"),
    (0.0009996, "1.0 µs"),  # 999.6 ns rounds to 1000: the next unit
    (0.2838528, "283.9 µs"),
    (28.643328, "28.6 ms"),
    (999.96, "1.0 s"),
    (12_345.0, "12.3 s"),
    (1_407_364.1, "23.5 min"),  # the calculator's "1,407,364.1 ms": 1407.4 s / 60 = 23.46 min
    (59_999.0, "1.0 min"),  # 59.999 s rounds to 60.0 s: shown as a minute
    (9_000_000.0, "2.5 h"),  # 9000 s / 3600
    (1e12, "277,777.8 h"),
])
def test_fmt_ms(ms, text):
    assert fmt_ms(ms) == text


def test_default_prompt_is_a_sentence():
    assert DEFAULT_PROMPT.startswith("The key and value") and DEFAULT_PROMPT == DEFAULT_PROMPT.strip()


def test_imports_neither_qt_nor_torch():
    """The commands and the window share it: it must bring neither side's packages."""
    code = ("import sys, kvviz.format; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'PySide6', 'pyqtgraph', 'numpy')]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
