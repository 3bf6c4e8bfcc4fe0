"""Cheap change detectors for signal-driven observation: no model call, run after every action.

Signal-driven observation (SDO) re-reads the screen only when something happened. This module
says *whether* something happened, from what a backend returns anyway (screenshot, window title,
URL, accessibility text) and the action's outcome:

* ``screen_change``: the frame differs outside the masked (volatile) rectangles. Both frames are
  turned into a :class:`FrameSketch` (grey, box-filtered to ``work_width`` columns, masks blacked
  out, 64-bit DCT perceptual hash); a pixel counts as changed when its grey level moves by more
  than ``pixel_delta``; the change is the set of ``tile`` x ``tile`` work tiles holding a changed
  pixel, grouped into 4-connected regions with screen-coordinate boxes.
* ``title_change`` / ``url_change``: the focused window's title / the page URL changed (the URL
  compared without its ``#fragment``; a title that only gains or loses an unsaved-changes marker,
  ``*notes.txt`` or ``notes.txt \u25cf``, is not a change: typing is not news).
* ``new_elements``: the accessibility tree holds interactive elements (role + name, multiset;
  bounds and values ignored, so a moved window or a typed character is not "new") that the
  previous tree did not. Only where the backend gives a tree.
* ``action_failure``: the backend raised :class:`~cua_rl.errors.ActionError` (the message is the
  detail).
* ``exogenous_change``: the screen changed although the agent did not act (``Wait``, or
  :meth:`SignalDetector.idle`), or a changed region lies wholly outside where the action could
  act (:func:`action_reach`: the window under a pointer action, or the focused window for keys,
  grown by ``reach_margin`` pixels; plus the shell chrome such as a taskbar, and the window that
  holds the focus after the action, since a dialog the action opened takes the focus and an
  exogenous popup or toast does not). Where the backend gives a tree, a top-level window that
  appeared without taking the focus, or vanished although the action was neither on it nor a
  key press while it had the focus, is exogenous too (a toast inside the focused window's
  area).

One more kind, ``target_covered``, is raised on request by
:meth:`~cua_rl.observation.sdo.SignalDrivenObservation.check` before a blind action: the window
under the action's point is not the one the policy last saw.

Which kinds *trigger* a fresh observation is :attr:`SignalConfig.triggers`; by default every
kind but ``screen_change`` (almost every action changes the screen where it acted, and the agent
already expects that). The clock and other cosmetic churn are silenced by ``masks`` (screen
rectangles) and by ignoring element values.

Cost, measured on SimDesk 1280 x 720 frames with 2 cores shared by several jobs (load 6.7; 200
calls): one :meth:`SignalDetector.after_action` takes about 10 ms, nearly all of it the sketch
(Pillow box ``reduce``, then grey; 16 ms for a 1920 x 1080 frame); the pixel comparison, the
a11y diff and the reach are well under 1 ms. ``benchmarks/sdo.py`` reports the median of its
run in ``benchmarks/results/sdo.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.actions import Action
    from cua_rl.core import Observation

__all__ = [
    "DEFAULT_TRIGGERS",
    "INTERACTIVE_ROLES",
    "SIGNAL_KINDS",
    "FrameSketch",
    "Rect",
    "ScreenDelta",
    "Signal",
    "SignalConfig",
    "SignalDetector",
    "SignalKind",
    "action_reach",
    "interactive_elements",
    "screen_delta",
    "sketch",
]

Rect = tuple[int, int, int, int]
"""(x, y, width, height) in screen pixels."""

SignalKind = Literal[
    "screen_change", "title_change", "url_change", "new_elements", "action_failure",
    "exogenous_change",
]
SIGNAL_KINDS: tuple[str, ...] = (
    "screen_change", "title_change", "url_change", "new_elements", "action_failure",
    "exogenous_change",
)
#: Kinds that ask for a fresh observation by default (all but ``screen_change``).
DEFAULT_TRIGGERS: tuple[str, ...] = SIGNAL_KINDS[1:]

#: Roles that count as interactive elements (SimDesk's and AT-SPI's names, lower case).
INTERACTIVE_ROLES: frozenset[str] = frozenset({
    "button", "push button", "toggle button", "check box", "checkbox", "radio button", "switch",
    "text", "textfield", "entry", "password text", "textarea", "combo box", "dropdown",
    "list", "listview", "list item", "menu", "menu item", "menubar", "menu bar", "link", "tab",
    "page tab", "slider", "spin button", "icon", "dialog", "alert", "window", "frame",
    "progressbar", "progress bar", "option",
})

# `  role "name" value="..." [states] @(x,y,w,h)` (SimDesk) or `role "name"` (other backends).
_LINE = re.compile(r'^(\s*)([^"]+?)\s+"((?:[^"\\]|\\.)*)"(.*)$')
_BOUNDS = re.compile(r"@\((-?\d+),(-?\d+),(\d+),(\d+)\)\s*$")
_STATES = re.compile(r"\[([^\]]*)\]\s*(?:@\(|$)")


@dataclass(frozen=True)
class Signal:
    """One detected event.

    Attributes:
        kind: What happened (one of :data:`SIGNAL_KINDS`).
        detail: A short human-readable account (the new title, the new elements, the error).
        bbox: Where on screen, for pixel signals; None otherwise.
    """

    kind: str
    detail: str = ""
    bbox: Rect | None = None


@dataclass(frozen=True)
class SignalConfig:
    """How the detectors decide.

    Attributes:
        work_width: Columns of the grey sketch a frame is reduced to (box filter, never
            upscaled).
        pixel_delta: A sketch pixel is changed when its grey level moves by more than this.
        tile: Side of a work tile, in sketch pixels; changed regions are unions of tiles.
        min_changed_pixels: Changed sketch pixels below which the screen counts as unchanged.
        masks: Screen rectangles (x, y, w, h) ignored by the pixel detectors (clock, caret).
        reach_margin: Pixels added around the action's window when deciding whether a change
            lies outside the action's reach.
        triggers: Signal kinds that ask for a fresh observation.
    """

    work_width: int = 320
    pixel_delta: int = 12
    tile: int = 8
    min_changed_pixels: int = 3
    masks: tuple[Rect, ...] = ()
    reach_margin: int = 16
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS

    def __post_init__(self) -> None:
        for name, low in (("work_width", 16), ("pixel_delta", 0), ("tile", 1),
                          ("min_changed_pixels", 1), ("reach_margin", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"SignalConfig.{name} must be an int >= {low}, got {value!r}")
        masks = tuple(tuple(m) for m in self.masks)
        for m in masks:
            if len(m) != 4 or not all(isinstance(v, int) for v in m) or m[2] < 0 or m[3] < 0:
                raise ConfigError(
                    f"SignalConfig.masks entries must be (x, y, w, h) ints with w, h >= 0, "
                    f"got {m!r}"
                )
        object.__setattr__(self, "masks", masks)
        triggers = tuple(self.triggers)
        unknown = sorted(set(triggers) - set(SIGNAL_KINDS))
        if unknown:
            raise ConfigError(
                f"SignalConfig.triggers has unknown kind(s) {unknown}; "
                f"allowed: {list(SIGNAL_KINDS)}"
            )
        object.__setattr__(self, "triggers", triggers)


# -- pixels ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FrameSketch:
    """A frame reduced for cheap comparison.

    Attributes:
        gray: The masked grey sketch (uint8, ``work_width`` columns or fewer).
        phash: 64-bit DCT perceptual hash of the sketch.
        scale: Screen pixels per sketch pixel (>= 1).
        size: (width, height) of the original screen.
    """

    gray: np.ndarray
    phash: int
    scale: float
    size: tuple[int, int]


def _phash(gray: np.ndarray) -> int:
    """64-bit perceptual hash: sign of the 8x8 low DCT terms of a 32x32 box-filtered copy."""
    h, w = gray.shape
    ys = (np.arange(33) * h) // 32
    xs = (np.arange(33) * w) // 32
    csum = np.pad(gray.astype(np.float64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    total = csum[np.ix_(ys[1:], xs[1:])] - csum[np.ix_(ys[:-1], xs[1:])]
    total = total - csum[np.ix_(ys[1:], xs[:-1])] + csum[np.ix_(ys[:-1], xs[:-1])]
    area = np.outer(np.maximum(ys[1:] - ys[:-1], 1), np.maximum(xs[1:] - xs[:-1], 1))
    small = total / area
    n = np.arange(32)
    basis = np.cos(np.pi * (2 * n[None, :] + 1) * n[:8, None] / 64)  # 8 x 32
    low = basis @ small @ basis.T
    bits = (low > np.median(low)).ravel()
    return int(sum(1 << i for i, b in enumerate(bits) if b))


def sketch(screenshot: np.ndarray, config: SignalConfig) -> FrameSketch:
    """Reduce an H x W x 3 uint8 screenshot to a masked grey sketch and its hash.

    Example:
        >>> frame = np.zeros((40, 64, 3), np.uint8)
        >>> s = sketch(frame, SignalConfig(work_width=32))
        >>> s.gray.shape, s.scale
        ((20, 32), 2.0)
    """
    from PIL import Image

    h, w = screenshot.shape[:2]
    f = max(1, -(-w // config.work_width))
    pil = Image.fromarray(screenshot)
    out = np.array((pil.reduce(f) if f > 1 else pil).convert("L"))  # box filter, then grey
    for x, y, mw, mh in config.masks:  # every sketch pixel the mask touches
        out[max(0, y // f):max(0, -(-(y + mh) // f)), max(0, x // f):max(0, -(-(x + mw) // f))] = 0
    return FrameSketch(out, _phash(out), float(f), (w, h))


@dataclass(frozen=True)
class ScreenDelta:
    """How two sketches differ.

    Attributes:
        changed_pixels: Sketch pixels whose grey level moved by more than ``pixel_delta``.
        changed_fraction: ``changed_pixels`` over all sketch pixels.
        phash_distance: Hamming distance of the two perceptual hashes (0-64).
        regions: Screen boxes of the 4-connected groups of changed tiles, largest first.
    """

    changed_pixels: int
    changed_fraction: float
    phash_distance: int
    regions: tuple[Rect, ...] = field(default_factory=tuple)

    @property
    def bbox(self) -> Rect | None:
        """The box around every changed region (None when nothing changed)."""
        if not self.regions:
            return None
        x0 = min(r[0] for r in self.regions)
        y0 = min(r[1] for r in self.regions)
        x1 = max(r[0] + r[2] for r in self.regions)
        y1 = max(r[1] + r[3] for r in self.regions)
        return (x0, y0, x1 - x0, y1 - y0)


def screen_delta(a: FrameSketch, b: FrameSketch, config: SignalConfig) -> ScreenDelta:
    """Compare two sketches of the same screen size.

    Raises:
        ValueError: If the sketches come from screens of different sizes.
    """
    if a.gray.shape != b.gray.shape:
        raise ValueError(f"sketches differ in size: {a.size} vs {b.size}")
    changed = np.abs(a.gray.astype(np.int16) - b.gray.astype(np.int16)) > config.pixel_delta
    n = int(changed.sum())
    dist = bin(a.phash ^ b.phash).count("1")
    if n < config.min_changed_pixels:
        return ScreenDelta(n, n / changed.size, dist, ())
    t = config.tile
    hh, ww = -(-changed.shape[0] // t), -(-changed.shape[1] // t)
    padded = np.zeros((hh * t, ww * t), bool)
    padded[: changed.shape[0], : changed.shape[1]] = changed
    tiles = padded.reshape(hh, t, ww, t).any(axis=(1, 3))
    from scipy import ndimage

    labels, count = ndimage.label(tiles)
    boxes = []
    s = a.scale * t
    for sl in ndimage.find_objects(labels)[:count]:
        ys, xs = sl
        box = (int(xs.start * s), int(ys.start * s),
               int((xs.stop - xs.start) * s), int((ys.stop - ys.start) * s))
        boxes.append(box)
    boxes.sort(key=lambda r: -r[2] * r[3])
    return ScreenDelta(n, n / changed.size, dist, tuple(boxes))


# -- accessibility ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    depth: int
    role: str
    name: str
    states: tuple[str, ...]
    bounds: Rect | None


def _parse(a11y: str) -> list[_Node]:
    nodes = []
    for line in a11y.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        indent, role, name, rest = m.groups()
        b = _BOUNDS.search(rest)
        bounds = tuple(int(v) for v in b.groups()) if b else None
        st = _STATES.search(rest)
        states = tuple(s.strip() for s in st.group(1).split(",")) if st else ()
        role = role.strip().lower().replace("-", " ").replace("_", " ")  # AT-SPI: push-button
        nodes.append(_Node(len(indent) // 2, role, name, states, bounds))  # type: ignore[arg-type]
    return nodes


#: Top-level roles whose place and content also identify them: a toast that expires while
#: another one appears, or a popup closed and re-opened in one step, is a new element.
_POPUP_ROLES = frozenset({"dialog", "alert"})


def interactive_elements(a11y: str | None) -> Counter[str]:
    """The multiset of interactive elements of an accessibility text, as ``role "name"``.

    Bounds, values, states and unsaved-changes markers in names are left out, so moving a
    window, typing a character or focusing a field changes nothing here; opening a dialog or a
    popup adds its elements. A top-level dialog or alert also counts once with its position and
    its content's names, so a toast replaced by another one in a single step is new.

    Example:
        >>> text = 'window "Editor" @(0,0,10,10)\\n  button "Save" @(1,1,2,2)\\n  label "x"'
        >>> sorted(interactive_elements(text).elements())
        ['button "Save"', 'window "Editor"']
    """
    if not a11y:
        return Counter()
    nodes = _parse(a11y)
    out: Counter[str] = Counter(f'{n.role} "{_norm_title(n.name)}"' for n in nodes
                                if n.role in INTERACTIVE_ROLES)
    if nodes:
        top = min(n.depth for n in nodes) + 1
        for i, n in enumerate(nodes):
            if n.depth != top or n.role not in _POPUP_ROLES:
                continue
            inner = []
            for m in nodes[i + 1:]:
                if m.depth <= top:
                    break
                inner.append(m.name)
            where = "" if n.bounds is None else f" @({n.bounds[0]},{n.bounds[1]})"
            out[f'{n.role} "{n.name}"{where}: {" | ".join(inner[:12])}'] += 1
    return out


def _windows(a11y: str | None) -> list[_Node]:
    """Top-level window-like nodes with bounds, in paint order (last = on top)."""
    if not a11y:
        return []
    nodes = _parse(a11y)
    if not nodes:
        return []
    top = min(n.depth for n in nodes) + 1
    return [n for n in nodes if n.depth == top and n.bounds is not None
            and n.role in ("window", "dialog", "alert", "frame")]


def _grow(r: Rect, m: int) -> Rect:
    return (r[0] - m, r[1] - m, r[2] + 2 * m, r[3] + 2 * m)


def _inside(r: Rect, x: int, y: int) -> bool:
    return r[0] <= x < r[0] + r[2] and r[1] <= y < r[1] + r[3]


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def action_reach(
    action: Action, a11y: str | None, screen: tuple[int, int], pointer: tuple[int, int] | None,
    margin: int = 16,
) -> tuple[Rect, ...] | None:
    """Where ``action`` could change the screen, judged from the tree *before* it.

    A pointer action reaches the topmost window under its point(s) (the whole screen when no
    window is under it: the desktop, a taskbar) plus a ``margin`` square around each point;
    a key or text action reaches the focused window; ``Wait``, ``Done``, ``Fail`` reach nothing
    (an empty tuple). None means "anywhere" (no tree to judge from).

    Args:
        action: The typed action.
        a11y: The accessibility text observed before the action (None: unknown).
        screen: (width, height) of the screen.
        pointer: The last known pointer position (for a ``Click`` without coordinates).
        margin: Pixels added around each reached window and point.
    """
    from cua_rl.actions import Done, Drag, Fail, Hotkey, KeyDown, KeyUp, Type, Wait

    if isinstance(action, (Wait, Done, Fail)):
        return ()
    if a11y is None:
        return None
    wins = _windows(a11y)
    points: list[tuple[int, int]] = []
    if isinstance(action, Drag):
        points = [(action.x0, action.y0), (action.x1, action.y1)]
    elif isinstance(action, (Type, Hotkey, KeyDown, KeyUp)):
        focused = [w for w in wins if "focused" in w.states or "active" in w.states]
        if not focused:
            return None
        return tuple(_grow(w.bounds, margin) for w in focused[-1:])  # type: ignore[arg-type]
    else:
        x, y = getattr(action, "x", None), getattr(action, "y", None)
        if x is None or y is None:
            if pointer is None:
                return None
            x, y = pointer
        points = [(int(x), int(y))]
    out: list[Rect] = []
    for x, y in points:
        under = [w for w in wins if _inside(w.bounds, x, y)]  # type: ignore[arg-type]
        if not under:
            return None  # desktop or taskbar: anything may follow (a launch, a raise)
        out.append(_grow(under[-1].bounds, margin))  # type: ignore[arg-type]
        out.append((x - margin, y - margin, 2 * margin, 2 * margin))
    return tuple(out)


#: Top-level roles of shell chrome that mirror the windows (a taskbar button shows a title).
_CHROME_ROLES = frozenset({"taskbar", "panel", "status bar", "tool bar"})


def _owned_by_action(before: str | None, after: str | None, margin: int) -> tuple[Rect, ...]:
    """Screen parts an acting action may change besides its own window: the shell chrome (its
    taskbar button mirrors the window title) and the window focused *after* the action (a dialog
    the action opened takes the focus; an exogenous popup or toast does not)."""
    out: list[Rect] = []
    for text in (before, after):
        nodes = _parse(text) if text else []
        if nodes:
            top = min(n.depth for n in nodes) + 1
            out += [_grow(n.bounds, margin) for n in nodes if n.depth == top
                    and n.bounds is not None and n.role in _CHROME_ROLES]
    out += [_grow(w.bounds, margin) for w in _windows(after)  # type: ignore[arg-type]
            if "focused" in w.states or "active" in w.states]
    return tuple(out)


_MARKER = re.compile(r"^[*\u25cf\u2022]\s*|\s*[*\u25cf\u2022]$")


def _window_news(
    action: Action, before: str | None, after: str | None, pointer: tuple[int, int] | None
) -> tuple[str, Rect | None] | None:
    """A top-level window the action cannot explain, from the trees around it: one that appeared
    without taking the focus (a toast, a popup), or one that vanished although the action was
    neither a pointer action on it nor a key action while it had the focus (a toast expiring)."""
    if not before or not after:
        return None

    def key(n: _Node) -> str:
        return f'{n.role} "{n.name}" {n.bounds}'

    old = {key(w): w for w in _windows(before)}
    new = {key(w): w for w in _windows(after)}
    focus = {"focused", "active"}
    for k, w in new.items():
        if k not in old and not focus & set(w.states):
            return f'{w.role} "{w.name}" appeared without focus', w.bounds
    x, y = getattr(action, "x", None), getattr(action, "y", None)
    if (x is None or y is None) and pointer is not None and not hasattr(action, "keys") \
            and not hasattr(action, "text"):
        x, y = pointer
    for k, w in old.items():
        if k in new or w.bounds is None:
            continue
        if x is not None and y is not None and _inside(w.bounds, int(x), int(y)):
            continue  # the click or drag was on it
        if (x is None or y is None) and focus & set(w.states):
            continue  # a key action in it (Escape, Alt+F4)
        return f'{w.role} "{w.name}" closed without the agent', w.bounds
    return None


def _norm_title(title: str | None) -> str | None:
    """A title without an unsaved-changes marker (``*notes.txt``, ``notes.txt \u25cf``)."""
    return None if not title else _MARKER.sub("", title)


def _strip_fragment(url: str | None) -> str | None:
    return None if url is None else url.split("#", 1)[0]


# -- the detector ----------------------------------------------------------------------------


class SignalDetector:
    """Runs every detector after each action against the previous observation.

    Args:
        config: Thresholds, masks and triggers.

    Example:
        >>> det = SignalDetector()
        >>> from cua_rl.core import Observation
        >>> blank = Observation(np.zeros((40, 64, 3), np.uint8), a11y='window "A" @(0,0,64,40)')
        >>> det.reset(blank)
        >>> det.after_action(None, blank)
        ()
    """

    def __init__(self, config: SignalConfig | None = None) -> None:
        self.config = config or SignalConfig()
        self._obs: Observation | None = None
        self._sketch: FrameSketch | None = None
        self._elements: Counter[str] = Counter()
        self.pointer: tuple[int, int] | None = None
        self.last_delta: ScreenDelta | None = None

    def reset(self, observation: Observation) -> None:
        """Take ``observation`` as the reference (the first one of an episode)."""
        self._obs = observation
        self._sketch = sketch(observation.screenshot, self.config)
        self._elements = interactive_elements(observation.a11y)
        self.last_delta = None

    def triggered(self, signals: tuple[Signal, ...]) -> tuple[Signal, ...]:
        """The signals among ``signals`` whose kind is a trigger."""
        return tuple(s for s in signals if s.kind in self.config.triggers)

    def idle(self, observation: Observation) -> tuple[Signal, ...]:
        """Signals of a look without acting: any change is exogenous."""
        from cua_rl.actions import Wait

        return self.after_action(Wait(0.0), observation)

    def after_action(
        self, action: Action | None, observation: Observation, error: str | None = None
    ) -> tuple[Signal, ...]:
        """Every signal between the previous observation and ``observation``.

        Args:
            action: The action just performed (None: unknown, e.g. an unparsable text).
            observation: The observation after it.
            error: The :class:`~cua_rl.errors.ActionError` message if the action failed.

        Raises:
            RuntimeError: If :meth:`reset` was never called.
        """
        if self._obs is None or self._sketch is None:
            raise RuntimeError("SignalDetector.after_action before reset(observation)")
        prev, cfg = self._obs, self.config
        out: list[Signal] = []
        if error is not None:
            out.append(Signal("action_failure", error))
        new_sketch = sketch(observation.screenshot, cfg)
        delta = screen_delta(self._sketch, new_sketch, cfg)
        self.last_delta = delta
        if delta.regions:
            out.append(Signal(
                "screen_change",
                f"{delta.changed_fraction:.2%} changed, phash distance {delta.phash_distance}",
                delta.bbox,
            ))
            reach = None
            if action is not None:
                reach = action_reach(action, prev.a11y, observation.size, self.pointer,
                                     cfg.reach_margin)
            if reach:
                reach = reach + _owned_by_action(prev.a11y, observation.a11y, cfg.reach_margin)
            exo: tuple[str, Rect | None] | None = None
            if reach is not None:
                outside = [r for r in delta.regions if not any(_overlap(r, q) for q in reach)]
                if outside:
                    why = "the agent did not act" if not reach else "outside the action's reach"
                    exo = (f"{len(outside)} region(s), {why}", outside[0])
            if exo is None and reach and action is not None:
                exo = _window_news(action, prev.a11y, observation.a11y, self.pointer)
            if exo is not None:
                out.append(Signal("exogenous_change", exo[0], exo[1]))
        if _norm_title(observation.title) != _norm_title(prev.title):
            out.append(Signal("title_change", f"{prev.title!r} -> {observation.title!r}"))
        if _strip_fragment(observation.url) != _strip_fragment(prev.url):
            out.append(Signal("url_change", f"{prev.url!r} -> {observation.url!r}"))
        elements = interactive_elements(observation.a11y)
        added = elements - self._elements
        if added:
            names = sorted(added.elements())
            shown = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5
                                            else "")
            out.append(Signal("new_elements", shown))
        x, y = getattr(action, "x", None), getattr(action, "y", None)
        if x is not None and y is not None:
            self.pointer = (int(x), int(y))
        self._obs, self._sketch, self._elements = observation, new_sketch, elements
        return tuple(out)
