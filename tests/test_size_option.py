"""--size WIDTHxHEIGHT: kvviz shot and kvviz export read it with one rule and refuse it with one line."""
from __future__ import annotations

import pytest

from kvviz.options import parse_size


def test_parse_size_reads_width_by_height():
    assert parse_size("1600x1000") == (1600, 1000)
    assert parse_size("320X240") == (320, 240)
    assert parse_size("8192x8192") == (8192, 8192)


@pytest.mark.parametrize("size, says", [
    ("big", "--size must be WIDTHxHEIGHT such as 1600x1000, got 'big'"),
    ("100x100", "--size 100x100 is outside 320x240 .. 8192x8192"),
    ("8193x600", "--size 8193x600 is outside 320x240 .. 8192x8192"),
])
def test_shot_and_export_refuse_a_bad_size_with_the_same_line(tmp_path, capsys, size, says):
    from kvviz.cli import main

    for command, extra in (("shot", []), ("export", ["--png"])):
        out = tmp_path / command
        assert main([command, "--out", str(out), *extra, "--size", size]) == 2
        err = capsys.readouterr().err
        assert err == f"kvviz {command}: error: {says}\n"
        assert not out.exists()
