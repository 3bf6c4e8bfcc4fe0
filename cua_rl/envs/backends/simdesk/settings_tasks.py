"""Settings task families: ``settings_toggle``, ``settings_dropdown``, ``settings_multi`` and
``settings_rename_device``.

Every family randomises the initial applied settings at set-up (seeded), forces each target
setting to start at a different value, and checks the applied model: ``desk.state["settings"]``
must equal the initial settings with exactly the targets changed, and no Keep/Revert question
may be pending. The expert plan (:func:`settings_plan`) is shared: it reads the Settings window
and drives every control toward the target (or back to what the app shows as applied for the
others), then clicks Apply and answers the display dialog.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.actions import Action
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.family import Params, TaskFamily, no_vocabulary, param_error, pick
from cua_rl.envs.backends.simdesk.fs import WORDS
from cua_rl.envs.backends.simdesk.settings import (
    APP,
    BY_KEY,
    BY_LABEL,
    CATEGORIES,
    SETTINGS,
    Setting,
    SettingsApp,
    Value,
    init_settings,
)
from cua_rl.envs.backends.simdesk.widgets import Checkbox, Dropdown
from cua_rl.errors import TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["APPS", "FAMILIES", "parse_changes", "settings_check", "settings_plan"]

_BOOLS = tuple(s for s in SETTINGS if s.kind in ("switch", "checkbox"))
_CHOICES = tuple(s for s in SETTINGS if s.kind == "choice")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,23}")
_MULTI_MIN = 6


def _bool(state: str) -> bool:
    return state == "on"


def _other(desk: Desktop, s: Setting, target: Value) -> Value:
    """A value of ``s`` other than ``target``, drawn from the desktop's generator."""
    if isinstance(target, bool):
        return not target
    if s.kind == "text":
        return pick(desk.rng, [n for n in _DEVICE_NAMES if n != target])
    return pick(desk.rng, [o for o in s.options if o != target])


def _setup(desk: Desktop, targets: dict[str, Value]) -> None:
    """Random initial settings (about half at their default), each target forced elsewhere."""
    values: dict[str, Value] = {}
    for s in SETTINGS:
        if desk.rng.random() < 0.5:
            continue
        if s.kind in ("switch", "checkbox"):
            values[s.key] = bool(desk.rng.random() < 0.5)
        elif s.kind == "choice":
            values[s.key] = pick(desk.rng, s.options)
        else:
            values[s.key] = pick(desk.rng, _DEVICE_NAMES)
    for key, target in targets.items():
        values[key] = _other(desk, BY_KEY[key], target)
    init_settings(desk, values)


def settings_check(desk: Desktop, targets: dict[str, Value]) -> bool:
    """Whether the applied settings are the initial ones with exactly ``targets`` changed and
    no Keep/Revert question is pending."""
    applied, initial = desk.state.get("settings"), desk.state.get("settings_initial")
    if applied is None or initial is None or desk.state.get("settings_unconfirmed"):
        return False
    return bool(applied == {**initial, **targets})


def _control_action(ops: Ops, app: SettingsApp, key: str, want: Value) -> Action:
    """The next action that moves the control of ``key`` toward ``want``."""
    s, win = BY_KEY[key], app.main
    if app.category != s.category:
        names = [c for c, _ in CATEGORIES]
        r = app.categories.row_rect(names.index(s.category))
        return ops.click_widget(win, app.categories) if r is None else ops.click_rect(win, r)
    ctl = app.controls[key]
    if isinstance(ctl, Checkbox):
        return ops.click_widget(win, ctl)
    if isinstance(ctl, Dropdown):
        if ctl.open:
            return ops.click_rect(win, ctl.item_rect(ctl.options.index(str(want))))
        return ops.click_widget(win, ctl)
    return ops.type_into(win, ctl, str(want))


def settings_plan(ops: Ops, targets: dict[str, Value]) -> Action | None:
    """Next action toward applied ``targets`` (None once the app shows them applied).

    Launches Settings, answers the Keep/Revert dialog (Keep if every setting in question is a
    target, else Revert), sets each target control (target pages in list order) and puts any
    other changed control back, then clicks Apply.
    """
    app, act = ops.app_or_launch(SettingsApp)  # a single instance
    if app is None:
        return act
    d = app.confirm_dialog
    if d is not None:
        ok = all(targets.get(k) == app.shown(k) for k in app.unconfirmed)
        btn = app.keep_button if ok else app.revert_button
        assert btn is not None
        return ops.click_widget(d, btn)
    order = sorted(targets, key=lambda k: [c for c, _ in CATEGORIES].index(BY_KEY[k].category))
    for key in order:
        if app.shown(key) != targets[key]:
            return _control_action(ops, app, key, targets[key])
    for key in app.pending():
        if key not in targets:
            return _control_action(ops, app, key, app.baseline[key])
    if app.pending():
        return ops.click_widget(app.main, app.apply_button)
    return None


