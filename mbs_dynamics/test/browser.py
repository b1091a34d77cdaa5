"""Headless Chromium (Debian's package) for the tests that look at a page:
screenshots, and a browser left open on a page. Each run gets a fresh
profile and a process group of its own, killed whole when it is done (its
renderer and GPU processes would otherwise outlive it and load the machine).

Screenshots are kept in $MBS_TEST_ARTIFACTS (default: test-artifacts/ at the
repository root)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

ARTIFACTS = Path(os.environ.get("MBS_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_chromium_missing = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("MBS_REQUIRE_BROWSER"),
                                       reason="no chromium here (CI installs Debian's package)")


def needs_chromium(test):
    """A test that runs headless Chromium: skipped without it (unless
    MBS_REQUIRE_BROWSER), and with pytest-xdist on one worker, one browser
    test after the other (software WebGL takes more than a core)."""
    return pytest.mark.xdist_group("browser")(_chromium_missing(test))
# A screenshot is taken once the page has had this long (ms of the page's virtual time) to connect and draw.
# Chromium renders every frame of it in software: a saved page replaying its recording took 9-10 s of wall
# time per 1000 ms on a quiet machine, 15 s on a busy one (12000 ms outlasted any timeout); a live page 2-4 s.
# The robot shows from 600 ms on; with 300 Chromium waited for ever.
PAGE_TIME_BUDGET = 1000
# Wall-clock seconds one screenshot may take: a busy machine draws software WebGL slowly.
SCREENSHOT_TIMEOUT = 120.0
SCREENSHOT_TRIES = 3
# Share of pixels that differ (any channel by more than PIXEL_TOLERANCE of 255) for "the picture changed".
PIXEL_TOLERANCE = 12
CHANGED = 0.01
# What the browser needs on this machine: software WebGL, no network of its own.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--hide-scrollbars", "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]
# The screenshots' size; a page left open is drawn smaller: software WebGL at 60 frames a second costs a core.
SCREENSHOT_WINDOW = "960,720"
OPEN_PAGE_WINDOW = "480,360"


def _stop_group(process: subprocess.Popen) -> None:
    """The browser and every process it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


def screenshot(url: str, name: str) -> np.ndarray:
    """The page at `url` as headless Chromium draws it (software WebGL), an
    (h, w, 3) array; the PNG kept in ARTIFACTS/name.png. A try that gives no
    picture is made again on a fresh profile; the failure says what each try
    ended with."""
    from PIL import Image

    assert CHROMIUM, "chromium is not installed (apt-get install chromium)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    path.unlink(missing_ok=True)
    tries = []
    for _ in range(SCREENSHOT_TRIES):
        with tempfile.TemporaryDirectory() as profile:
            command = [CHROMIUM, *FLAGS, f"--window-size={SCREENSHOT_WINDOW}",
                       f"--virtual-time-budget={PAGE_TIME_BUDGET}", f"--user-data-dir={profile}",
                       f"--screenshot={path}", url]
            browser = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            try:
                output, _ = browser.communicate(timeout=SCREENSHOT_TIMEOUT)
                ending = f"exit code {browser.returncode}"
            except subprocess.TimeoutExpired:
                _stop_group(browser)
                output, _ = browser.communicate()
                ending = f"no picture within {SCREENSHOT_TIMEOUT:g} s"
            finally:
                _stop_group(browser)
        if path.is_file():
            return np.asarray(Image.open(path).convert("RGB")).astype(int)
        last_lines = output.decode(errors="replace").strip().splitlines()[-3:]
        tries.append(f"{ending}: {' | '.join(last_lines)}")
    raise AssertionError(f"headless Chromium gave no screenshot of {url} in {len(tries)} tries, each on a fresh "
                         "profile:\n" + "\n".join(tries))


def screenshot_until(url: str, name: str, shows, between=None, tries: int = SCREENSHOT_TRIES) -> np.ndarray:
    """screenshot(url, name), taken again (at most `tries` in all, between()
    before each new one) while shows(picture) is false: a fresh browser's
    first frame can come before the page has what it should show (its meshes
    loaded; on a busy machine, the view server's update). The last picture."""
    picture = screenshot(url, name)
    for _ in range(tries - 1):
        if shows(picture):
            break
        if between is not None:
            between()
        picture = screenshot(url, name)
    return picture


def screenshot_changed(url: str, name: str, reference: np.ndarray, between=None) -> np.ndarray:
    """screenshot_until more than CHANGED of its pixels differ from `reference`."""
    return screenshot_until(url, name, lambda picture: changed(reference, picture) > CHANGED, between)


@contextlib.contextmanager
def open_page(url: str):
    """Headless Chromium showing `url` (it draws, connects its websockets)
    until the block ends; then it and its children are stopped."""
    assert CHROMIUM, "chromium is not installed (apt-get install chromium)"
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen([CHROMIUM, *FLAGS, f"--window-size={OPEN_PAGE_WINDOW}", f"--user-data-dir={profile}",
                                    "--remote-debugging-port=0", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            yield browser
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(browser.pid, signal.SIGTERM)
            try:
                browser.wait(10)
            except subprocess.TimeoutExpired:
                pass
            _stop_group(browser)


def changed(a: np.ndarray, b: np.ndarray) -> float:
    """Share of pixels that differ between two screenshots."""
    return float(np.mean(np.any(np.abs(a - b) > PIXEL_TOLERANCE, axis=2)))
