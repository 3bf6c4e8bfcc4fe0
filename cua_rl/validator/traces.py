"""Traces: the screenshots and actions of one episode, and their folders on disk.

A :class:`Trace` is ``frames[0] --actions[0]--> frames[1] --actions[1]--> ...``: ``n`` frames and
``n - 1`` actions. A frame is a screenshot with the optional accessibility text and window title
seen with it. Episode-level facts (task id, end reason, the agent's own claim of success, the
checker's ground truth, where the trace was read from) live in :attr:`Trace.meta`.

Folder formats read by :func:`read_trace`:

* **cua_rl episode folders**, as written by :class:`~cua_rl.envs.record.RecordTrajectory` and by
  :func:`write_trace`: ``steps.jsonl`` whose first line is the episode header (``"kind":
  "episode"``, ``"initial"``: the first PNG) and then one ``"kind": "step"`` line per action
  (``index``, ``action_text``, ``screenshot``, ``title``, ``a11y``); the format is documented in
  :mod:`cua_rl.episode_folder`. The last step line may have ``"screenshot": null`` (or no
  ``screenshot`` key) when its ``action_text`` is ``DONE`` or ``FAIL``.
* **OSWorld-style result folders**: ``traj.jsonl`` (one line per action: ``step_num``,
  ``action``, ``screenshot_file``, ``done``, ``info``) and ``step_<N>_<timestamp>.png``; an
  optional ``step_0*.png`` is the initial screen (the reference runner saves none, so the first
  frame is then the screen after the first action); ``result.txt`` becomes
  ``meta["ground_truth"]``. The last line may have ``"screenshot_file": null`` (or no such key)
  when it ends the episode (``"done": true``, or the action ``DONE`` / ``FAIL``, also as
  ``{"action_type": "DONE"}``), as runners do that stop without observing the screen after DONE.
* **Plain folders of PNGs** (no index file): the screens in the order of the first number in each
  file name (``000.png``, ``step_3.png``, ``frame-12.png``; a name without a number, or two
  files with one number, is an error); no actions, titles or accessibility text, and
  ``claimed_success`` unknown. Other files in the folder are not read.

**A final DONE/FAIL without a screenshot** is not a frame: no screen is invented. The trace
ends at the last observed screen, the action text goes to ``meta["final_action"]``,
``meta["claimed_success"]`` says whether it was DONE (unless the header says otherwise), and
``meta["final_unobserved"]`` is True. A line without a screenshot anywhere else, or one that is
not a DONE/FAIL, is a :class:`~cua_rl.errors.TraceFormatError` naming the file, line and key.

Anything malformed (no frames, a missing or unreadable PNG, a gap in the step numbers, a bad JSON
line) raises :class:`~cua_rl.errors.TraceFormatError` naming the file. Folders may be hostile:
every key read is type-checked (``a11y`` / ``title`` a string or null, ``index`` an int, ...;
the message names file, line and key), JSON nesting deeper than 64 levels, NaN and huge
integers are refused (:mod:`cua_rl._json`), a PNG named must lie inside the folder, and images
go through :func:`cua_rl.images.load_rgb` (pixel budget against decompression bombs, full
decode). :func:`write_trace` writes
under a temporary name and renames into place, so a reader never sees half a trace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl._json import check_bool, check_int, check_number, check_str, loads
from cua_rl.core import Observation, Trajectory, check_screenshot
from cua_rl.episode_folder import STEPS_FILE, write_episode_folder
from cua_rl.errors import TraceFormatError
from cua_rl.images import load_rgb

if TYPE_CHECKING:
    from cua_rl.actions import Action

__all__ = [
    "Frame",
    "Trace",
    "list_trace_folders",
    "read_trace",
    "read_traces",
    "write_trace",
]

_STEPS = STEPS_FILE
_OSWORLD = "traj.jsonl"
_OSWORLD_PNG = re.compile(r"^step_(\d+)(?:_.*)?\.png$")
_FIRST_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, eq=False)
class Frame:
    """One screen of a trace.

    Attributes:
        screenshot: H x W x 3 uint8 RGB image.
        a11y: Accessibility tree as text (one node per line), if recorded.
        title: Title of the focused window, if recorded.
    """

    screenshot: np.ndarray
    a11y: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        check_screenshot(self.screenshot, "Frame.screenshot")

    @cached_property
    def digest(self) -> str:
        """sha1 (hex) of the screenshot's shape and bytes: equal digests mean identical pixels."""
        h = hashlib.sha1(repr(self.screenshot.shape).encode())
        h.update(np.ascontiguousarray(self.screenshot).tobytes())
        return h.hexdigest()

    @classmethod
    def from_observation(cls, observation: Observation) -> Frame:
        """The frame of an :class:`~cua_rl.core.Observation` (screenshot, a11y, title)."""
        return cls(observation.screenshot, observation.a11y, observation.title)