def _check_choice(family: str, field: str, label: str, allowed: tuple[Setting, ...]) -> Setting:
    s = BY_LABEL.get(label)
    if s is None or s not in allowed:
        raise param_error(family, field, f"one of {[a.label for a in allowed]}", label)
    return s


def _settings_family(
    *, name: str, description: str, params: dict[str, type],
    sample_params: Callable[[np.random.Generator], dict[str, Any]], templates: tuple[str, ...],
    targets: Callable[[Params], dict[str, Value]], min_steps: int,
    validate: Callable[[Params], None],
    vocabulary_fn: Callable[[Params], tuple[str, ...]] = no_vocabulary,
) -> TaskFamily:
    """A Settings family whose set-up (:func:`_setup`), checker (:func:`settings_check`) and
    plan (:func:`settings_plan`) all work toward the settings ``targets(params)``."""
    return TaskFamily(
        name=name, description=description, app="settings", params=params,
        sample_params=sample_params, templates=templates,
        setup=lambda desk, p: _setup(desk, targets(p)),
        check=lambda desk, p: settings_check(desk, targets(p)),
        plan=lambda ops, p: settings_plan(ops, targets(p)),
        min_steps=min_steps, vocabulary_fn=vocabulary_fn, validate=validate,
    )


# -- settings_toggle ---------------------------------------------------------------------------
def _toggle_targets(p: Params) -> dict[str, Value]:
    return {BY_LABEL[p["setting"]].key: _bool(p["state"])}


def _toggle_validate(p: Params) -> None:
    _check_choice("settings_toggle", "setting", p["setting"], _BOOLS)
    if p["state"] not in ("on", "off"):
        raise param_error("settings_toggle", "state", "'on' or 'off'", p["state"])


SETTINGS_TOGGLE = _settings_family(
    name="settings_toggle",
    description="Turn one switch or checkbox of the Settings app on or off and apply it.",
    params={"setting": str, "state": str},
    sample_params=lambda rng: {"setting": pick(rng, _BOOLS).label,
                               "state": pick(rng, ("on", "off"))},
    templates=("Open Settings, turn {state} '{setting}' and apply the change.",
               "In the Settings app, switch {setting} {state}, then click Apply.",
               "Use Settings to turn {state} {setting}; make sure the change is applied."),
    targets=_toggle_targets,
    min_steps=3,
    validate=_toggle_validate,
)


# -- settings_dropdown -------------------------------------------------------------------------
def _dropdown_sample(rng: np.random.Generator) -> dict[str, Any]:
    confirm = tuple(s for s in _CHOICES if s.confirm)
    s = pick(rng, confirm if rng.random() < 0.4 else _CHOICES)
    return {"setting": s.label, "value": pick(rng, s.options)}


def _dropdown_validate(p: Params) -> None:
    s = _check_choice("settings_dropdown", "setting", p["setting"], _CHOICES)
    if p["value"] not in s.options:
        raise param_error("settings_dropdown", "value", f"one of {list(s.options)} for {s.label!r}",
                          p["value"])


def _dropdown_targets(p: Params) -> dict[str, Value]:
    return {BY_LABEL[p["setting"]].key: p["value"]}


SETTINGS_DROPDOWN = _settings_family(
    name="settings_dropdown",
    description="Choose a value in one drop-down of the Settings app, apply it and keep it "
                "when the display settings ask for confirmation.",
    params={"setting": str, "value": str},
    sample_params=_dropdown_sample,
    templates=("Open Settings and set {setting} to {value}, then apply it.",
               "In Settings, change '{setting}' to '{value}' and apply (keep the change if "
               "asked).",
               "Set the {setting} setting to {value} in the Settings app and click Apply."),
    targets=_dropdown_targets,
    min_steps=4,
    validate=_dropdown_validate,
)


