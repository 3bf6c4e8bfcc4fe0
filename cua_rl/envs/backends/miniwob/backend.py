"""The ``miniwob`` backend: MiniWoB++ web tasks in a real headless Chromium.

Each env owns one Chromium, driven through Selenium and Debian's ``chromedriver``. We drive
Selenium ourselves instead of the ``miniwob`` package's gymnasium env (``SeleniumInstance``):
its ``create_driver`` takes no Chromium flags (we need the resolver rules below), waits with
implicit waits and threads, and maps its own action space; we only use its task pages (loaded
over ``file://``) and their ``core`` JavaScript API (``core.startEpisodeReal``,
``core.getUtterance``, ``core.getDOMInfo``, ``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``),
as ``miniwob.selenium_instance`` does.

Tasks are ``miniwob/<task-name>/<seed>`` (:mod:`cua_rl.envs.backends.miniwob.tasks`). ``reset``
loads the task page (only when it changes), seeds the page's generator and starts the episode; the
page's utterance becomes the episode's instruction and its field values (MiniWoB++'s ``fields``: the
word to type, the button to click) the task's vocabulary (:attr:`MiniWoBBackend.instruction`,
:attr:`MiniWoBBackend.vocabulary`, read by CUAEnv after reset). The page itself ends an
episode (success, failure, or MiniWoB++'s own time limit, 10 s from the start unless
``episode_time_s`` changes it): :attr:`task_done` turns true and CUAEnv ends the episode at that
step.

Observation: ``screenshot`` the task area (160 x 210 CSS pixels) at ``scale`` screenshot pixels
per CSS pixel (Chromium's ``--force-device-scale-factor``), so ``screen_size`` is
``(160 * scale, 210 * scale)``; ``title`` the task name; ``url`` the page URL; ``a11y`` the DOM
as text (grammar: :mod:`cua_rl.envs.backends.miniwob.dom`).

Ground truth: MiniWoB++'s *raw* reward ``r`` in [-1, 1] (``WOB_RAW_REWARD_GLOBAL``; 1 =
success) as ``(r + 1) / 2``, once the page says the episode is done; 0.0 while it is not (the task
was not completed). The raw reward is used, not the time-discounted ``env_reward``: a score must
not depend on how fast this machine (or a policy server) is.

Actions (coordinates in screenshot pixels, divided by ``scale`` for the page): ``Click`` (any
button, 1-3 clicks), ``Move``, ``Drag``, ``MouseDown``/``MouseUp`` (at the pointer),
``Scroll`` (50 CSS pixels per wheel click, pyautogui's sign: positive = up), ``Type``
(key events to the focused element), ``Hotkey``/``KeyDown``/``KeyUp`` (pyautogui key names
mapped to WebDriver keys; :data:`WEBDRIVER_KEYS`), ``Wait`` (sleeps, at most ``max_wait_s``). A
coordinate outside the screen or a key with no WebDriver equivalent is an ``ActionError``.

Faults: every WebDriver call has a deadline (``call_timeout_s``, the HTTP timeout of Selenium's
connection to chromedriver): a page stuck in JavaScript makes the call raise ``BackendError``
naming the deadline. A browser that died (killed, crashed) makes the call raise ``BackendError``.
Either way the browser is ended (chromedriver and every process under it) and the next
``reset`` starts a fresh one.

Network: Chromium runs headless with ``--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE
localhost`` (every host name but localhost fails without a DNS query) and with its background
traffic off (:data:`CHROMIUM_FLAGS`); the binaries come from ``MINIWOB_CHROME_BINARY`` /
``MINIWOB_CHROMEDRIVER`` or, when unset, Debian's ``chromium`` / ``chromedriver`` on PATH (both
set, so Selenium Manager never looks for a driver online).

``env.backend_kwargs``: ``scale`` (int >= 1, default 1), ``call_timeout_s`` (default 10),
``start_timeout_s`` (default 30), ``episode_time_s`` (MiniWoB++'s episode time limit; default
None = the task's own), ``max_wait_s`` (default 5), ``data_mode`` (``train`` or ``test``, the
page's generation mode; default ``train``). ``env.screen`` must equal the screen size.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import time
from typing import Any

import numpy as np

from cua_rl._reaper import process_tree, watch_tree
from cua_rl.actions import (
    Action,
    Click,
    Drag,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    Type,
    Wait,
)
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.base import BaseBackend
from cua_rl.envs.backends.miniwob.dom import dom_text
from cua_rl.envs.backends.miniwob.tasks import miniwob_html_dir, miniwob_task_names
from cua_rl.errors import (
    ActionError,
    BackendError,
    ConfigError,
    DependencyNotInstalled,
    TaskSpecError,
)

__all__ = [
    "CHROMIUM_FLAGS",
    "TASK_SIZE",
    "WEBDRIVER_KEYS",
    "MiniWoBBackend",
    "browser_pids",
    "chromium_paths",
]

logger = logging.getLogger(__name__)

#: (width, height) of a MiniWoB++ task area in CSS pixels (miniwob.constants TASK_WIDTH/HEIGHT).
TASK_SIZE = (160, 210)

#: Chromium's flags. Headless without a sandbox (we run as root in CI; miniwob adds the same);
#: no host name resolves but localhost (``--host-resolver-rules``: 0 DNS queries, tested); no
#: background traffic: component/field-trial updates, Safe Browsing, sync, metrics, domain
#: reliability, default-app installs (Chromium's switches, chrome/common/chrome_switches.cc
#: and components/*/switches).
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-client-side-phishing-detection",
    "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-pings",
    "--dns-prefetch-disable",
    "--window-size=400,600",
)

#: pyautogui key names -> WebDriver key code points (W3C WebDriver "Keyboard actions" table);
#: single printable characters are sent as themselves.
WEBDRIVER_KEYS: dict[str, str] = {
    "enter": "\ue007", "return": "\ue006", "\n": "\ue007", "\r": "\ue006",
    "tab": "\ue004", "\t": "\ue004", "backspace": "\ue003", "delete": "\ue017", "del": "\ue017",
    "esc": "\ue00c", "escape": "\ue00c", "space": " ", "insert": "\ue016",
    "up": "\ue013", "down": "\ue015", "left": "\ue012", "right": "\ue014",
    "home": "\ue011", "end": "\ue010", "pageup": "\ue00e", "pgup": "\ue00e",
    "pagedown": "\ue00f", "pgdn": "\ue00f", "clear": "\ue005", "help": "\ue002",
    "pause": "\ue00b",
    "shift": "\ue008", "shiftleft": "\ue008", "shiftright": "\ue050",
    "ctrl": "\ue009", "ctrlleft": "\ue009", "ctrlright": "\ue051",
    "alt": "\ue00a", "altleft": "\ue00a", "altright": "\ue052",
    "option": "\ue00a", "optionleft": "\ue00a", "optionright": "\ue052",
    "win": "\ue03d", "winleft": "\ue03d", "winright": "\ue053", "command": "\ue03d",
    **{f"f{i}": chr(0xE031 + i - 1) for i in range(1, 13)},
    **{f"num{i}": chr(0xE01A + i) for i in range(10)},
    "multiply": "\ue024", "add": "\ue025", "separator": "\ue026", "subtract": "\ue027",
    "decimal": "\ue028", "divide": "\ue029",
}
_BUTTONS = {"left": 0, "middle": 1, "right": 2}
_WHEEL_PX = 50  # CSS pixels per wheel click (miniwob.constants.DEFAULT_SCROLL_AMOUNT)

_STATE_JS = ("return {done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, "
             "reason: String(WOB_REWARD_REASON)};")
_OBSERVE_JS = """
var q = document.getElementById('query'); var b = q ? q.getBoundingClientRect() : null;
return {utterance: core.getUtterance(), dom: core.getDOMInfo(), url: location.href,
        query: b ? {left: b.left, top: b.top, width: b.width, height: b.height}
                 : {left: 0, top: 0, width: 0, height: 0}};