@dataclass(frozen=True, eq=False)
class Trace:
    """The frames and actions of one episode.

    Attributes:
        frames: The screens in order, the initial one first (at least one).
        actions: ``actions[i]`` leads from ``frames[i]`` to ``frames[i + 1]`` (one fewer than
            frames); free text, e.g. pyautogui code.
        name: A human-readable name (folder name, task id + seed).
        meta: Read-only episode facts: ``task_id``, ``end_reason``, ``final_action``,
            ``claimed_success`` (the agent's own verdict: it ended with Done), ``ground_truth``,
            ``final_unobserved`` (True when the final DONE/FAIL has no screen after it),
            ``source`` (the folder it was read from).
    """

    frames: tuple[Frame, ...]
    actions: tuple[str, ...] = ()
    name: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        frames = tuple(self.frames)
        actions = tuple(str(a) for a in self.actions)
        where = f"trace {self.name!r}" if self.name else "trace"
        if not frames:
            raise TraceFormatError(f"{where} has no frames; a trace needs at least one screen")
        for i, frame in enumerate(frames):
            if not isinstance(frame, Frame):
                raise TraceFormatError(
                    f"{where}: frames[{i}] must be a Frame, got {type(frame).__name__}"
                )
        if not actions:
            actions = ("",) * (len(frames) - 1)
        if len(actions) != len(frames) - 1:
            raise TraceFormatError(
                f"{where} has {len(frames)} frames and {len(actions)} actions; "
                f"expected {len(frames) - 1} actions (one between consecutive frames)"
            )
        object.__setattr__(self, "frames", frames)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    def __len__(self) -> int:
        return len(self.frames)

    @cached_property
    def digest(self) -> str:
        """sha1 (hex) of the frames' digests and the actions: a content id of the trace."""
        h = hashlib.sha1()
        for frame in self.frames:
            h.update(frame.digest.encode())
        for action in self.actions:
            h.update(b"\x00" + action.encode("utf-8"))
        return h.hexdigest()

    @property
    def screenshots(self) -> list[np.ndarray]:
        """Every screenshot in order."""
        return [f.screenshot for f in self.frames]

    @property
    def claimed_success(self) -> bool | None:
        """The agent's own verdict (it ended with Done), if known."""
        value = self.meta.get("claimed_success")
        return None if value is None else bool(value)

    def subsequence(self, keep: Iterable[int], name: str | None = None) -> Trace:
        """The trace restricted to the frames at ``keep`` (sorted; actions joined by `` ; ``).

        Raises:
            TraceFormatError: ``keep`` is empty or holds an index out of range.
        """
        idx = sorted(set(keep))
        if not idx or idx[0] < 0 or idx[-1] >= len(self.frames):
            raise TraceFormatError(
                f"subsequence of {self.name!r} needs indices in [0, {len(self.frames) - 1}], "
                f"got {idx}"
            )
        actions = [" ; ".join(a for a in self.actions[i:j] if a)
                   for i, j in zip(idx, idx[1:], strict=False)]
        return Trace(
            tuple(self.frames[i] for i in idx), tuple(actions), name or self.name, self.meta
        )

    def with_inserted(self, position: int, frame: Frame, action: str = "") -> Trace:
        """A copy with ``frame`` inserted before ``frames[position]`` (``len`` appends)."""
        if not 0 <= position <= len(self.frames):
            raise TraceFormatError(
                f"insert position must be in [0, {len(self.frames)}], got {position}"
            )
        frames = [*self.frames[:position], frame, *self.frames[position:]]
        acts = list(self.actions)
        acts.insert(min(position, len(acts)), action)
        return Trace(tuple(frames), tuple(acts), self.name, self.meta)

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, name: str | None = None) -> Trace:
        """The trace of a finished CUAEnv episode (initial observation, then one per step)."""
        frames = [Frame.from_observation(o) for o in trajectory.observations]
        actions = [s.action_text for s in trajectory.steps]
        return cls(
            tuple(frames),
            tuple(actions),
            name if name is not None else trajectory.task.id,
            {
                "task_id": trajectory.task.id,
                "end_reason": trajectory.end_reason,
                "claimed_success": trajectory.end_reason == "done",
                "ground_truth": trajectory.ground_truth,
                "env_error": trajectory.env_error,
            },
        )

    @classmethod
    def from_observations(
        cls,
        observations: Sequence[Observation],
        actions: Sequence[Action | str],
        name: str = "",
        meta: Mapping[str, Any] | None = None,
    ) -> Trace:
        """A trace from observations and actions, e.g. the output of SimDesk's ``run_expert``.

        ``actions`` may have one entry per observation when the last one is a final action
        with no observation after it (``Done`` / ``Fail``); it is kept as
        ``meta["final_action"]``, and ``meta["claimed_success"]`` says whether it was Done.
        """
        from cua_rl.actions import Done, Fail, to_pyautogui

        def text(a: Action | str) -> str:
            return a if isinstance(a, str) else to_pyautogui(a)

        info = dict(meta or {})
        acts = list(actions)
        if len(acts) == len(observations) and acts:
            final = acts.pop()
            info.setdefault("final_action", text(final))
            if not isinstance(final, str):
                info.setdefault("claimed_success", isinstance(final, Done))
                if isinstance(final, Fail):
                    info.setdefault("end_reason", "fail")
            else:
                info.setdefault("claimed_success", final.strip().upper() == "DONE")
        frames = tuple(Frame.from_observation(o) for o in observations)
        return cls(frames, tuple(text(a) for a in acts), name, info)


