"""StepLatency and LatencyModel: the draws follow the model, stragglers are a share of envs, the
wrapper sleeps what it reports, ``env.step_latency`` is read strictly and applied by make_env."""

from __future__ import annotations

import math
import re
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from cua_rl.envs.config import EnvConfig
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.latency import X11_MEASURED, LatencyModel, StepLatency, draw_latency
from cua_rl.envs.make import make_env
from cua_rl.errors import ConfigError
from cua_rl.training.config import TrainConfig, config_hash, load_config

ROOT = Path(__file__).resolve().parents[2]
Z90 = statistics.NormalDist().inv_cdf(0.9)


class Nothing(gym.Env[int, int]):
    """An instant env: one observation, every step the same."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: int) -> Any:
        return 0, 0.0, False, False, {}


class Recorder:
    """A sleep function that records what it was asked to sleep."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_draws_follow_the_lognormal_of_the_model() -> None:
    model = LatencyModel(step_median_s=0.2, step_sigma=0.6, reset_median_s=1.5, reset_sigma=0.2)
    rng = np.random.default_rng(0)
    for reset, median, sigma in ((False, 0.2, 0.6), (True, 1.5, 0.2)):
        x = np.array([model.draw(rng, reset=reset) for _ in range(20_000)])
        assert np.median(x) == pytest.approx(median, rel=0.03)
        # the 90th percentile of a lognormal is median * exp(z90 * sigma)
        assert np.percentile(x, 90) == pytest.approx(median * math.exp(Z90 * sigma), rel=0.04)
        assert np.log(x).std() == pytest.approx(sigma, rel=0.03)


def test_a_draw_is_the_median_times_exp_sigma_z() -> None:
    z = np.random.default_rng(7).standard_normal()
    assert draw_latency(0.3, 0.5, np.random.default_rng(7)) == pytest.approx(
        0.3 * math.exp(0.5 * z)
    )
    assert draw_latency(0.3, 0.0, np.random.default_rng(7)) == 0.3


def test_a_straggler_draws_straggler_factor_times_longer() -> None:
    model = LatencyModel(straggler_factor=7.0)
    for reset in (False, True):
        slow = model.draw(np.random.default_rng(3), reset=reset, straggler=True)
        assert slow == pytest.approx(7.0 * model.draw(np.random.default_rng(3), reset=reset))


def test_the_straggler_share_is_the_share_of_envs_that_straggle() -> None:
    model = LatencyModel(straggler_share=0.1, seed=11)
    stragglers = [StepLatency(Nothing(), model, index=i).straggler for i in range(2000)]
    # binomial(2000, 0.1): standard deviation 0.0067; 4 of them is 0.027
    assert sum(stragglers) / 2000 == pytest.approx(0.1, abs=0.027)
    # env i is decided by the first uniform draw of a generator seeded seed + i
    assert stragglers == [np.random.default_rng(11 + i).random() < 0.1 for i in range(2000)]
    assert not any(StepLatency(Nothing(), LatencyModel(), index=i).straggler for i in range(50))


def test_the_wrapper_sleeps_and_reports_each_draw() -> None:
    model = LatencyModel(step_median_s=0.2, step_sigma=0.5, reset_median_s=1.0, reset_sigma=0.1,
                         straggler_share=0.5, straggler_factor=10.0, seed=4)  # fmt: skip
    sleep = Recorder()
    env = StepLatency(Nothing(), model, index=2, sleep=sleep)
    reported = [env.reset()[1]["simulated_latency_s"]]
    reported += [env.step(0)[4]["simulated_latency_s"] for _ in range(5)]
    # recomputed by hand: generator seed 4 + 2, its first uniform decides the straggler
    rng = np.random.default_rng(6)
    factor = 10.0 if rng.random() < 0.5 else 1.0
    expected = [1.0 * math.exp(0.1 * rng.standard_normal()) * factor]
    expected += [0.2 * math.exp(0.5 * rng.standard_normal()) * factor for _ in range(5)]
    assert env.straggler is (factor == 10.0)
    assert sleep.calls == pytest.approx(expected)
    assert reported == sleep.calls


