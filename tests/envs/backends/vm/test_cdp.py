"""Chrome's DevTools protocol client against real Chromium (Debian's, headless, on loopback):
tabs, navigation with load events, evaluation, OSWorld's chrome_open_tabs / chrome_close_tabs;
and against a fake port that answers what an agent could put there."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_rl.envs.backends.vm.cdp import CDPError, Chrome, close_tabs, open_tabs, same_url
from cua_rl.testing.loopback import LoopbackServer
from cua_rl.testing.waiting import wait_for

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed "
                                    "(scripts/apt-deps.sh)")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Chrome, Path]]:
    """A headless Chromium with its debugging port on a free loopback port, and a folder of
    pages (alpha.html, beta.html)."""
    if CHROMIUM is None:
        pytest.skip("chromium not installed (scripts/apt-deps.sh)")
    root = tmp_path_factory.mktemp("chrome")
    pages = root / "pages"
    pages.mkdir()
    for name in ("alpha", "beta"):
        (pages / f"{name}.html").write_text(
            f"<!DOCTYPE html><html><head><title>{name.title()}</title></head>"
            f"<body><p id='x'>{name}</p></body></html>")
    profile = root / "profile"
    proc = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--no-first-run",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "about:blank"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        active = profile / "DevToolsActivePort"  # written once the port listens
        port = int(wait_for(lambda: active.is_file() and active.read_text().split("\n")[0],
                            60, "Chromium's DevToolsActivePort"))  # fmt: skip
        chrome = Chrome(lambda: socket.create_connection(("127.0.0.1", port), timeout=10),
                        timeout_s=20)  # fmt: skip
        yield chrome, pages
    finally:
        proc.kill()
        proc.wait()


@needs_chromium
def test_tabs_navigation_and_evaluation(chromium: tuple[Chrome, Path]) -> None:
    chrome, pages = chromium
    assert chrome.wait(30)["Browser"].startswith(("Chrome/", "HeadlessChrome/"))
    tab = chrome.new_tab()
    assert tab["id"] in {t["id"] for t in chrome.tabs()}
    assert chrome.navigate(tab["id"], (pages / "alpha.html").as_uri(), timeout_s=20)
    assert chrome.evaluate(tab["id"], "document.getElementById('x').textContent") == "alpha"
    assert chrome.evaluate(tab["id"], "Promise.resolve([1, {'a': 2}])") == [1, {"a": 2}]
    with pytest.raises(CDPError, match="evaluating in tab .* failed"):
        chrome.evaluate(tab["id"], "no_such_name.x")
    listed = {t["id"]: t for t in chrome.tabs()}[tab["id"]]
    assert (listed["title"], listed["url"]) == ("Alpha", (pages / "alpha.html").as_uri())
    chrome.close_tab(tab["id"])
    wait_for(lambda: tab["id"] not in {t["id"] for t in chrome.tabs()}, 10, "the tab closed")


@needs_chromium
def test_osworld_open_and_close_tabs(chromium: tuple[Chrome, Path]) -> None:
    chrome, pages = chromium
    alpha, beta = ((pages / f"{n}.html").as_uri() for n in ("alpha", "beta"))
    before = chrome.tabs()
    assert open_tabs(chrome, [alpha, beta], load_s=20) == []
    after = chrome.tabs()
    # the tab Chrome had open is closed after the first new one, as OSWorld does
    assert sorted(t["url"] for t in after) == sorted(
        [alpha, beta] + [t["url"] for t in before[:-1]])
    assert sorted(t["title"] for t in after if t["url"] in (alpha, beta)) == ["Alpha", "Beta"]
    assert close_tabs(chrome, [alpha.upper().replace("FILE://", "file://"), "file:///none"]) == 0
    assert close_tabs(chrome, [alpha + "#top"]) == 0  # a fragment is part of the name
    assert close_tabs(chrome, [alpha]) == 1
    assert [t["url"] for t in chrome.tabs() if t["url"] in (alpha, beta)] == [beta]
    assert chrome.active_tab() is not None


@pytest.mark.parametrize(("a", "b", "same"), [
    ("https://www.Example.com/", "https://example.com", True),
    ("example.com/a", "http://example.com/a", False),  # no scheme: host becomes the path
    ("HTTP://example.com/a?q=1", "http://example.com/a?q=1", True),
    ("https://example.com/a", "https://example.com/a/", False),
    ("https://example.com/a?q=1", "https://example.com/a?q=2", False),
])
def test_urls_are_compared_as_osworld_does(a: str, b: str, same: bool) -> None:
    assert same_url(a, b) is same


@given(st.text(max_size=40))
def test_a_url_is_the_same_as_itself(url: str) -> None:
    assert same_url(url, url)


class FakePort:
    """A port that answers every HTTP request with ``answer`` (what an agent could run on
    9222 instead of Chrome)."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.server = LoopbackServer(self._answer)
        self.port = self.server.port

    def _answer(self, conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(self.answer)

    def chrome(self) -> Chrome:
        return Chrome(lambda: socket.create_connection(("127.0.0.1", self.port)), timeout_s=5,
                      max_bytes=1000)


def http_answer(body: bytes, status: str = "200 OK") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize(("body", "call", "match"), [
    (b"<html>not json", "version", "is not JSON"),
    (b"[1, 2]", "version", "is not an object"),
    (json.dumps({"a": 1}).encode(), "tabs", "is not a list"),
    (json.dumps([{"type": "page", "id": 5, "url": "x", "title": "t"}]).encode(), "tabs",
     "without id/url/title"),
    (b"x" * 5000, "tabs", "over 1000 bytes"),
])
def test_answers_of_the_wrong_shape_are_errors(body: bytes, call: str, match: str) -> None:
    fake = FakePort(http_answer(body))
    try:
        with pytest.raises(CDPError, match=match):
            getattr(fake.chrome(), call)()
    finally:
        fake.server.close()


def test_a_port_that_does_not_answer_is_waited_for_then_named() -> None:
    fake = FakePort(b"")
    fake.server.close()  # nothing listens there now
    with pytest.raises(CDPError, match=r"did not answer within 0\.3 s: .*cannot be reached"):
        fake.chrome().wait(0.3)
    status = FakePort(http_answer(b"no", "500 Internal Server Error"))
    try:
        with pytest.raises(CDPError, match="answered GET /json/version with 500"):
            status.chrome().version()
    finally:
        status.server.close()
