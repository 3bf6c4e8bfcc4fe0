"""The task-family extension point: :class:`TaskFamily` and helpers shared by the families
(sampling, parameter errors, set-up)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from cua_rl.envs.backends.simdesk.fs import HOME, generate_text
from cua_rl.errors import TaskSpecError

if TYPE_CHECKING:
    from cua_rl.actions import Action
    from cua_rl.envs.backends.simdesk.desktop import Desktop
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["Params", "Plan", "TaskFamily", "no_vocabulary", "param_error", "pick", "populate_home"]

T = TypeVar("T")
Params = Mapping[str, Any]
Plan = Callable[["Ops", Params], "Action | None"]
"""An expert plan: the next action toward the goal given the live desktop (through ``Ops``), or
None when the goal is visibly reached. It must be reactive (a function of what is on screen), so
that it re-plans after a mistake, a popup or a loading screen."""


def no_vocabulary(params: Params) -> tuple[str, ...]:
    """The vocabulary of a family whose tasks need nothing typed: ``()``."""
    return ()


@dataclass(frozen=True)
class TaskFamily:
    """A parametrised family of tasks with a checker and a scripted expert plan.

    Attributes:
        name: Registry key, e.g. ``editor_find``; the Task's domain.
        description: One sentence for docs and reports.
        app: The app (registry key) the family is about, or None for the desktop shell.
        params: Required parameters and their Python types (validated before set-up).
        sample_params: Draws parameters from a generator.
        templates: Instruction templates (ASCII, ``str.format`` over the params).
        setup: Puts the desktop in the initial state (runs with loading screens disabled).
        check: The ground-truth checker on the simulator's internal state.
        plan: The expert plan (see :data:`Plan`).
        min_steps: Fewest actions (Done excluded) an expert needs without noise.
        vocabulary_fn: Strings a compact policy would need to type (default: none).
        validate: Extra parameter checks; raise TaskSpecError naming the field.
    """

    name: str
    description: str
    app: str | None
    params: Mapping[str, type]
    sample_params: Callable[[np.random.Generator], dict[str, Any]]
    templates: tuple[str, ...]
    setup: Callable[[Desktop, Params], None]
    check: Callable[[Desktop, Params], bool]
    plan: Plan
    min_steps: int
    vocabulary_fn: Callable[[Params], tuple[str, ...]] = no_vocabulary
    validate: Callable[[Params], None] | None = None

    def instruction(self, params: Params, rng: np.random.Generator | None = None) -> str:
        """The instruction from a template picked by ``rng`` (the first one without)."""
        i = int(rng.integers(len(self.templates))) if rng is not None else 0
        text = self.templates[i].format(**params)
        if not text.isascii():
            raise TaskSpecError(f"family {self.name!r} produced a non-ASCII instruction {text!r}")
        return text

    def vocabulary(self, params: Params) -> tuple[str, ...]:
        """Strings a compact policy would need to type for these parameters."""
        return tuple(self.vocabulary_fn(params))

    def check_params(self, params: Any) -> dict[str, Any]:
        """A validated copy of ``params``; TaskSpecError naming the missing or invalid field."""
        if not isinstance(params, Mapping):
            raise TaskSpecError(
                f"family {self.name!r}: params must be a mapping, got {type(params).__name__}"
            )
        out = dict(params)
        for key, typ in self.params.items():
            if key not in out:
                raise TaskSpecError(
                    f"family {self.name!r}: missing param {key!r}; required: {sorted(self.params)}"
                )
            if not isinstance(out[key], typ):
                raise param_error(self.name, key, typ.__name__, out[key])
        unknown = sorted(set(out) - set(self.params))
        if unknown:
            raise TaskSpecError(
                f"family {self.name!r}: unknown param(s) {unknown}; allowed: {sorted(self.params)}"
            )
        if self.validate is not None:
            self.validate(out)
        return out


def pick(rng: np.random.Generator, seq: Sequence[T]) -> T:
    """An element of ``seq`` drawn uniformly with one ``rng.integers(len(seq))`` call.

    >>> pick(np.random.default_rng(0), ("a", "b", "c"))
    'c'
    """
    return seq[int(rng.integers(len(seq)))]


def param_error(family: str, key: str, must: str, got: Any) -> TaskSpecError:
    """The error for a parameter that breaks a rule, naming the family, the field and the value.

    >>> str(param_error("editor_find", "word", "a non-empty ASCII word", ""))
    "family 'editor_find': param 'word' must be a non-empty ASCII word, got ''"
    """
    return TaskSpecError(f"family {family!r}: param {key!r} must be {must}, got {got!r}")


def populate_home(
    desk: Desktop, notes_include: Mapping[str, int] | None = None, exclude: tuple[str, ...] = ()
) -> None:
    """Write notes.txt, todo.txt and report.txt (seeded text) into the home folder."""
    rng = desk.rng
    desk.fs.write(f"{HOME}/notes.txt", generate_text(rng, 8, notes_include, exclude))
    desk.fs.write(f"{HOME}/todo.txt", generate_text(rng, 5, None, exclude))
    desk.fs.write(f"{HOME}/report.txt", generate_text(rng, 10, None, exclude))