def test_a_seeded_reset_repeats_the_latencies_and_keeps_the_straggler() -> None:
    model = LatencyModel(straggler_share=0.5, seed=4)
    sleep = Recorder()
    env = StepLatency(Nothing(), model, index=2, sleep=sleep)
    straggler = env.straggler
    runs = []
    for _ in range(2):
        sleep.calls.clear()
        env.reset(seed=9)
        env.step(0)
        env.step(0)
        runs.append(list(sleep.calls))
    assert runs[0] == runs[1] and env.straggler is straggler
    rng = np.random.default_rng([6, 9])  # [seed + index, the reset's seed]
    factor = 10.0 if straggler else 1.0
    expected = [model.reset_median_s * math.exp(model.reset_sigma * rng.standard_normal())]
    expected += [model.step_median_s * math.exp(model.step_sigma * rng.standard_normal())
                 for _ in range(2)]  # fmt: skip
    assert runs[0] == pytest.approx([v * factor for v in expected])


def test_scale_zero_sleeps_nothing_and_scale_halves() -> None:
    sleep = Recorder()
    env = StepLatency(Nothing(), LatencyModel(scale=0.0), sleep=sleep)
    assert env.reset()[1]["simulated_latency_s"] == 0.0
    assert env.step(0)[4]["simulated_latency_s"] == 0.0
    assert sleep.calls == []
    full, half = Recorder(), Recorder()
    for scale, rec in ((1.0, full), (0.5, half)):
        env = StepLatency(Nothing(), LatencyModel(scale=scale, seed=1), sleep=rec)
        env.reset()
        env.step(0)
    assert half.calls == pytest.approx([s / 2 for s in full.calls])


def test_straggler_can_be_forced_without_changing_the_draws() -> None:
    model = LatencyModel(straggler_share=0.0, straggler_factor=10.0, seed=2)
    plain, forced = Recorder(), Recorder()
    StepLatency(Nothing(), model, sleep=plain).step(0)
    env = StepLatency(Nothing(), model, straggler=True, sleep=forced)
    env.step(0)
    assert env.straggler and forced.calls == pytest.approx([10 * s for s in plain.calls])


def test_the_default_sleep_really_sleeps() -> None:
    env = StepLatency(Nothing(), LatencyModel(step_median_s=0.003, step_sigma=0.0))
    start = time.perf_counter()
    _, _, _, _, info = env.step(0)
    assert time.perf_counter() - start >= 0.003 and info["simulated_latency_s"] == 0.003


