"""Make ``docs/img/page.png``, the README's picture of the page ``mnemon serve`` serves.

The picture is a real screenshot, not a mock-up: this script runs ``mnemon demo`` into a
temporary run root, serves it read-only with ``mnemon serve RUN_ROOT`` on loopback (any free
port, a token of its own), opens the page in headless Chromium through Selenium, selects the
root agent and shows its conversation where the model evicted its first turns — the lineage on
the left, the eviction's note in place of the turns it replaced — and saves the window. The demo
is scripted and offline, so the picture only changes when the page or the demo does.

To make it again (from the repository, in the virtualenv of the README's install, which has
Selenium; Chromium and its driver as ``.ci/run`` installs them, ``apt-get install chromium
chromium-driver`` on Debian)::

    python docs/img/make_page_picture.py            # writes docs/img/page.png
    python docs/img/make_page_picture.py --out /tmp/page.png --width 1440 --height 900

The PNG is reduced to a 256-colour palette when that makes it smaller (the page is flat colours
and text), so the picture stays well under 250 KB. Nothing is left behind: the run root is a
temporary directory and the server is stopped at the end.

Why a script and not the browser tests' ``MNEMON_DOC_SCREENSHOTS=1`` (which refreshes
``docs/service.md``'s four pictures): those are taken mid-assertion, at whatever point a test
needed; the front page's picture is composed for a reader, and making it must not depend on
running a test.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADDRESS = re.compile(r"^mnemon: serving .* on (http://\S+)$")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "page.png", help="where the PNG goes")
    p.add_argument("--width", type=int, default=1280, help="window width (CSS pixels)")
    p.add_argument("--height", type=int, default=760, help="window height (CSS pixels)")
    args = p.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        sys.exit("make_page_picture: needs chromium and chromedriver on PATH "
                 "(Debian: apt-get install chromium chromium-driver)")
    with tempfile.TemporaryDirectory(prefix="mnemon-page-") as tmp:
        # both run inside the temporary directory: nothing lands in the caller's folder
        subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", "demo"],
                       cwd=tmp, check=True, capture_output=True, timeout=300)
        token = secrets.token_urlsafe(24)
        server = subprocess.Popen(
            [sys.executable, "-m", "mnemon", "serve", "demo", "--port", "0", f"--token={token}"],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MNEMON_TOKEN": ""})
        try:
            base = _address(server)
            png = _screenshot(f"{base}/#token={token}", chromium, driver_path,
                              args.width, args.height)
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    png = _smaller(png)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"{args.out}: {len(png) // 1024} KB, {args.width}x{args.height}")
    return 0


def _address(server: subprocess.Popen) -> str:
    """The page's address, from the line ``mnemon serve`` prints once it listens."""
    assert server.stderr is not None
    seen = []
    deadline = time.monotonic() + 60
    for line in server.stderr:
        seen.append(line)
        m = ADDRESS.match(line.strip())
        if m:
            return m.group(1).rstrip("/")
        if time.monotonic() > deadline:
            break
    sys.exit("make_page_picture: mnemon serve did not start:\n" + "".join(seen[-20:]))


def _screenshot(url: str, chromium: str, driver_path: str, width: int, height: int) -> bytes:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--force-device-scale-factor=1", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)

    def wait(predicate, timeout=30.0):
        # the page redraws the tree on every event: an element found a moment ago may be gone
        return WebDriverWait(driver, timeout, ignored_exceptions=(
            StaleElementReferenceException, IndexError, StopIteration)).until(predicate)

    try:
        # the viewport itself at the size asked (a headless window's size includes its frame)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        driver.get(url)
        wait(lambda d: d.find_element(By.ID, "live").text == "live")
        wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree li")) == 3)
        # the root agent: its conversation, where the model evicted its first turns
        wait(lambda d: next(li for li in d.find_elements(By.CSS_SELECTOR, "#tree li")
                            if li.get_attribute("data-agent") == "a1")
             .find_element(By.CSS_SELECTOR, ".agent").click() or True)
        wait(lambda d: d.find_element(By.ID, "agent-title").text == "Agent a1")
        wait(lambda d: "VESPER-7" in d.find_element(By.ID, "conv").text)
        residue = wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#conv .event.residue")[0])
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", residue)
        driver.execute_script("document.activeElement && document.activeElement.blur()")
        time.sleep(0.5)  # let the scroll and the last redraw settle
        return driver.get_screenshot_as_png()
    finally:
        driver.quit()


def _smaller(png: bytes) -> bytes:
    """The PNG as a 256-colour palette, when Pillow is there and that is smaller."""
    try:
        from PIL import Image
    except ImportError:
        return png
    img = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(png) else png


if __name__ == "__main__":
    sys.exit(main())
