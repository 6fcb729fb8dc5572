"""The script that makes the README's picture of the page still makes one: ``mnemon demo``,
``mnemon serve`` over it, headless Chromium — a PNG of the size asked, small enough for the
front page. Written to a temporary path: the suite never rewrites docs/img/page.png."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from .test_page import pytestmark  # noqa: F401  (needs chromium and chromedriver)

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "img" / "make_page_picture.py"


def test_the_page_picture_is_made(tmp_path):
    out = tmp_path / "page.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--width", "1100",
                           "--height", "700"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1100, 700)  # the IHDR's width and height
    assert len(png) < 250_000
    assert list(tmp_path.iterdir()) == [out]  # nothing else left behind