def test_the_wrapper_refuses_a_bad_model_or_index() -> None:
    with pytest.raises(ConfigError, match="StepLatency model must be a LatencyModel, got dict"):
        StepLatency(Nothing(), {"seed": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="StepLatency index must be an integer >= 0, got -1"):
        StepLatency(Nothing(), index=-1)


def test_the_defaults_are_the_measured_x11_body() -> None:
    assert LatencyModel() == LatencyModel.x11_measured() == LatencyModel.x11_measured(a11y=True)
    off = LatencyModel.x11_measured(a11y=False)
    assert (off.step_median_s, off.step_sigma, off.reset_median_s, off.reset_sigma) == (
        X11_MEASURED[False])  # fmt: skip
    assert off.straggler_share == 0.0 and off.straggler_factor == 10.0
    # the constants are the ones the results file states
    text = (ROOT / "benchmarks" / "results" / "step_latency.md").read_text(encoding="utf-8")
    for a11y, values in X11_MEASURED.items():
        fit = (rf"x11_measured\(a11y={a11y}\)`: step_median_s = ([\d.]+), step_sigma = ([\d.]+), "
               r"reset_median_s = ([\d.]+), reset_sigma = ([\d.]+)")  # fmt: skip
        found = re.search(fit, text)
        assert found, f"no fit of a11y={a11y} in step_latency.md"
        assert tuple(float(v) for v in found.groups()) == values


def config(env: dict[str, Any]) -> TrainConfig:
    return TrainConfig.from_dict({"env": env})


def test_step_latency_is_read_from_a_config() -> None:
    assert config({}).env.step_latency is None
    assert config({"step_latency": None}).env.step_latency is None
    assert config({"step_latency": {}}).env.step_latency == LatencyModel()
    read = config({"step_latency": {"straggler_share": 0.1, "seed": 3, "step_median_s": 1}})
    assert read.env.step_latency == LatencyModel(straggler_share=0.1, seed=3, step_median_s=1.0)
    assert TrainConfig.from_dict(read.to_dict()) == read


@pytest.mark.parametrize(
    ("latency", "message"),
    [
        (
            {"step_mediam_s": 0.1},
            r"env\.step_latency\.step_mediam_s: unknown key \(did you mean 'step_median_s'\?\)",
        ),
        ({"step_median_s": 0}, r"env\.step_latency\.step_median_s: must be a finite number > 0"),
        ({"reset_median_s": float("inf")}, r"env\.step_latency\.reset_median_s: must be a finite"),
        ({"step_sigma": -0.1}, r"env\.step_latency\.step_sigma: must be a finite number >= 0"),
        ({"reset_sigma": float("nan")}, r"env\.step_latency\.reset_sigma: must be a finite"),
        ({"straggler_share": 1.5}, r"env\.step_latency\.straggler_share: must be in \[0, 1\]"),
        (
            {"straggler_factor": 0.5},
            r"env\.step_latency\.straggler_factor: must be a finite .* >= 1",
        ),
        ({"seed": -1}, r"env\.step_latency\.seed: must be an integer >= 0, got -1"),
        ({"seed": 1.5}, r"env\.step_latency\.seed: expected an integer, got 1\.5 \(float\)"),
        ({"scale": -1}, r"env\.step_latency\.scale: must be a finite number >= 0, got -1"),
        ({"step_sigma": "wide"}, r"env\.step_latency\.step_sigma: expected a number, got 'wide'"),
        ({"straggler_share": True}, r"env\.step_latency\.straggler_share: expected a number"),
        ("x11", r"env\.step_latency: expected a mapping, got 'x11' \(str\)"),
    ],
)
def test_a_bad_step_latency_is_a_config_error_naming_the_key(latency: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config({"step_latency": latency})


#: config_hash of shipped configs before env.step_latency existed: a config that does not set it
#: must keep its hash (a checkpoint of it still resumes).
SHIPPED_HASHES = {"simdesk.yaml": "9d4adb6b4eb454a2", "osworld_local.yaml": "b6c34aa3d70408eb"}


@pytest.mark.parametrize("name", sorted(SHIPPED_HASHES))
def test_a_config_without_step_latency_keeps_its_hash(name: str) -> None:
    shipped = load_config(ROOT / "configs" / name)
    assert "step_latency" not in shipped.to_dict()["env"]
    assert config_hash(shipped) == SHIPPED_HASHES[name]
    data = shipped.to_dict()
    data["env"]["step_latency"] = {"straggler_share": 0.1}
    latent = TrainConfig.from_dict(data, base_dir=shipped.base_dir)
    assert latent.to_dict()["env"]["step_latency"]["straggler_share"] == 0.1
    assert config_hash(latent) != config_hash(shipped)


def test_make_env_wraps_each_env_with_its_own_seed() -> None:
    model = LatencyModel(straggler_share=0.5, seed=20, scale=0.0)
    env_config = EnvConfig(families=("click_ok",), screen=(320, 240), step_latency=model)
    envs = [make_env(env_config, "train", index=i) for i in range(8)]
    try:
        for i, env in enumerate(envs):
            assert isinstance(env, StepLatency) and isinstance(env.unwrapped, CUAEnv)
            assert env.model == model
            assert env.straggler == (np.random.default_rng(20 + i).random() < 0.5)
            assert env.get_wrapper_attr("screen_size") == (320, 240)
            _, info = env.reset(seed=i)
            assert info["simulated_latency_s"] == 0.0 and "task_id" in info
        assert len({env.straggler for env in envs}) == 2  # seeds 20..27 give both kinds
    finally:
        for env in envs:
            env.close()
    bare = make_env(EnvConfig(families=("click_ok",), screen=(320, 240)))
    assert isinstance(bare, CUAEnv)
    bare.close()


# the checker advises checking env.unwrapped; the wrapped env is what this test is about
@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version:UserWarning")
def test_gymnasium_checker_passes_on_the_wrapped_simdesk_env() -> None:
    model = LatencyModel(step_median_s=1e-4, reset_median_s=1e-4, straggler_share=1.0)
    env_config = EnvConfig(families=("click_ok",), screen=(320, 240), step_latency=model)
    env = make_env(env_config, render_mode="rgb_array")
    assert isinstance(env, StepLatency) and env.straggler
    try:
        gym_check_env(env, skip_render_check=True)
    finally:
        env.close()
