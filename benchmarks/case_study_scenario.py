"""The paper's case study rebuilt on SimDesk's editor, and a harder version of it.

Sharma, Mittal and Hu (2026) learned a reference from 3 passing runs of an agent that opens an
editor, opens search and finds text, then validated 25 runs: 11 product bugs, 3 agent issues,
1 false success, 1 missed bug and 9 correct runs. Here the scenario is SimDesk's ``editor_find``
on one task instance (:data:`TASK_SEED`: search "feather" in notes.txt), the agent is SimDesk's
scripted expert, and its self-report (it ends with Done, or with Fail / runs out of steps) is
the baseline.

**Labels.** A run is *wrong* (the positive class, as in the paper) when SimDesk's checker fails
on the final desktop state, or when a product bug was injected into the run (the injected-bug
flag), whatever the checker says. The categories are fixed by how a run is made and checked
when it is made (:func:`make_run` refuses a seed whose outcome does not fit its category):

* ``product_bug``: a bug injected into the editor breaks the scenario and the checker fails;
* ``missed_bug``: a bug the checker and the agent both miss (the editor's final state is
  right and the agent says Done): the results panel stays blank, or Ctrl+O skips the Open
  dialog (the end state is right, a step of the scenario is gone);
* ``agent_issue``: no bug; the agent gives up (Fail) or runs out of steps; the checker fails;
* ``false_success``: no bug; the agent says Done but the checker fails (premature Done, or a
  typo in the search word left uncorrected);
* ``correct``: no bug, the checker passes, the agent says Done.

**Bugs** (:data:`BUGS`). ``search_empty`` is SimDesk's own (:class:`SimDeskConfig.bugs`); the
others are injected by :class:`BuggyEditorBackend`, which patches each live editor window's
callbacks and menu items (SimDesk's editor is not edited): ``wrong_count``,
``find_shortcut_dead`` (Ctrl+F does nothing; the Edit menu still works), ``find_button_dead``,
``open_wrong_file``, ``crash_on_find``, the display-only ``results_blank`` and
``open_skips_dialog``.

**Paths** (:data:`PATHS`): ``shortcut`` (SimDesk's expert plan: Ctrl+O, Ctrl+F, the Find
button), ``menu`` (File > Open..., Edit > Find) and ``enter`` (Enter in the find field instead
of the button). Expert noise: hesitation (waits, idle pointer moves), mistakes (misclicks and
typos, usually corrected), giving up. Desktop noise: :class:`SimDeskConfig` loading screens,
window jitter, popups, the clock; SimDesk draws the colour theme from the task seed, so every
run of one instance has the same theme; :attr:`RunSpec.theme_swap` permutes the colour channels
of a whole run afterwards to SIMULATE a run under another theme.

Used by ``benchmarks/validator_case_study.py`` (run as a script, so this folder is on
``sys.path``); tests load it with ``tests/benchmarks/_bench.py``.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cua_rl.actions import Action, Done, Fail
from cua_rl.core import Observation
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, SimDeskExpert, make_task
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.editor_tasks import NOTES, open_file_plan
from cua_rl.envs.backends.simdesk.expert import Ops
from cua_rl.envs.backends.simdesk.fs import HOME
from cua_rl.errors import ConfigError, TraceFormatError
from cua_rl.validator.a11y import SIMDESK_A11Y_IGNORE, a11y_key
from cua_rl.validator.comparer import EquivalenceConfig
from cua_rl.validator.equivalence import Tier1Config
from cua_rl.validator.model import (
    ReferenceModel,
    ValidationReport,
    ValidatorConfig,
    ValidatorWarning,
)
from cua_rl.validator.semantic import CachedComparer, SimulatedComparer
from cua_rl.validator.traces import Frame, Trace

__all__ = [
    "BUGS",
    "CATEGORIES",
    "FAMILY",
    "PATHS",
    "TASK_SEED",
    "BuggyEditorBackend",
    "Condition",
    "Evaluation",
    "Metrics",
    "Run",
    "RunSpec",
    "evaluate",
    "hard_specs",
    "make_run",
    "metrics",
    "paper_specs",
    "self_report_flags",
    "training_specs",
    "validator_flags",
]

FAMILY = "editor_find"
TASK_SEED = 3
"""editor_find seed 3: search "feather" in notes.txt (one match)."""

CATEGORIES: tuple[str, ...] = ("product_bug", "agent_issue", "false_success", "missed_bug",
                               "correct")
PATHS: tuple[str, ...] = ("shortcut", "menu", "enter")
BUGS: dict[str, str] = {
    "search_empty": "Find reports 0 matches (SimDesk's own bug)",
    "wrong_count": "Find reports one match too many",
    "find_shortcut_dead": "Ctrl+F does nothing (Edit > Find still works)",
    "find_button_dead": "the Find button and Enter do nothing",
    "open_wrong_file": "opening notes.txt loads todo.txt",
    "crash_on_find": "Ctrl+F and Edit > Find close the editor window",
    "results_blank": "the results panel stays blank (state right, display wrong)",
    "open_skips_dialog": "Ctrl+O opens notes.txt at once, without the Open dialog (end state "
                         "right, a step of the scenario gone)",
}
_NATIVE_BUGS = frozenset({"search_empty"})
_MISSED_BUGS = frozenset({"results_blank", "open_skips_dialog"})  # the checker passes
_SHORTCUT_BUGS = frozenset({"find_shortcut_dead", "open_skips_dialog"})  # menus avoid them


# -- bug injection ---------------------------------------------------------------------------------
def _patch_editor(ed: EditorApp, bug: str) -> None:
    """Break one live editor window the way ``bug`` says (instance attributes only)."""
    run_find = ed.run_find
    if bug == "wrong_count":
        def miscount() -> None:
            run_find()
            if ed.last_search is not None:
                query, count = ed.last_search
                ed.last_search = (query, count + 1)
                ed.results.show(f'{count + 1} matches for "{query}"', ed.results.lines)
        ed.find_button.on_press = ed.find_field.on_submit = miscount
    elif bug == "results_blank":
        def blank() -> None:
            run_find()
            ed.results.show("")
        ed.find_button.on_press = ed.find_field.on_submit = blank
    elif bug == "find_button_dead":
        ed.find_button.on_press = ed.find_field.on_submit = lambda: None
    elif bug == "find_shortcut_dead":
        ed.show_find = lambda: None  # type: ignore[method-assign]  # the menu keeps the original
    elif bug == "crash_on_find":
        ed.show_find = ed.close  # type: ignore[method-assign]
        for menu in ed.menu.menus:
            for item in menu.items:
                if item.label == "Find":
                    item.action = ed.close
    elif bug == "open_skips_dialog":
        def open_notes() -> None:
            ed.desk.busy(ed.main, f"Opening {NOTES}...", lambda: ed._load(f"{HOME}/{NOTES}"))
        ed.show_open = open_notes  # type: ignore[method-assign]  # File > Open... still works
    elif bug == "open_wrong_file":
        load = ed._load
        ed._load = lambda path: load(path.replace(NOTES, "todo.txt"))  # type: ignore[method-assign]


class BuggyEditorBackend(SimDeskBackend):
    """A SimDesk backend whose editor windows carry a case-study bug (see :data:`BUGS`).

    Every editor window is patched as soon as it exists (after reset and after each step,
    before the next action can reach it). SimDesk's own bugs go through ``config.bugs``.

    Args:
        config: The desktop configuration.
        bug: A key of :data:`BUGS`, or None.
    """

    def __init__(self, config: SimDeskConfig, bug: str | None = None) -> None:
        if bug is not None and bug not in BUGS:
            raise ConfigError(f"unknown case-study bug {bug!r}; known: {sorted(BUGS)}")
        if bug in _NATIVE_BUGS:
            config = dataclasses.replace(config, bugs=frozenset({*config.bugs, bug}))
        super().__init__(config)
        self.bug = bug
        self._patched: set[int] = set()

    def _patch(self) -> None:
        desk = self.desk
        if desk is None or self.bug is None or self.bug in _NATIVE_BUGS:
            return
        for ed in desk.apps_of(EditorApp):
            if id(ed) not in self._patched:
                self._patched.add(id(ed))
                _patch_editor(ed, self.bug)

    def reset(self, task: Any) -> Observation:
        """Reset, then patch."""
        self._patched.clear()
        obs = super().reset(task)
        self._patch()
        return obs

    def step(self, action: Action) -> Observation:
        """Step, then patch any new editor window."""
        obs = super().step(action)
        self._patch()
        return obs


# -- alternative paths --------------------------------------------------------------------------
def _plan_for(path: str) -> Callable[[Ops, dict[str, Any]], Action | None]:
    def plan(ops: Ops, p: dict[str, Any]) -> Action | None:
        ed, act = open_file_plan(ops, NOTES, via_menu=path == "menu")
        if ed is None:
            return act
        if ed.find_visible and ed.last_search is not None and ed.last_search[0] == p["word"]:
            return None
        if not ed.find_visible:
            if path == "menu":
                return ops.menu(ed.main, "Edit", "Find")
            return ops.key(ed.main, "ctrl", "f")
        filled = ops.fill(ed.main, (ed.find_field, p["word"]))
        if filled is not None:
            return filled
        if path == "enter" and ed.main.focus is ed.find_field:
            return ops.key(ed.main, "enter")
        return ops.click_widget(ed.main, ed.find_button)
    return plan


# -- runs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """How to make one run.

    Attributes:
        name: Run name (also the trace name).
        category: One of :data:`CATEGORIES` (checked against the outcome).
        config: Desktop configuration.
        seed: Expert seed: the first seed from here whose outcome fits the category is used
            (:func:`make_run` tries at most 200; the study spaces its specs 1000 apart).
        variant: A short description for the tables (path, bug, noise).
        bug: A key of :data:`BUGS`, or None.
        path: One of :data:`PATHS`.
        hesitation: Expert hesitation probability.
        mistakes: Expert mistake probability.
        give_up: Expert give-up probability.
        max_steps: Step budget (None: the task's).
        theme_swap: Permute the colour channels of every screenshot afterwards (a SIMULATED
            other theme; the accessibility text is unchanged).
    """

    name: str
    category: str
    config: SimDeskConfig
    seed: int = 0
    variant: str = ""
    bug: str | None = None
    path: str = "shortcut"
    hesitation: float = 0.0
    mistakes: float = 0.0
    give_up: float = 0.0
    max_steps: int | None = None
    theme_swap: bool = False

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ConfigError(f"RunSpec.category must be one of {CATEGORIES}, "
                              f"got {self.category!r}")
        if self.path not in PATHS:
            raise ConfigError(f"RunSpec.path must be one of {PATHS}, got {self.path!r}")
        if self.bug is not None and self.bug not in BUGS:
            raise ConfigError(f"RunSpec.bug must be one of {sorted(BUGS)} or None, "
                              f"got {self.bug!r}")


@dataclass(frozen=True)
class Run:
    """One finished run.

    Attributes:
        spec: How it was made (``seed`` is the seed actually used).
        trace: The recorded trace (``meta``: ground truth, self-report, category, bug).
        checker: SimDesk's checker passed on the final state.
        claimed_success: The agent's self-report: it ended with Done.
        end: ``done``, ``fail`` or ``max_steps``.
    """

    spec: RunSpec
    trace: Trace
    checker: bool
    claimed_success: bool
    end: str

    @property
    def wrong(self) -> bool:
        """The label: the checker failed or a bug was injected (the positive class)."""
        return (not self.checker) or self.spec.bug is not None


def _fits(spec: RunSpec, checker: bool, claimed: bool) -> bool:
    return {
        "correct": checker and claimed,
        "product_bug": not checker,
        "missed_bug": checker and claimed,
        "agent_issue": not checker and not claimed,
        "false_success": not checker and claimed,
    }[spec.category]


def _swap(shot: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(shot[..., [2, 0, 1]])


def _attempt(spec: RunSpec, seed: int) -> Run:
    task = make_task(FAMILY, TASK_SEED)
    backend = BuggyEditorBackend(spec.config, spec.bug)
    observations = [backend.reset(task)]
    expert = SimDeskExpert(backend, task, hesitation=spec.hesitation, mistakes=spec.mistakes,
                           give_up=spec.give_up, seed=seed)
    if spec.path != "shortcut":
        expert.family = dataclasses.replace(expert.family, plan=_plan_for(spec.path))
    actions: list[Action] = []
    end = "max_steps"
    for _ in range(spec.max_steps or task.max_steps):
        action = expert.next_action()
        actions.append(action)
        if isinstance(action, (Done, Fail)):
            end = "done" if isinstance(action, Done) else "fail"
            break
        observations.append(backend.step(action))
    checker = backend.ground_truth(task) == 1.0
    claimed = end == "done"
    meta = {"task_id": task.id, "ground_truth": float(checker), "claimed_success": claimed,
            "end_reason": end, "category": spec.category, "bug": spec.bug,
            "variant": spec.variant, "expert_seed": seed}
    trace = Trace.from_observations(observations, actions, name=spec.name, meta=meta)
    if spec.theme_swap:
        frames = tuple(Frame(_swap(f.screenshot), f.a11y, f.title) for f in trace.frames)
        trace = Trace(frames, trace.actions, trace.name, trace.meta)
    return Run(dataclasses.replace(spec, seed=seed), trace, checker, claimed, end)


def make_run(spec: RunSpec, tries: int = 200) -> Run:
    """Run the expert from ``spec.seed`` on until the outcome fits ``spec.category``.

    Raises:
        RuntimeError: No seed in ``tries`` gives an outcome of that category.
    """
    for seed in range(spec.seed, spec.seed + tries):
        run = _attempt(spec, seed)
        if _fits(spec, run.checker, run.claimed_success):
            return run
    raise RuntimeError(f"no expert seed in [{spec.seed}, {spec.seed + tries}) gives a "
                       f"{spec.category} run for {spec.name!r} ({spec.variant})")


# -- the two studies ---------------------------------------------------------------------------
PAPER_CONFIG = SimDeskConfig(width=640, height=400, loading_prob=0.5, jitter=4,
                             theme_jitter=True, clock=True)
"""Loading screens, window jitter, the clock; one theme (SimDesk draws it from the task seed).
Each run sets its own ``loading_prob`` (see :data:`LOADING`)."""

HARD_CONFIG = dataclasses.replace(PAPER_CONFIG, popup_rate=0.15, jitter=8)
"""More noise: toasts and update popups, twice the window jitter."""

LOADING: tuple[float, ...] = (0.0, 0.5, 1.0)
"""Per-run loading-screen probabilities, cycled. SimDesk seeds the desktop from the task seed,
so with one fixed ``loading_prob`` the runs of one instance nearly always draw the same loading
screens; varying it per run gives runs with and without them, as in the paper."""


def _loading(config: SimDeskConfig, i: int) -> SimDeskConfig:
    return dataclasses.replace(config, loading_prob=LOADING[i % len(LOADING)])


def training_specs(config: SimDeskConfig = PAPER_CONFIG, n: int = 3, seed: int = 0,
                   hesitation: float = 0.3,
                   loading: Sequence[float] | None = (1.0, 0.0, 0.5)) -> list[RunSpec]:
    """``n`` correct runs on the ``shortcut`` path: the training set.

    Args:
        config: Desktop configuration.
        n: Number of runs.
        seed: Offset of the expert seeds (1,000,000 + ``seed`` + 1000 i: never a test seed).
        hesitation: Expert hesitation.
        loading: Per-run ``loading_prob``, cycled (None: keep ``config``'s).
    """
    specs = []
    for i in range(n):
        cfg = config if loading is None else dataclasses.replace(
            config, loading_prob=float(loading[i % len(loading)]))
        specs.append(RunSpec(f"train{i}", "correct", cfg, seed=1_000_000 + seed + 1000 * i,
                             variant="shortcut", hesitation=hesitation))
    return specs


def paper_specs(config: SimDeskConfig = PAPER_CONFIG) -> list[RunSpec]:
    """The 25 test runs of the paper's categories (11 / 3 / 1 / 1 / 9), shortcut path,
    hesitation 0.3, loading screens per :data:`LOADING`."""
    specs: list[RunSpec] = []

    def add(category: str, variant: str, **kw: Any) -> None:
        kw.setdefault("hesitation", 0.3)
        i = len(specs)
        specs.append(RunSpec(f"{category}{i:02d}", category, _loading(config, i),
                             seed=1000 * i, variant=variant, **kw))

    for bug, n in (("search_empty", 3), ("wrong_count", 2), ("find_shortcut_dead", 2),
                   ("find_button_dead", 2), ("open_wrong_file", 1), ("crash_on_find", 1)):
        for _ in range(n):
            add("product_bug", bug, bug=bug)
    add("agent_issue", "gives up (Fail)", give_up=1.0)
    add("agent_issue", "gives up (Fail)", give_up=1.0)
    add("agent_issue", "runs out of steps (budget 5)", max_steps=5)
    add("false_success", "typo in the search word left, Done", mistakes=0.6)
    add("missed_bug", "results_blank", bug="results_blank")
    for _ in range(9):
        add("correct", "shortcut")
    return specs


def hard_specs(config: SimDeskConfig = HARD_CONFIG, scale: int = 1) -> list[RunSpec]:
    """210 x ``scale`` test runs with more noise, alternative paths and SIMULATED theme swaps.

    Per ``scale``: correct 100 (shortcut 35, menu 20, enter 15, corrected mistakes 15, theme
    swap 15), product bugs 60 (10 for each bug that makes the checker fail), agent issues 20,
    false success 10, missed bugs 20 (``results_blank`` 10, ``open_skips_dialog`` 10). Bugs of
    Ctrl+F or Ctrl+O only run on the paths that press them. Paths (where not fixed),
    hesitation (0, 0.2 or 0.4) and loading screens vary.
    """
    specs: list[RunSpec] = []
    rng = np.random.default_rng(2026)

    def add(category: str, variant: str, n: int, **kw: Any) -> None:
        for _ in range(n * scale):
            kw2 = dict(kw)
            kw2.setdefault("hesitation", float(rng.choice([0.0, 0.2, 0.4])))
            kw2.setdefault("path", str(rng.choice(PATHS)))
            if kw2.get("max_steps") == "draw":
                kw2["max_steps"] = int(rng.integers(5, 9))
            i = len(specs)
            specs.append(RunSpec(f"{category}{i:03d}", category, _loading(config, i),
                                 seed=1000 * i, variant=variant, **kw2))

    add("correct", "shortcut", 35, path="shortcut")
    add("correct", "menu", 20, path="menu")
    add("correct", "enter", 15, path="enter")
    add("correct", "mistakes corrected", 15, mistakes=0.3)
    add("correct", "theme swap (simulated)", 15, theme_swap=True)
    for bug in BUGS:
        if bug not in _MISSED_BUGS:
            # The menus avoid a broken shortcut: such bugs run on the paths that press it.
            kw: dict[str, Any] = ({"path": str(rng.choice(["shortcut", "enter"]))}
                                  if bug in _SHORTCUT_BUGS else {})
            add("product_bug", bug, 10, bug=bug, **kw)
    add("agent_issue", "gives up (Fail)", 10, give_up=1.0)
    add("agent_issue", "runs out of steps (budget 5-8)", 5, max_steps="draw")
    add("agent_issue", "mistakes, then gives up", 5, give_up=1.0, mistakes=0.3)
    add("false_success", "premature Done", 5, give_up=1.0)
    add("false_success", "typo left, Done", 5, mistakes=0.6)
    add("missed_bug", "results_blank", 10, bug="results_blank")
    for _ in range(10):
        add("missed_bug", "open_skips_dialog", 1, bug="open_skips_dialog",
            path=str(rng.choice(["shortcut", "enter"])))
    return specs


# -- scoring ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metrics:
    """A binary confusion matrix with "positive" = "the run is wrong" (flagged).

    Attributes:
        tp: Wrong runs flagged.
        fp: Right runs flagged.
        fn: Wrong runs not flagged.
        tn: Right runs not flagged.
    """

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        """Runs counted."""
        return self.tp + self.fp + self.fn + self.tn

    @staticmethod
    def _ratio(a: int, b: int) -> float:
        return a / b if b else math.nan

    @property
    def accuracy(self) -> float:
        """(tp + tn) / n."""
        return self._ratio(self.tp + self.tn, self.n)

    @property
    def precision(self) -> float:
        """tp / (tp + fp); NaN when nothing is flagged."""
        return self._ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        """tp / (tp + fn)."""
        return self._ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        """F1 of the positive class ("wrong"); 0 when tp = 0."""
        return self._ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    @property
    def f1_negative(self) -> float:
        """F1 of the negative class ("not a bug", as the paper also reports)."""
        return self._ratio(2 * self.tn, 2 * self.tn + self.fp + self.fn)


def metrics(labels: Sequence[bool], flagged: Sequence[bool]) -> Metrics:
    """The confusion counts of ``flagged`` against ``labels`` (True = wrong).

    Example:
        >>> m = metrics([True, True, False, False], [True, False, False, True])
        >>> (m.tp, m.fp, m.fn, m.tn), m.accuracy, m.f1
        ((1, 1, 1, 1), 0.5, 0.5)
    """
    if len(labels) != len(flagged):
        raise ValueError(f"{len(labels)} labels but {len(flagged)} decisions")
    pairs = list(zip(labels, flagged, strict=True))
    return Metrics(tp=sum(w and f for w, f in pairs), fp=sum(f and not w for w, f in pairs),
                   fn=sum(w and not f for w, f in pairs),
                   tn=sum(not w and not f for w, f in pairs))


def validator_flags(reports: Sequence[ValidationReport]) -> list[bool]:
    """The validator flags a run as wrong when it FAILS."""
    return [not r.passed for r in reports]


def self_report_flags(runs: Sequence[Run]) -> list[bool]:
    """The self-report flags a run as wrong when the agent did not end with Done."""
    return [not r.claimed_success for r in runs]


# -- running the validator -------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One way to run the validator in the study.

    Attributes:
        name: Row label.
        a11y: Decide non-SAME pixel pairs by the accessibility text.
        tier2: ``"simulated"`` (:class:`~cua_rl.validator.semantic.SimulatedComparer`, labels
            from the accessibility text: a stand-in for a multimodal model, never a model's
            answers) or None.
        error_rate: Share of tier-2 answers the simulated comparer flips.
        motion: Motion search (``Tier1Config.max_shift``) as large as the window jitter.
        tier2_on_different: Also ask tier 2 about pairs the pixels call DIFFERENT.
        ignore: More accessibility nodes to ignore (regular expressions, e.g. ``^icon\\b``
            for desktop icons): in the a11y key and in the simulated comparer's labels (a
            model told to ignore them).
        a11y_min_lines: Shortest accessibility key that is trusted.
    """

    name: str
    a11y: bool = False
    tier2: str | None = "simulated"
    error_rate: float = 0.0
    motion: bool = True
    tier2_on_different: bool = False
    ignore: tuple[str, ...] = ()
    a11y_min_lines: int = 3

    def validator_config(self, desk: SimDeskConfig) -> ValidatorConfig:
        """The validator configuration for runs recorded with ``desk``."""
        tier1 = Tier1Config()
        if self.motion and desk.jitter:
            scale = min(1.0, tier1.work_width / desk.width)
            tier1 = dataclasses.replace(tier1, max_shift=min(64, math.ceil(desk.jitter * scale)))
        return ValidatorConfig(equivalence=EquivalenceConfig(
            tier1=tier1, use_a11y=self.a11y, tier2_on_different=self.tier2_on_different,
            a11y_ignore=(*SIMDESK_A11Y_IGNORE, *self.ignore), a11y_min_lines=self.a11y_min_lines))


@dataclass(frozen=True)
class Evaluation:
    """The validator under one condition on one test set.

    Attributes:
        condition: The condition.
        reports: One report per test run (empty when learning failed).
        learn_error: Why learning failed, or None.
        learn_s: Seconds to learn.
        validate_s: Seconds to validate every test run.
        tier2_calls: Pairs that reached the (simulated) tier-2 comparer.
        essential: Essential states of the reference.
        states: States of the reference.
    """

    condition: Condition
    reports: tuple[ValidationReport, ...]
    learn_error: str | None
    learn_s: float
    validate_s: float
    tier2_calls: int
    essential: int
    states: int

    def flags(self, n: int) -> list[bool]:
        """FAIL per run; every run flagged when learning failed (nothing can pass)."""
        return validator_flags(self.reports) if self.reports else [True] * n


def evaluate(condition: Condition, train: Sequence[Run], test: Sequence[Run]) -> Evaluation:
    """Learn from ``train`` and validate ``test`` under ``condition``."""
    semantic = None
    if condition.tier2 == "simulated":
        ignore = (*SIMDESK_A11Y_IGNORE, *condition.ignore)
        oracle = SimulatedComparer.from_traces([r.trace for r in (*train, *test)],
                                               lambda text: a11y_key(text, ignore),
                                               error_rate=condition.error_rate, seed=7)
        semantic = CachedComparer(oracle)
    elif condition.tier2 is not None:
        raise ConfigError(f"Condition.tier2 must be 'simulated' or None, got {condition.tier2!r}")
    config = condition.validator_config(train[0].spec.config)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ValidatorWarning)
            model = ReferenceModel.learn([r.trace for r in train], config, semantic=semantic)
    except TraceFormatError as error:
        return Evaluation(condition, (), str(error), time.perf_counter() - t0, 0.0,
                          semantic.calls if semantic else 0, 0, 0)
    t1 = time.perf_counter()
    reports = tuple(model.validate_many([r.trace for r in test]))
    t2 = time.perf_counter()
    return Evaluation(condition, reports, None, t1 - t0, t2 - t1,
                      semantic.calls if semantic else 0, len(model.essential), len(model.states))
