"""MiniWoB++'s oracle: scripted solvers from the DOM text, and failure plans (broken copies).

MiniWoB++ tasks (the ``miniwob`` package, run in Chromium by the ``miniwob`` backend) score
themselves: the label of every episode is the task's own reward (ground truth), never what the
policy meant to do. This module plays episodes of both classes:

* **Solvers** (:data:`SOLVERS`): for each supported task, a pure function
  ``(instruction, nodes) -> list[Action]`` that reads the instruction and the DOM text
  (``info["a11y"]``, parsed by :func:`parse_dom_text`) of the first screen and returns the plan:
  :class:`~cua_rl.actions.Click` at the centre of the target's visible box (screenshot pixels),
  :class:`~cua_rl.actions.Type`.
* **Failure modes** (:data:`FAILURE_MODES`): ``random`` (1-3 clicks anywhere), ``stop_short``
  (the plan without its last action), ``wrong_element`` (the right kind of element, another
  one: the other button, the next link, the neighbouring option) and product-like ones where a
  task allows: ``typo`` (one character of the text changed), ``wrong_field`` (the right text,
  the wrong place: typed before focusing the field), ``missing_item`` / ``extra_item`` (one
  checkbox too few or too many).
* :class:`MiniWoBPolicy`: an env policy (``(observation, info, env) -> Action``) that draws, per
  episode, the solver (probability ``success_share``) or one of the task's failure modes, plays
  the plan and then declares :class:`~cua_rl.actions.Done` (a task that ends by itself ends the
  episode earlier).

:func:`cua_rl.datasets.from_env.build_miniwob_labelled` builds a labelled set with the policy
(``cua-rl calibrate`` reads it). The DOM text is read by
:func:`~cua_rl.envs.backends.miniwob.dom.parse_dom_text` (grammar there).

Measured (miniwob 1.1.0, Chromium 156; table in ``docs/miniwob.md``): every solver 20/20 on
seeds 0-19 of the raw env (``scripts/miniwob_raw_solvers.py``) and 180/180 held-out episodes
through the ``miniwob`` backend; every non-random failure mode 0 successes; random clicks hit
3-5 of 20 on click-test, click-test-2 and focus-text (labelled 1: the reward decides).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from cua_rl.actions import Action, Click, Done, Type
from cua_rl.envs.backends.miniwob.dom import DomNode, label_text, parse_dom_text, visible_point
from cua_rl.errors import BackendError, ConfigError, TaskSpecError

__all__ = [
    "FAILURE_MODES",
    "SOLVERS",
    "MiniWoBPolicy",
    "choose_mode",
    "failure_plan",
    "solve",
    "task_name",
]

Plan = list[Action]


# -- solvers ------------------------------------------------------------------------------------


def _click(nodes: Sequence[DomNode], node: DomNode) -> Click:
    return Click(*visible_point(nodes, node))


def _need(found: Sequence[DomNode], what: str, task: str) -> DomNode:
    if not found:
        raise TaskSpecError(f"{task}: the DOM has no {what}")
    return found[0]


def _quoted_target(instruction: str, task: str) -> str:
    m = re.search(r'"([^"]*)"', instruction)
    if m is None:
        raise TaskSpecError(f"{task}: no quoted target in the instruction {instruction!r}")
    return m.group(1)


def _buttons(nodes: Sequence[DomNode], text: str | None = None) -> list[DomNode]:
    return [n for n in nodes if n.tag == "button" and (text is None or n.text.strip() == text)]


def _choice_inputs(nodes: Sequence[DomNode], kind: str) -> list[tuple[DomNode, str]]:
    """(input, its label text) of every ``input_<kind>`` in a ``label``."""
    out = []
    for n in nodes:
        if n.tag == f"input_{kind}":
            label = nodes[n.parent] if n.parent is not None else n
            out.append((n, label_text(nodes, label).strip()))
    return out


def _select_targets(instruction: str, task: str) -> list[str]:
    m = re.fullmatch(r"Select (.*?) and click Submit\.", instruction.strip())
    if m is None:
        raise TaskSpecError(
            f"{task}: instruction {instruction!r} is not 'Select ... and click Submit.'"
        )
    words = m.group(1)
    if words == "nothing":
        return []
    return [w for w in re.split(r", | and ", words) if w]


def _solve_click_test(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    return [_click(nodes, _need(_buttons(nodes), "button", "click-test"))]


def _solve_click_test_2(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    m = re.search(r"Click button (\S+?)\.?$", instruction.strip())
    if m is None:
        raise TaskSpecError(f"click-test-2: cannot read the target of {instruction!r}")
    return [
        _click(nodes, _need(_buttons(nodes, m.group(1)), f"button {m.group(1)!r}", "click-test-2"))
    ]


def _solve_click_button(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    target = _quoted_target(instruction, "click-button")
    return [_click(nodes, _need(_buttons(nodes, target), f"button {target!r}", "click-button"))]


def _solve_click_dialog(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    close = [n for n in nodes if n.tag == "button" and "ui-dialog-titlebar-close" in n.classes]
    return [_click(nodes, _need(close, "dialog close button", "click-dialog"))]


def _links(nodes: Sequence[DomNode]) -> list[DomNode]:
    return [n for n in nodes if n.tag == "span" and "alink" in n.classes]


def _solve_click_link(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    target = _quoted_target(instruction, "click-link")
    found = [n for n in _links(nodes) if n.text == target]
    found = found or [n for n in _links(nodes) if n.text.lower() == target.lower()]
    return [_click(nodes, _need(found, f"link {target!r}", "click-link"))]


def _text_field(nodes: Sequence[DomNode], task: str) -> DomNode:
    return _need([n for n in nodes if n.tag in ("input_text", "textarea")], "text field", task)


def _solve_enter_text(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    target = _quoted_target(instruction, "enter-text")
    field = _text_field(nodes, "enter-text")
    submit = _need(_buttons(nodes, "Submit"), "Submit button", "enter-text")
    return [_click(nodes, field), Type(target), _click(nodes, submit)]


def _solve_focus_text(instruction: str, nodes: Sequence[DomNode]) -> Plan:
    return [_click(nodes, _text_field(nodes, "focus-text"))]


def _solve_select(task: str, kind: str) -> Callable[[str, Sequence[DomNode]], Plan]:
    def solver(instruction: str, nodes: Sequence[DomNode]) -> Plan:
        targets = _select_targets(instruction, task)
        inputs = _choice_inputs(nodes, kind)
        plan: Plan = []
        for word in targets:
            box = _need([n for n, label in inputs if label == word], f"{kind} {word!r}", task)
            plan.append(_click(nodes, box))
        submit = _need(_buttons(nodes, "Submit"), "Submit button", task)
        return [*plan, _click(nodes, submit)]

    solver.__name__ = f"_solve_{task.replace('-', '_')}"
    return solver


SOLVERS: dict[str, Callable[[str, Sequence[DomNode]], Plan]] = {
    "click-test": _solve_click_test,
    "click-test-2": _solve_click_test_2,
    "click-button": _solve_click_button,
    "click-dialog": _solve_click_dialog,
    "click-link": _solve_click_link,
    "enter-text": _solve_enter_text,
    "focus-text": _solve_focus_text,
    "click-checkboxes": _solve_select("click-checkboxes", "checkbox"),
    "click-option": _solve_select("click-option", "radio"),
}
"""Task name -> solver ``(instruction, nodes) -> plan`` (the plan of the first screen)."""


def solve(task: str, instruction: str, nodes: Sequence[DomNode]) -> Plan:
    """The solver's plan for ``task``.

    Raises:
        TaskSpecError: ``task`` has no solver (the message lists those that do), or the
            instruction or DOM lacks what the solver needs.
    """
    if task not in SOLVERS:
        raise TaskSpecError(f"no MiniWoB solver for task {task!r}; solved: {sorted(SOLVERS)}")
    return SOLVERS[task](instruction, nodes)


# -- failure modes ------------------------------------------------------------------------------


def _typo(text: str, rng: np.random.Generator) -> str:
    """``text`` with one character replaced by another (never the same text)."""
    if not text:
        return "x"
    i = int(rng.integers(len(text)))
    pool = [c for c in "abcdefghijklmnopqrstuvwxyz" if c != text[i].lower()]
    return text[:i] + str(rng.choice(pool)) + text[i + 1 :]


def _wrong_element(
    task: str, instruction: str, nodes: Sequence[DomNode], rng: np.random.Generator
) -> Plan:
    plan = solve(task, instruction, nodes)
    first = plan[0]
    assert isinstance(first, Click)
    if task in ("click-test-2", "click-button", "click-test"):
        # another button: not under the solver's click, and without the target's text
        # (click-button may show the target word on two buttons; either one succeeds)
        target = [n.text for n in _buttons(nodes) if n.contains(first.x, first.y)]  # type: ignore[arg-type]
        pool = [n for n in _buttons(nodes) if n.text not in target]
        pool = pool or [n for n in nodes if n.tag == "div" and n.text]
    elif task == "click-link":
        target = _quoted_target(instruction, task)
        pool = [n for n in _links(nodes) if n.text.lower() != target.lower()]
    elif task == "click-dialog":  # the dialog's title or text instead of its x
        pool = [n for n in nodes if n.tag in ("p", "span") and n.text and n.box[0] >= 0]
    elif task in ("enter-text", "focus-text"):  # the label / area around the field
        pool = [n for n in nodes if n.tag == "div" and n.id == "area"]
    else:  # click-checkboxes / click-option: a wrong choice, then Submit
        kind = "checkbox" if task == "click-checkboxes" else "radio"
        targets = set(_select_targets(instruction, task))
        wrong = [n for n, label in _choice_inputs(nodes, kind) if label not in targets]
        if not wrong:
            return [Done()]
        submit = _need(_buttons(nodes, "Submit"), "Submit button", task)
        swap = _click(nodes, wrong[int(rng.integers(len(wrong)))])
        if kind == "radio" or len(plan) < 2:
            return [swap, _click(nodes, submit)]
        keep = plan[:-1]  # checkboxes: one right box swapped for a wrong one
        keep.pop(int(rng.integers(len(keep))))
        return [*keep, swap, _click(nodes, submit)]
    if not pool:
        return [Done()]
    node = pool[int(rng.integers(len(pool)))]
    if task in ("enter-text", "focus-text"):  # a corner of the area, off the field
        left, top, width, height = node.box
        return [Click(int(left + width - 3), int(top + height - 3))]
    return [_click(nodes, node)]


def _mode_plan(
    mode: str,
    task: str,
    instruction: str,
    nodes: Sequence[DomNode],
    rng: np.random.Generator,
    screen: tuple[int, int],
) -> Plan:
    if mode == "random":
        w, h = screen
        return [
            Click(int(rng.integers(w)), int(rng.integers(h)))
            for _ in range(int(rng.integers(1, 4)))
        ]
    if mode == "wrong_element":
        return _wrong_element(task, instruction, nodes, rng)
    plan = solve(task, instruction, nodes)
    if mode == "stop_short":  # the plan without its last action
        return plan[:-1]
    if mode == "typo":  # enter-text: the text with one wrong character
        return [a if not isinstance(a, Type) else Type(_typo(a.text, rng)) for a in plan]
    if mode == "wrong_field":  # enter-text: the right text typed without focusing the field
        return [plan[1], plan[2]]
    if mode == "missing_item":  # click-checkboxes: one box left out
        if len(plan) < 2:
            return [Done()]
        drop = int(rng.integers(len(plan) - 1))
        return plan[:drop] + plan[drop + 1 :]
    if mode == "extra_item":  # click-checkboxes: one box too many
        targets = set(_select_targets(instruction, task))
        extra = [n for n, label in _choice_inputs(nodes, "checkbox") if label not in targets]
        if not extra:
            return plan
        return [*plan[:-1], _click(nodes, extra[int(rng.integers(len(extra)))]), plan[-1]]
    raise TaskSpecError(f"unknown failure mode {mode!r} for {task}")


_COMMON_MODES = ("random", "stop_short", "wrong_element")
FAILURE_MODES: dict[str, tuple[str, ...]] = {
    "click-test": ("random", "stop_short"),
    "click-test-2": _COMMON_MODES,
    "click-button": _COMMON_MODES,
    "click-dialog": _COMMON_MODES,
    "click-link": _COMMON_MODES,
    "enter-text": (*_COMMON_MODES, "typo", "wrong_field"),
    "focus-text": ("random", "stop_short", "wrong_element"),
    "click-checkboxes": (*_COMMON_MODES, "missing_item", "extra_item"),
    "click-option": (*_COMMON_MODES,),
}
"""Task name -> the failure modes it supports (see the module docstring)."""


def failure_plan(
    mode: str,
    task: str,
    instruction: str,
    nodes: Sequence[DomNode],
    rng: np.random.Generator,
    screen: tuple[int, int] = (160, 210),
) -> Plan:
    """The plan of failure ``mode`` (one of ``FAILURE_MODES[task]``).

    Args:
        mode: The failure mode.
        task: The MiniWoB task name.
        instruction: The instruction.
        nodes: The parsed DOM text of the first screen.
        rng: Draws the random parts (clicks, the wrong element, the typo).
        screen: (width, height) of the screenshot, for random clicks.

    Raises:
        TaskSpecError: ``task`` has no failure modes or ``mode`` is not one of them.
    """
    if task not in FAILURE_MODES:
        raise TaskSpecError(
            f"no MiniWoB failure modes for {task!r}; known: {sorted(FAILURE_MODES)}"
        )
    if mode not in FAILURE_MODES[task]:
        raise TaskSpecError(f"{task} has failure modes {list(FAILURE_MODES[task])}, not {mode!r}")
    return _mode_plan(mode, task, instruction, nodes, rng, screen)


# -- the policy ---------------------------------------------------------------------------------


def task_name(task_id: str) -> str:
    """``click-button`` of ``miniwob/click-button/17``.

    Raises:
        TaskSpecError: The id is not ``miniwob/<task>/<seed>``.
    """
    parts = task_id.split("/") if isinstance(task_id, str) else []
    if len(parts) != 3 or parts[0] != "miniwob" or not parts[1]:
        raise TaskSpecError(f"expected a task id 'miniwob/<task>/<seed>', got {task_id!r}")
    return parts[1]


def _rng(seed: int, task_id: str, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(task_id.encode("utf-8")), stream])


def choose_mode(seed: int, task_id: str, success_share: float, modes: Sequence[str]) -> str:
    """``"solve"`` with probability ``success_share``, else one of ``modes`` uniformly; a pure
    function of ``(seed, task_id)``, so a resumed build and its manifest agree."""
    rng = _rng(seed, task_id, 0)
    if rng.random() < success_share or not modes:
        return "solve"
    return str(modes[int(rng.integers(len(modes)))])


class MiniWoBPolicy:
    """An EnvPolicy for ``miniwob`` CUAEnvs: per episode, the solver or a failure mode.

    At an episode's first call (the reset info has an ``instruction`` key) it parses
    ``info["a11y"]``, draws the mode with :func:`choose_mode` and computes the plan; each call
    then returns the plan's next action, and :class:`~cua_rl.actions.Done` when it is spent.

    Args:
        success_share: Probability of playing the solver.
        seed: Seed of the mode draw and of the failure plans.
        failure_modes: Task name -> the modes to draw from (default :data:`FAILURE_MODES`).

    Attributes:
        modes: Task id -> the mode played, for every episode started.
    """

    def __init__(
        self,
        *,
        success_share: float = 1.0,
        seed: int = 0,
        failure_modes: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        ok = isinstance(success_share, (int, float)) and not isinstance(success_share, bool)
        if not (ok and 0.0 <= success_share <= 1.0):
            raise ConfigError(f"success_share must be in [0, 1], got {success_share!r}")
        self.success_share = float(success_share)
        self.seed = seed
        self.failure_modes = dict(FAILURE_MODES if failure_modes is None else failure_modes)
        for task, modes in self.failure_modes.items():
            unknown = sorted(set(modes) - set(FAILURE_MODES.get(task, ())))
            if unknown:
                raise ConfigError(
                    f"failure_modes[{task!r}]: {unknown} not in {list(FAILURE_MODES.get(task, ()))}"
                )
        self.modes: dict[str, str] = {}
        self._plan: Plan = []

    def start(self, task_id: str, instruction: str, a11y: str, screen: tuple[int, int]) -> Plan:
        """Draw the mode of a new episode and return (and keep) its plan."""
        task = task_name(task_id)
        nodes = parse_dom_text(a11y)
        mode = choose_mode(self.seed, task_id, self.success_share, self.failure_modes.get(task, ()))
        self.modes[task_id] = mode
        if mode == "solve":
            plan = solve(task, instruction, nodes)
        else:
            plan = failure_plan(mode, task, instruction, nodes, _rng(self.seed, task_id, 1), screen)
        self._plan = list(plan)
        return list(plan)

    def __call__(self, observation: dict[str, Any], info: dict[str, Any], env: Any) -> Action:
        del env
        if "instruction" in info:
            if "a11y" not in info:
                raise BackendError(
                    "the env's reset info has no 'a11y' (DOM text); a miniwob backend provides it"
                )
            height, width = observation["screenshot"].shape[:2]
            self.start(
                str(info["task_id"]), str(observation["instruction"]), info["a11y"], (width, height)
            )
        return self._plan.pop(0) if self._plan else Done()