# -- settings_multi ----------------------------------------------------------------------------
def parse_changes(changes: str) -> list[tuple[Setting, Value]]:
    """Parse ``"Label: value; Label: value"`` (``on``/``off`` for switches and checkboxes).

    >>> [(s.key, v) for s, v in parse_changes("Theme: Dark; Wi-Fi: off")]
    [('theme', 'Dark'), ('wifi', False)]

    Raises:
        TaskSpecError: an unknown label, a bad value or a malformed item (naming ``changes``).
    """
    out: list[tuple[Setting, Value]] = []
    for item in changes.split(";"):
        label, sep, raw = (x.strip() for x in item.partition(":"))
        s = BY_LABEL.get(label)
        if not sep or s is None or s.kind == "text":
            raise TaskSpecError(f"family 'settings_multi': param 'changes' item {item.strip()!r} "
                                f"must be 'Label: value' with a label among "
                                f"{[x.label for x in (*_BOOLS, *_CHOICES)]}")
        allowed = ("on", "off") if s.kind != "choice" else s.options
        if raw not in allowed:
            raise TaskSpecError(f"family 'settings_multi': param 'changes' gives {label!r} the "
                                f"value {raw!r}; allowed: {list(allowed)}")
        out.append((s, _bool(raw) if s.kind != "choice" else raw))
    return out


def _multi_steps(items: list[tuple[Setting, Value]]) -> int:
    """Fewest actions: launch, page switches, one click per switch or two per drop-down,
    Apply, and Keep when a display setting is confirmed."""
    first = CATEGORIES[0][0]
    return (2 + sum(s.category != first for s, _ in items)
            + sum(2 if s.kind == "choice" else 1 for s, _ in items)
            + any(s.confirm for s, _ in items))


def _multi_validate(p: Params) -> None:
    items = parse_changes(p["changes"])
    cats = [s.category for s, _ in items]
    if not 2 <= len(items) <= 3 or len(set(cats)) != len(cats):
        raise TaskSpecError(f"family 'settings_multi': param 'changes' must name 2-3 settings "
                            f"on different pages, got {p['changes']!r}")
    if _multi_steps(items) < _MULTI_MIN:
        raise TaskSpecError(f"family 'settings_multi': param 'changes' {p['changes']!r} takes "
                            f"{_multi_steps(items)} steps, at least {_MULTI_MIN} required (add "
                            f"a setting, a drop-down or one outside {CATEGORIES[0][0]})")


def _multi_sample(rng: np.random.Generator) -> dict[str, Any]:
    while True:
        cats = [CATEGORIES[int(i)][0] for i in rng.permutation(len(CATEGORIES))]
        items: list[tuple[Setting, Value]] = []
        for cat in cats[: int(rng.integers(2, 4))]:
            s = pick(rng, tuple(x for x in (*_BOOLS, *_CHOICES) if x.category == cat))
            items.append((s, pick(rng, s.options) if s.kind == "choice"
                          else bool(rng.random() < 0.5)))
        if _multi_steps(items) >= _MULTI_MIN:
            return {"changes": "; ".join(f"{s.label}: {s.show(v)}" for s, v in items)}


def _multi_targets(p: Params) -> dict[str, Value]:
    return {s.key: v for s, v in parse_changes(p["changes"])}


SETTINGS_MULTI = _settings_family(
    name="settings_multi",
    description="Change 2-3 settings on different pages of the Settings app, then apply them.",
    params={"changes": str},
    sample_params=_multi_sample,
    templates=("In Settings, make these changes and apply them: {changes}.",
               "Open the Settings app and configure the following, then click Apply: "
               "{changes}.",
               "Change these settings and apply (keep display changes if asked): {changes}."),
    targets=_multi_targets,
    min_steps=_MULTI_MIN,
    validate=_multi_validate,
)


# -- settings_rename_device --------------------------------------------------------------------
_DEVICE_NAMES = ("simdesk-pc", "office-laptop", "home-desktop", "work-station", "dev-box")


def _rename_sample(rng: np.random.Generator) -> dict[str, Any]:
    suffix = pick(rng, ("pc", "laptop", "desktop", "tablet"))
    return {"name": f"{pick(rng, WORDS)}-{suffix}"}


def _rename_validate(p: Params) -> None:
    if not _NAME_RE.fullmatch(p["name"]):
        raise param_error("settings_rename_device", "name",
                          "1-24 letters, digits or '-' (not first)", p["name"])


SETTINGS_RENAME_DEVICE = _settings_family(
    name="settings_rename_device",
    description="Type a new device name on the System page of Settings and apply it.",
    params={"name": str},
    sample_params=_rename_sample,
    templates=("Rename this computer to '{name}' in Settings and apply the change.",
               "Open Settings, go to System and set the device name to {name}, then click "
               "Apply.",
               "Change the device name to \"{name}\" using the Settings app."),
    targets=lambda p: {"device_name": p["name"]},
    vocabulary_fn=lambda p: (p["name"],),
    min_steps=6,
    validate=_rename_validate,
)

APPS: tuple[AppSpec, ...] = (APP,)
FAMILIES: tuple[TaskFamily, ...] = (SETTINGS_TOGGLE, SETTINGS_DROPDOWN, SETTINGS_MULTI,
                                    SETTINGS_RENAME_DEVICE)
