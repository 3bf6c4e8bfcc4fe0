"""Signal-driven screenshot history: past screens that show nothing new leave the VLM prompt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cua_rl.actions import Hotkey, Type, Wait
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, SimDeskExpert, make_task
from cua_rl.errors import ConfigError
from cua_rl.observation.history import changed_screens
from cua_rl.observation.signals import SignalConfig, screen_delta, sketch


def _frac(a: np.ndarray, b: np.ndarray) -> float:
    cfg = SignalConfig()
    return screen_delta(sketch(a, cfg), sketch(b, cfg), cfg).changed_fraction


def test_measured_change_fractions_on_simdesk() -> None:
    """The numbers of the module docstring (1280 x 720, editor_find seed 0)."""
    backend = SimDeskBackend(SimDeskConfig(1280, 720))
    task = make_task("editor_find", seed=0)
    obs = backend.reset(task)
    expert = SimDeskExpert(backend, task)
    while not backend.desk.title().startswith("notes"):
        obs = backend.step(expert.next_action())
    clock = backend.step(Wait())
    first = backend.step(Type("z"))
    second = backend.step(Type("q"))
    find = backend.step(Hotkey(("ctrl", "f")))
    shots = [obs.screenshot, clock.screenshot, first.screenshot, second.screenshot,
             find.screenshot]
    fr = [_frac(a, b) for a, b in zip(shots[:-1], shots[1:], strict=True)]
    assert fr[0] < 0.0002  # the clock tick alone
    assert 0.001 < fr[2] < 0.01 and 0.001 < fr[1] < 0.01  # one typed character each
    assert fr[3] > 0.03  # the find bar
    # the screen before the Wait is dropped, every other one kept
    assert changed_screens(shots[:-1], shots[-1], 0.001) == [1, 2, 3]


def test_changed_screens_rules() -> None:
    a = np.zeros((40, 64, 3), np.uint8)
    b = a.copy()
    b[:20] = 255
    assert changed_screens([a, a, b], b, 0.0) == [0, 1, 2]  # 0 keeps everything
    assert changed_screens([a, a, b], b, 0.001) == [1]
    assert changed_screens([], b, 0.5) == []
    with pytest.raises(ConfigError, match=r"min_change must be a fraction in \[0, 1\), got 1.5"):
        changed_screens([a], b, 1.5)


def test_vlm_prompt_drops_unchanged_past_screens(tiny_path: Path) -> None:
    pytest.importorskip("torch")
    from cua_rl.policies.vlm.config import VLMPolicyConfig
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.testing.tiny_qwen import TINY_POLICY

    def make(**kw):
        cfg = {**TINY_POLICY, "max_pixels": 28 * 28 * 16, "max_new_tokens": 10,
               "history_screenshots": 3, **kw}
        return VLMPolicy(VLMPolicyConfig(str(tiny_path), **cfg), seed=0)

    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (120, 200, 3), dtype=np.uint8)
    y = rng.integers(0, 255, (120, 200, 3), dtype=np.uint8)
    past = [x, x, y]  # the first action changed nothing, the second changed the screen
    plain = make().build_prompt("Go.", y, ["WAIT"] * 3, past)
    sdo = make(history_min_change=0.001).build_prompt("Go.", y, ["WAIT"] * 3, past)
    assert len(plain.images) == 4
    assert len(sdo.images) == 2  # x (before the change) and the current y
    assert "before your last 1 action(s)" in sdo.user_text
    with pytest.raises(ConfigError, match="history_min_change"):
        VLMPolicyConfig(str(tiny_path), history_min_change=1.0)