# -- reading -----------------------------------------------------------------------------------
def _load_png(path: Path) -> np.ndarray:
    return load_rgb(path, error=TraceFormatError, what="trace file")


def inside(folder: Path, name: str, where: str, key: str) -> Path:
    """``folder / name`` when ``name`` is a relative path that stays inside ``folder``.

    Raises:
        TraceFormatError: ``name`` is absolute, climbs out with ``..``, or is empty.
    """
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts or "\\" in name:
        raise TraceFormatError(
            f"{where}: key {key!r} must name a file inside {str(folder)!r}, got {name!r:.200}"
        )
    return folder / name


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"cannot read {str(path)!r}: {error}") from error
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        row = loads(line, f"{str(path)!r} line {number}")
        if not isinstance(row, dict):
            raise TraceFormatError(
                f"{str(path)!r} line {number} must be a JSON object, got {type(row).__name__}"
            )
        rows.append((number, row))
    return rows


def _terminal_claim(action: Any) -> bool | None:
    """True for a DONE action, False for FAIL, None for anything else.

    ``action`` is an action text (``"DONE"``; case and surrounding spaces ignored) or an
    OSWorld ``computer_13`` dict (``{"action_type": "DONE"}``).
    """
    if isinstance(action, Mapping):
        action = action.get("action_type")
    if not isinstance(action, str):
        return None
    word = action.strip().upper()
    return True if word == "DONE" else False if word == "FAIL" else None


def _unobserved_final(where: str, key: str, is_last: bool, final: bool) -> None:
    """Raise unless a line without a screenshot is the last one and ends the episode."""
    if not is_last:
        raise TraceFormatError(
            f"{where}: key {key!r} is missing or null; only the last line, a DONE/FAIL that "
            f"ends the episode, may have no screenshot")
    if not final:
        raise TraceFormatError(
            f"{where}: key {key!r} is missing or null, but the line is not a final DONE/FAIL "
            f"action; only a DONE/FAIL that ends the episode may have no screenshot")


def _screen_text(row: Mapping[str, Any], where: str) -> tuple[str | None, str | None]:
    return check_str(row.get("a11y"), where, "a11y"), check_str(row.get("title"), where, "title")


