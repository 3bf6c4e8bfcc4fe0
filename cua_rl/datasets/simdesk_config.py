"""The config of ``scripts/make_labelled_simdesk.py`` (``data/calibration/simdesk/config.yaml``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl._strict import load_yaml
from cua_rl.calibration.labelled import LabelledExample
from cua_rl.datasets.common import CALIBRATION_SEED_START, _check_int, _check_knobs, _check_rate
from cua_rl.datasets.simdesk import build_simdesk_labelled
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk import SimDeskConfig

__all__ = ["SimDeskLabelledConfig", "load_simdesk_labelled_config"]


@dataclass(frozen=True)
class SimDeskLabelledConfig:
    """How to build the held-out SimDesk labelled set (``data/calibration/simdesk/config.yaml``).

    Attributes:
        out_dir: Output folder; a relative path is relative to the config file's folder.
        families: Task families; None = every registered family.
        n_per_family: Episodes per family.
        seed: Seed of the expert noise and of which episodes get bugs.
        task_seed_start: First task seed; must be >= 2**31, above every training seed.
        bug_rate: Share of episodes run with product bugs injected.
        bugs: Bugs injected in those episodes; None = every known bug.
        last_k: Final screenshots kept per episode.
        expert: Expert noise: ``hesitation``, ``mistakes``, ``give_up`` probabilities.
        desktop: SimDeskConfig fields (``width``, ``height``, ``loading_prob``, ``popup_rate``...);
            use the training desktop's, so that the judge is calibrated on the screens it judges.
    """

    out_dir: str = "data"
    families: tuple[str, ...] | None = None
    n_per_family: int = 100
    seed: int = 0
    task_seed_start: int = CALIBRATION_SEED_START
    bug_rate: float = 0.3
    bugs: tuple[str, ...] | None = None
    last_k: int = 1
    expert: Mapping[str, float] = field(default_factory=dict)
    desktop: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, low in (("n_per_family", 1), ("seed", 0), ("last_k", 1)):
            _check_int(name, getattr(self, name), low)
        _check_int("task_seed_start", self.task_seed_start, CALIBRATION_SEED_START)
        _check_rate("bug_rate", self.bug_rate)
        if not isinstance(self.out_dir, str) or not self.out_dir:
            raise ConfigError(f"out_dir must be a non-empty path, got {self.out_dir!r}")
        for name in ("families", "bugs"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{name} must be a list of names or null, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not isinstance(self.expert, Mapping) or not isinstance(self.desktop, Mapping):
            raise ConfigError("expert and desktop must be mappings")
        object.__setattr__(self, "expert", _check_knobs(self.expert))
        self.simdesk_config()  # validates the desktop keys

    def simdesk_config(self) -> SimDeskConfig:
        """The ``desktop`` mapping as a SimDeskConfig (lists become tuples).

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        from cua_rl.envs.backends.simdesk import SimDeskConfig

        allowed = [f.name for f in dataclasses.fields(SimDeskConfig)]
        unknown = sorted(set(self.desktop) - set(allowed))
        if unknown:
            raise ConfigError(f"desktop has unknown key(s) {unknown}; allowed: {allowed}")
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in self.desktop.items()}
        if "bugs" in kwargs:
            kwargs["bugs"] = frozenset(kwargs["bugs"])
        try:
            return SimDeskConfig(**kwargs)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"desktop: {exc}") from exc

    def resolved_out_dir(self, config_file: str | os.PathLike[str] | None) -> Path:
        """``out_dir``, relative to the config file's folder when it is relative."""
        path = Path(self.out_dir)
        if path.is_absolute() or config_file is None:
            return path
        return Path(config_file).parent / path

    def build(self, out_dir: str | os.PathLike[str]) -> list[LabelledExample]:
        """Run :func:`build_simdesk_labelled` with these settings into ``out_dir``."""
        return build_simdesk_labelled(
            out_dir,
            families=self.families,
            n_per_family=self.n_per_family,
            seed=self.seed,
            config=self.simdesk_config(),
            expert_knobs=self.expert,
            bug_rate=float(self.bug_rate),
            bugs=self.bugs,
            last_k=self.last_k,
            task_seed_start=self.task_seed_start,
        )


def load_simdesk_labelled_config(path: str | os.PathLike[str]) -> SimDeskLabelledConfig:
    """Read a :class:`SimDeskLabelledConfig` from YAML, strictly (unknown keys raise).

    Raises:
        ConfigError: Naming the file and the problem.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {str(file)!r} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the config ({exc})") from None
    data = load_yaml(text, str(file))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top, got {type(data).__name__}")
    allowed = [f.name for f in dataclasses.fields(SimDeskLabelledConfig)]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{file}: unknown key(s) {unknown}; allowed: {allowed}")
    try:
        return SimDeskLabelledConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc}") from None