"""


def chromium_paths() -> tuple[str, str]:
    """(chromium, chromedriver): ``MINIWOB_CHROME_BINARY`` / ``MINIWOB_CHROMEDRIVER`` when set,
    else ``chromium`` and ``chromedriver`` on PATH (Debian's packages).

    Raises:
        DependencyNotInstalled: Either binary is missing (Debian: ``apt-get install chromium
            chromium-driver``; ``make test`` installs them).
    """
    binary = os.environ.get("MINIWOB_CHROME_BINARY") or shutil.which("chromium")
    driver = os.environ.get("MINIWOB_CHROMEDRIVER") or shutil.which("chromedriver")
    for what, path in (("chromium", binary), ("chromedriver", driver)):
        if not path or not os.access(path, os.X_OK):
            raise DependencyNotInstalled(
                f"{what} (Debian package {'chromium' if what == 'chromium' else 'chromium-driver'}"
                f"; found {path!r})", "miniwob")
    assert binary is not None and driver is not None
    return binary, driver


browser_pids = process_tree
"""``root`` and every process under it (:func:`cua_rl._reaper.process_tree`)."""


class MiniWoBBackend(BaseBackend):
    """One headless Chromium showing MiniWoB++ tasks (module docstring: observations, actions,
    ground truth, faults).

    Args:
        scale: Screenshot pixels per CSS pixel (an integer >= 1).
        call_timeout_s: Deadline of every WebDriver call.
        start_timeout_s: Deadline of starting the browser and loading a task page.
        episode_time_s: MiniWoB++'s episode time limit; None keeps the task's own (10 s).
        max_wait_s: Longest sleep of a ``Wait`` action.
        data_mode: The pages' generation mode (``train`` or ``test``).

    Raises:
        ConfigError: A setting out of range.
        DependencyNotInstalled: selenium, miniwob, chromium or chromedriver is missing.
    """

    def __init__(
        self,
        *,
        scale: int = 1,
        call_timeout_s: float = 10.0,
        start_timeout_s: float = 30.0,
        episode_time_s: float | None = None,
        max_wait_s: float = 5.0,
        data_mode: str = "train",
    ) -> None:
        if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= 8:
            raise ConfigError(f"env.backend_kwargs.scale must be an integer in 1..8, got {scale!r}")
        for key, value in (("call_timeout_s", call_timeout_s),
                           ("start_timeout_s", start_timeout_s), ("max_wait_s", max_wait_s),
                           ("episode_time_s", 1.0 if episode_time_s is None else episode_time_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value > 0):
                raise ConfigError(f"env.backend_kwargs.{key} must be a number > 0, got {value!r}")
        if data_mode not in ("train", "test"):
            raise ConfigError(
                f"env.backend_kwargs.data_mode must be 'train' or 'test', got {data_mode!r}")
        try:
            import selenium  # noqa: F401
        except ImportError:
            raise DependencyNotInstalled("selenium", "miniwob") from None
        self.html_dir = miniwob_html_dir()
        self.chromium, self.chromedriver = chromium_paths()
        # both set, so the miniwob package's own envs in this process never start Selenium
        # Manager (which looks for a driver online) either
        os.environ.setdefault("MINIWOB_CHROME_BINARY", self.chromium)
        os.environ.setdefault("MINIWOB_CHROMEDRIVER", self.chromedriver)
        self.scale = scale
        self.call_timeout_s = float(call_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.episode_time_s = episode_time_s
        self.max_wait_s = float(max_wait_s)
        self.data_mode = data_mode
        #: The utterance of the episode started by the last reset (None before one).
        self.instruction: str | None = None
        #: The utterance's field values (words to type, targets) of the last reset: CUAEnv
        #: makes them the episode's ``Task.vocabulary`` (the compact policy's typing slots).
        self.vocabulary: tuple[str, ...] = ()
        #: Whether the page has ended the current episode (success, failure or time limit).
        self.task_done = False
        self.browser_starts = 0
        self._utterance = ""
        self._driver: Any = None
        self._watcher: Any = None
        self._page: str | None = None
        self._task: Task | None = None
        self._pointer = (0.0, 0.0)  # CSS pixels
        self._closed = False

    # -- DesktopBackend -------------------------------------------------------------------------

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the screenshots: the task area at ``scale``."""
        return TASK_SIZE[0] * self.scale, TASK_SIZE[1] * self.scale

    @property
    def browser_pid(self) -> int | None:
        """The pid of chromedriver (every Chromium process is under it); None when none runs."""
        service = getattr(self._driver, "service", None)
        process = getattr(service, "process", None)
        return None if process is None else int(process.pid)

    def reset(self, task: Task) -> Observation:
        """Start the task's episode: (re)start the browser if needed, load the page if it
        changed, seed it and start it."""
        if self._closed:
            raise BackendError("MiniWoBBackend.reset after close()")
        name, seed = self._task_of(task)
        if self._driver is None:
            self._start()
        url = (self.html_dir / f"{name}.html").as_uri()
        if self._page != url:
            self._call("load the task page", self._driver.get, url, timeout=self.start_timeout_s)
            self._page = url
        limit = "" if self.episode_time_s is None else (
            f"core.EPISODE_MAX_TIME = {int(self.episode_time_s * 1000)};")
        # the page is reseeded, not reloaded: blur the last episode's focus so that an
        # episode's first screen and DOM never depend on the one before
        self._script(
            "if (document.activeElement) { document.activeElement.blur(); }"
            f"core.endEpisode(0); Math.seedrandom({seed}); core.setDataMode('{self.data_mode}');"
            f"{limit} core.startEpisodeReal();", what="start the episode")
        deadline = time.monotonic() + self.start_timeout_s
        while not self._script("return WOB_TASK_READY;", what="wait for the task"):
            if time.monotonic() > deadline:
                raise self._lost(f"task page {name} not ready after {self.start_timeout_s:g} s")
            time.sleep(0.02)
        self._task, self.task_done, self._pointer = task, False, (0.0, 0.0)
        observation = self.observe()
        self.instruction = self._utterance
        self.vocabulary = self._fields(name)
        return observation

    def _fields(self, name: str) -> tuple[str, ...]:
        """The utterance's field values (MiniWoB++'s own: the page's ``fields`` or the package's
        per-task regular expression, ``miniwob.fields``), distinct, in order."""
        response = self._script("return core.getUtterance();", what="read the fields")
        if isinstance(response, dict):
            pairs = list((response.get("fields") or {}).items())
        else:
            from miniwob.fields import get_field_extractor

            try:
                pairs = list(get_field_extractor(name)(self._utterance))
            except (KeyError, ValueError):
                pairs = []
        return tuple(dict.fromkeys(str(v) for _, v in pairs if str(v).strip()))

    def step(self, action: Action) -> Observation:
        """Perform ``action`` on the page (module docstring) and observe."""
        if self._driver is None or self._task is None:
            raise BackendError("MiniWoBBackend.step before reset (or after the browser was lost)")
        self._act(action)
        self.task_done = bool(self._script("return WOB_DONE_GLOBAL;", what="read the state"))
        return self.observe()

    def observe(self) -> Observation:
        """Screenshot, DOM text, title and URL of the current page."""
        if self._driver is None or self._task is None:
            raise BackendError("MiniWoBBackend.observe before reset (or after the browser was "
                               "lost)")
        info = self._script(_OBSERVE_JS, what="read the DOM")
        png = self._call("take a screenshot", self._driver.get_screenshot_as_png)
        self._utterance = str(info["utterance"])
        a11y = dom_text(info["dom"], query=self._utterance, query_box=info["query"],
                        scale=self.scale)
        return Observation(screenshot=self._crop(png), a11y=a11y,
                           title=str(self._task.config["task"]), url=str(info["url"]))

    def ground_truth(self, task: Task) -> float | None:
        """``(r + 1) / 2`` of MiniWoB++'s raw reward once the page is done; 0.0 before."""
        if self._driver is None:
            raise BackendError("MiniWoBBackend.ground_truth with no browser (reset first)")
        state = self._script(_STATE_JS, what="read the reward")
        if not state["done"]:
            return 0.0
        return min(1.0, max(0.0, (float(state["raw"]) + 1.0) / 2.0))

    def close(self) -> None:
        """End the browser (idempotent)."""
        self._closed = True
        self._end_browser()

    # -- browser --------------------------------------------------------------------------------

    def _start(self) -> None:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--force-device-scale-factor={self.scale}")
        options.binary_location = self.chromium
        started = time.monotonic()
        try:
            driver = webdriver.Chrome(service=Service(executable_path=self.chromedriver),
                                      options=options)
        except WebDriverException as error:
            raise BackendError(f"Chromium did not start ({self.chromium}, "
                               f"{self.chromedriver}): {error.msg or error}") from None
        driver.command_executor.client_config.timeout = self.call_timeout_s
        self._driver, self._page = driver, None
        pid = self.browser_pid_of(driver)
        # killed without close() (SIGKILL, OOM, a Ray actor torn down): the watcher ends the
        # browser rather than leave it running for ever (cua_rl/_reaper.py)
        self._watcher = watch_tree(pid) if pid is not None else None
        self.browser_starts += 1
        logger.info("Chromium started in %.2f s (pid of chromedriver %s)",
                    time.monotonic() - started, self.browser_pid)

    def _end_browser(self, *, graceful: bool = True) -> None:
        """End the browser: ``quit()`` first when ``graceful`` (a lost browser is not asked: a
        hung one would not answer), then SIGKILL whatever is left under chromedriver."""
        driver, self._driver, self._page, self._task = self._driver, None, None, None
        if driver is None:
            return
        pid = self.browser_pid_of(driver)
        pids = browser_pids(pid) if pid is not None else []
        if graceful:
            driver.command_executor.client_config.timeout = 3.0
            with contextlib.suppress(Exception):
                driver.quit()
        for p in pids:  # whatever quit() left (a hung renderer, a dead driver's children)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
        process = getattr(getattr(driver, "service", None), "process", None)
        if process is not None:  # reap our own child (chromedriver) so it leaves no zombie
            with contextlib.suppress(Exception):
                process.wait(timeout=5)
        watcher, self._watcher = self._watcher, None
        if watcher is not None:  # it exits once chromedriver is gone
            with contextlib.suppress(Exception):
                watcher.wait(timeout=5)

    @staticmethod
    def browser_pid_of(driver: Any) -> int | None:
        process = getattr(getattr(driver, "service", None), "process", None)
        return None if process is None else int(process.pid)

    def _lost(self, why: str) -> BackendError:
        task = self._task.id if self._task is not None else "no task"
        self._end_browser(graceful=False)
        return BackendError(f"MiniWoB++ browser lost ({task}): {why}; the next reset starts a "
                            f"fresh browser")

    def _call(self, what: str, function: Any, *args: Any, timeout: float | None = None) -> Any:
        """Run one WebDriver call under the deadline; browser faults become BackendError."""
        from selenium.common.exceptions import WebDriverException
        from urllib3.exceptions import HTTPError, ReadTimeoutError

        config = self._driver.command_executor.client_config
        limit = self.call_timeout_s if timeout is None else timeout
        config.timeout = limit
        try:
            return function(*args)
        except (ReadTimeoutError, TimeoutError) as error:
            raise self._lost(f"{what} exceeded the {limit:g} s call deadline "
                             f"(call_timeout_s; the page is hung): {error}") from None
        except (WebDriverException, HTTPError, ConnectionError) as error:
            message = getattr(error, "msg", None) or str(error) or type(error).__name__
            raise self._lost(f"{what} failed: {message.splitlines()[0][:300]}") from None
        finally:
            if self._driver is not None:
                config.timeout = self.call_timeout_s

    def _script(self, script: str, *, what: str) -> Any:
        return self._call(what, self._driver.execute_script, script)

    def _crop(self, png: bytes) -> np.ndarray:
        import io

        from PIL import Image

        width, height = self.screen_size
        image = Image.open(io.BytesIO(png)).convert("RGB")
        if image.width < width or image.height < height:
            raise self._lost(f"the browser's screenshot is {image.width}x{image.height}, smaller "
                             f"than the task area {width}x{height}")
        return np.array(image.crop((0, 0, width, height)), dtype=np.uint8)

    @staticmethod
    def _task_of(task: Task) -> tuple[str, int]:
        name, seed = task.config.get("task"), task.config.get("seed")
        if name not in miniwob_task_names() or isinstance(seed, bool) or not isinstance(
                seed, int) or seed < 0:
            raise TaskSpecError(
                f"task {task.id!r} is not a MiniWoB++ task: its config needs 'task' (a name "
                f"miniwob_task_names() of cua_rl.envs.backends.miniwob.tasks lists) and 'seed' "
                f"(int >= 0), "
                f"got {dict(task.config)!r:.200}")
        return name, seed

    # -- actions --------------------------------------------------------------------------------

    def _point(self, x: int | None, y: int | None, what: str) -> tuple[float, float]:
        if x is None or y is None:
            return self._pointer
        width, height = self.screen_size
        if not (0 <= x < width and 0 <= y < height):
            raise ActionError(f"{what} at ({x}, {y}) is outside the screen {width}x{height}")
        return (x + 0.5) / self.scale, (y + 0.5) / self.scale

    @staticmethod
    def _key(name: str) -> str:
        if name in WEBDRIVER_KEYS:
            return WEBDRIVER_KEYS[name]
        if len(name) == 1 and name.isprintable():
            return name
        raise ActionError(f"key {name!r} has no WebDriver key; allowed: a printable character "
                          f"or one of {sorted(k for k in WEBDRIVER_KEYS if len(k) > 1)}")

    def _act(self, action: Action) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.actions.action_builder import ActionBuilder

        if isinstance(action, Wait):
            time.sleep(min(action.seconds, self.max_wait_s))
            return
        chain = ActionChains(self._driver, duration=0)
        pointer = chain.w3c_actions.pointer_action
        keys = chain.w3c_actions.key_action
        if isinstance(action, (Click, Move)):
            x, y = self._point(action.x, action.y, type(action).__name__)
            pointer.move_to_location(x, y)
            if isinstance(action, Click):
                for _ in range(action.clicks):
                    pointer.pointer_down(_BUTTONS[action.button])
                    pointer.pointer_up(_BUTTONS[action.button])
            self._pointer = (x, y)
        elif isinstance(action, Drag):
            x0, y0 = self._point(action.x0, action.y0, "Drag start")
            x1, y1 = self._point(action.x1, action.y1, "Drag end")
            pointer.move_to_location(x0, y0)
            pointer.pointer_down(_BUTTONS[action.button])
            pointer.move_to_location(x1, y1)
            pointer.pointer_up(_BUTTONS[action.button])
            self._pointer = (x1, y1)
        elif isinstance(action, (MouseDown, MouseUp)):
            pointer.move_to_location(*self._pointer)
            if isinstance(action, MouseDown):
                pointer.pointer_down(_BUTTONS[action.button])
            else:
                pointer.pointer_up(_BUTTONS[action.button])
        elif isinstance(action, Scroll):
            x, y = self._point(action.x, action.y, "Scroll")
            builder = ActionBuilder(self._driver, duration=0)
            builder.wheel_action.scroll(x=int(x), y=int(y), delta_x=action.dx * _WHEEL_PX,
                                        delta_y=-action.dy * _WHEEL_PX)
            self._call("scroll", builder.perform)
            self._pointer = (x, y)
            return
        elif isinstance(action, Type):
            for char in action.text:
                code = {"\n": WEBDRIVER_KEYS["enter"], "\t": WEBDRIVER_KEYS["tab"]}.get(char, char)
                keys.key_down(code).key_up(code)
        elif isinstance(action, Hotkey):
            codes = [self._key(k) for k in action.keys]
            for code in codes:
                keys.key_down(code)
            for code in reversed(codes):
                keys.key_up(code)
        elif isinstance(action, KeyDown):
            keys.key_down(self._key(action.key))
        elif isinstance(action, KeyUp):
            keys.key_up(self._key(action.key))
        else:
            raise ActionError(f"the miniwob backend cannot perform {type(action).__name__}")
        self._call(f"perform {type(action).__name__}", chain.perform)