def _read_episode(folder: Path) -> Trace:
    path = folder / _STEPS
    rows = _json_lines(path)
    if not rows or rows[0][1].get("kind") != "episode":
        first = rows[0][1] if rows else None
        raise TraceFormatError(f"{str(path)!r} must start with an episode header line "
                               f"(\"kind\": \"episode\"), got {first!r:.200}")
    (hline, header), steps = rows[0], rows[1:]
    where = f"{str(path)!r} line {hline}"
    initial = check_str(header.get("initial"), where, "initial", optional=False)
    assert initial is not None  # checked above
    frames = [Frame(_load_png(inside(folder, initial, where, "initial")),
                    *_screen_text(header, where))]
    meta: dict[str, Any] = {}
    for key in ("task_id", "end_reason", "env_error", "final_action", "instruction"):
        meta[key] = check_str(header.get(key), where, key)
    meta["ground_truth"] = check_number(header.get("ground_truth"), where, "ground_truth")
    claimed = check_bool(header.get("claimed_success"), where, "claimed_success")
    length = check_int(header.get("length"), where, "length", optional=True, low=0)
    actions: list[str] = []
    unobserved: str | None = None
    for expected, (number, row) in enumerate(steps):
        at = f"{str(path)!r} line {number}"
        if row.get("kind") != "step":
            raise TraceFormatError(f"{at} is not a step line (\"kind\": \"step\"), got kind "
                                   f"{row.get('kind')!r:.100}")
        index = check_int(row.get("index"), at, "index", low=0)
        if index != expected:
            raise TraceFormatError(
                f"{str(path)!r}: step {expected} is missing (line {number} has index {index})"
            )
        action_text = check_str(row.get("action_text", ""), at, "action_text") or ""
        shot = check_str(row.get("screenshot"), at, "screenshot")
        if shot is None:
            _unobserved_final(at, "screenshot", expected == len(steps) - 1,
                              _terminal_claim(action_text) is not None)
            unobserved = action_text
            break
        frames.append(Frame(_load_png(inside(folder, shot, at, "screenshot")),
                            *_screen_text(row, at)))
        actions.append(action_text)
    if length is not None and length != len(steps):
        raise TraceFormatError(
            f"{str(path)!r}: the header says {length} steps but {len(steps)} step lines follow"
        )
    end_reason = meta["end_reason"]
    meta["claimed_success"] = (claimed if "claimed_success" in header else
                               end_reason == "done" if end_reason is not None else None)
    if check_bool(header.get("final_unobserved"), where, "final_unobserved"):
        meta["final_unobserved"] = True  # written by write_trace from such a trace
    if unobserved is not None:
        meta["final_action"] = meta["final_action"] or unobserved
        meta["final_unobserved"] = True
        if meta["claimed_success"] is None:
            meta["claimed_success"] = _terminal_claim(unobserved)
    for key in ("final_action", "instruction"):
        if meta[key] is None:
            del meta[key]
    meta["source"] = str(folder)
    return Trace(tuple(frames), tuple(actions), folder.name, meta)


def _read_osworld(folder: Path) -> Trace:
    path = folder / _OSWORLD
    rows = _json_lines(path)
    if not rows:
        raise TraceFormatError(f"{str(path)!r} has no steps; a trace needs at least one screen")
    frames: list[Frame] = []
    actions: list[str] = []
    initial = sorted(p for p in folder.glob("step_0*.png") if _OSWORLD_PNG.match(p.name))
    if initial:
        frames.append(Frame(_load_png(initial[0])))
    previous = 0
    final_action = None
    unobserved = False
    for line, (number, row) in enumerate(rows):
        at = f"{str(path)!r} line {number}"
        step = check_int(row.get("step_num"), at, "step_num")
        if step is None or step < previous or step > previous + 1:
            raise TraceFormatError(
                f"{str(path)!r} line {number}: step_num {step!r} after {previous}; a step is "
                f"missing or out of order"
            )
        previous = step
        action = row.get("action")
        action_text = action if isinstance(action, str) else json.dumps(action, default=str)
        shot = check_str(row.get("screenshot_file"), at, "screenshot_file")
        if shot is None:
            done = check_bool(row.get("done"), at, "done")
            _unobserved_final(at, "screenshot_file", line == len(rows) - 1,
                              bool(done) or _terminal_claim(action) is not None)
            final_action, unobserved = action_text, True
            break
        frames.append(Frame(_load_png(inside(folder, shot, at, "screenshot_file"))))
        actions.append(action_text)
        final_action = action_text
    if not frames:
        raise TraceFormatError(
            f"{str(folder)!r} holds no screen: {_OSWORLD} names no screenshot_file before its "
            f"final action and there is no step_0*.png; a trace needs at least one screen")
    if not initial:
        actions = actions[1:]
    claimed = None
    if final_action is not None:
        upper = final_action.strip().upper()
        claimed = True if "DONE" in upper else (False if "FAIL" in upper else None)
    meta: dict[str, Any] = {"source": str(folder), "final_action": final_action,
                            "claimed_success": claimed, "task_id": folder.name}
    if unobserved:
        meta["final_unobserved"] = True
    result = folder / "result.txt"
    if result.is_file():
        try:
            meta["ground_truth"] = float(result.read_text(encoding="utf-8").strip())
        except (OSError, ValueError) as error:
            raise TraceFormatError(f"{str(result)!r} does not hold a number: {error}") from error
        if not np.isfinite(meta["ground_truth"]):
            raise TraceFormatError(f"{str(result)!r} must hold a finite number, "
                                   f"got {meta['ground_truth']}")
    return Trace(tuple(frames), tuple(actions), folder.name, meta)


def _pngs(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.suffix.lower() == ".png" and p.is_file()
            and not p.name.startswith(".")]


def _read_pngs(folder: Path) -> Trace:
    """A plain folder of screenshots: ordered by the first number in each name."""
    numbered: dict[int, Path] = {}
    for png in _pngs(folder):
        number = _FIRST_NUMBER.search(png.stem)
        if number is None:
            raise TraceFormatError(
                f"{str(png)!r}: in a plain PNG trace folder every PNG name needs a number "
                f"giving its place (000.png, step_3.png, frame-12.png)")
        k = int(number.group())
        if k in numbered:
            raise TraceFormatError(f"{str(folder)!r}: {numbered[k].name!r} and {png.name!r} "
                                   f"both have number {k}; the order of the screens is unclear")
        numbered[k] = png
    frames = tuple(Frame(_load_png(numbered[k])) for k in sorted(numbered))
    return Trace(frames, (), folder.name, {"source": str(folder), "task_id": folder.name})


def read_trace(folder: str | os.PathLike[str]) -> Trace:
    """Read one trace folder: a cua_rl episode folder, an OSWorld-style result folder, or a plain
    folder of PNGs (screens only, ordered by the first number in each file name: ``000.png``,
    ``step_3.png``; no actions, no titles, ``claimed_success`` unknown).

    Raises:
        TraceFormatError: the folder is none of these, or a file in it is missing or malformed
            (the message names the file).
    """
    path = Path(folder)
    if not path.exists():
        raise TraceFormatError(f"{str(path)!r} does not exist; expected a trace folder")
    if (path / _STEPS).is_file():
        return _read_episode(path)
    if (path / _OSWORLD).is_file():
        return _read_osworld(path)
    if path.is_dir() and _pngs(path):
        return _read_pngs(path)
    raise TraceFormatError(
        f"{str(path)!r} is not a trace folder: expected {_STEPS} (cua_rl), {_OSWORLD} (OSWorld) "
        f"or numbered PNG files"
    )


def list_trace_folders(folder: str | os.PathLike[str]) -> list[Path]:
    """The trace folders directly under ``folder``: those with ``steps.jsonl``, ``traj.jsonl``
    or PNG files (sorted by name; hidden ones skipped)."""
    root = Path(folder)
    if not root.exists():
        raise TraceFormatError(f"{str(root)!r} does not exist; expected a folder of trace folders")
    if not root.is_dir():
        raise TraceFormatError(f"{str(root)!r} is a file; expected a folder of trace folders")
    return [
        p for p in sorted(root.iterdir())
        if p.is_dir() and not p.name.startswith(".")
        and ((p / _STEPS).is_file() or (p / _OSWORLD).is_file() or bool(_pngs(p)))
    ]


def read_traces(folder: str | os.PathLike[str]) -> list[Trace]:
    """Read every trace folder directly under ``folder``, sorted by name.

    Raises:
        TraceFormatError: ``folder`` holds no trace folder, or one of them is malformed.
    """
    folders = list_trace_folders(folder)
    if not folders:
        raise TraceFormatError(f"{str(folder)!r} holds no trace folders")
    return [read_trace(p) for p in folders]


# -- writing -----------------------------------------------------------------------------------
def write_trace(
    trace: Trace, folder: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``trace`` as a cua_rl episode folder (``steps.jsonl`` + PNGs), atomically.

    The same writer as :class:`~cua_rl.envs.record.RecordTrajectory`
    (:func:`cua_rl.episode_folder.write_episode_folder`); ``meta`` (but ``source``) goes into the
    header.

    Args:
        trace: The trace.
        folder: The folder to create.
        overwrite: Replace an existing folder (otherwise FileExistsError).

    Returns:
        The folder.
    """
    meta = {k: v for k, v in trace.meta.items() if k != "source"}
    meta["name"] = trace.name
    return write_episode_folder(folder, trace.frames, [{"action_text": a} for a in trace.actions],
                                meta, overwrite=overwrite)  # fmt: skip
