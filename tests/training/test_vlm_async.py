"""Asynchronous VLM rollouts (``ppo.vlm.max_policy_lag`` > 0) on SimDesk with a tiny random
Qwen2-VL (CPU, offline): per-env stepping, the batcher, the lag bound's bookkeeping, failures,
checkpoints. The update's correction is tested in test_vlm_offpolicy.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402

from cua_rl.envs.score import EpisodeScorer  # noqa: E402
from cua_rl.training.batcher import Batcher  # noqa: E402
from cua_rl.training.envs import EnvFactory  # noqa: E402
from cua_rl.training.train import train  # noqa: E402
from cua_rl.training.vlm_async import AsyncCollector  # noqa: E402
from cua_rl.training.vlm_trainer import VLMLearner  # noqa: E402
from cua_rl.training.workers import InProcessVecEnv, ProcessVecEnv  # noqa: E402

from .test_vlm_trainer import _Echo, make_config, rows  # noqa: E402


class _Hang(gym.Wrapper):  # type: ignore[type-arg]
    """Hangs at its ``at``-th step, once over every worker (``marker`` is created then), in
    the worker's own process."""

    def __init__(self, env: gym.Env[Any, Any], at: int, marker: Path) -> None:
        super().__init__(env)
        self.at, self.marker, self.n = at, marker, 0

    def step(self, action: Any) -> Any:
        self.n += 1
        if self.n == self.at and not self.marker.exists():
            self.marker.touch()
            threading.Event().wait()  # a desktop that stopped answering (killed with it)
        return self.env.step(action)


class _HangingFactory:
    def __init__(self, inner: EnvFactory, at: int, marker: Path) -> None:
        self.inner, self.at, self.marker = inner, at, marker

    def __call__(self) -> gym.Env[Any, Any]:
        return _Hang(self.inner(), self.at, self.marker)


def _policy(config: Any, tiny_path: Path) -> Any:
    import dataclasses

    from cua_rl.policies.vlm.policy import VLMPolicy

    return VLMPolicy(dataclasses.replace(config.policy.vlm, model=str(tiny_path)), seed=0)


def _collector(venv: Any, config: Any, policy: Any, generator: Any, **kwargs: Any) -> Any:
    from cua_rl.envs.make import make_tasks

    settings: dict[str, Any] = {"rollout_size": 4, "batch_window_s": 0.02, "seed": 0, **kwargs}
    return AsyncCollector(venv, EpisodeScorer(), make_tasks(config.env, "train"), policy,
                          generator, **settings)  # fmt: skip


# -- the batcher ---------------------------------------------------------------------------------


def test_the_batcher_batches_what_arrives_within_the_window_and_fails_a_batch_together() -> None:
    calls: list[list[int]] = []
    release = threading.Event()

    def double(items: list[int]) -> list[int]:
        calls.append(items)
        if -1 in items:
            raise ValueError("bad item")
        return [2 * x for x in items]

    batcher: Batcher[int, int] = Batcher(double, max_batch=3, window_s=30.0,
                                         ready=lambda n: release.is_set() or n >= 3)  # fmt: skip
    try:
        futures = [batcher.submit(x) for x in (1, 2, 3, 4)]  # 3 fill a batch at once
        assert [f.result(10) for f in futures[:3]] == [2, 4, 6]
        release.set()
        batcher.wake()  # the 4th goes without waiting out the window
        assert futures[3].result(10) == 8
        bad = [batcher.submit(x) for x in (-1, 5)]
        for future in bad:
            with pytest.raises(ValueError, match="bad item"):
                future.result(10)
    finally:
        batcher.close()
    assert calls[:2] == [[1, 2, 3], [4]]


# -- per-env stepping ----------------------------------------------------------------------------


def test_a_hung_desktop_delays_only_its_own_episode(tmp_path: Path, tiny_path: Path) -> None:
    """Env 1 stops answering at its 2nd step: env 0 goes on finishing episodes; after the
    step timeout env 1's episode is lost (unscorable, weight 0) and env 1 starts again."""
    config = make_config(tmp_path, tiny_path, env={"max_steps": 2}, ppo={"n_envs": 2})
    fns = [EnvFactory(config, "train", index=0, wrap=False),
           _HangingFactory(EnvFactory(config, "train", index=1, wrap=False), 2,
                           tmp_path / "hung")]  # fmt: skip
    venv = ProcessVecEnv(fns, step_timeout_s=2.0, reset_timeout_s=60.0)  # type: ignore[arg-type]
    policy = _policy(config, tiny_path)
    collector = _collector(venv, config, policy, _Echo(policy, ["Action: WAIT"]),
                           rollout_size=2, step_budget=16)  # fmt: skip
    finished, steps = [], []
    try:
        while rollout := collector.take(min_steps=2, version=0):  # every episode, in order
            if not rollout.finished:
                break
            finished += rollout.finished
            steps += rollout.steps
    finally:
        collector.stop()
        venv.close()
    lost = [k for k, f in enumerate(finished) if f["reward"] is None]
    assert len(lost) == 1, finished
    assert "no answer within" in str(finished[lost[0]]["unscorable_reason"])
    assert lost[0] >= 2  # env 0 finished episodes while env 1 hung
    assert venv.restarts == [0, 1]
    weights = {s.episode_id: s.weight for s in steps}
    assert sum(w == 0.0 for w in weights.values()) == 1
    assert all(f["length"] == 2 for k, f in enumerate(finished) if k not in lost)


@pytest.mark.parametrize("vec_env", ["subproc", pytest.param("ray", marks=pytest.mark.ray)])
def test_a_killed_worker_loses_its_episode_and_the_rest_go_on(
    tmp_path: Path, tiny_path: Path, vec_env: str
) -> None:
    """A worker SIGKILLed mid-episode (a process, a Ray actor): its episode is lost with
    weight 0, it is replaced, the other env's episodes are whole."""
    import os
    import signal

    from cua_rl.training.rollouts import make_env_workers

    ray_cfg = {"num_cpus": 2, "object_store_mb": 80, "step_timeout_s": 60.0}
    config = make_config(tmp_path, tiny_path, env={"max_steps": 3},
                         ppo={"n_envs": 2, "vec_env": vec_env, "ray": ray_cfg})  # fmt: skip
    venv = make_env_workers(config, wrap=False)
    policy = _policy(config, tiny_path)

    class Killer(_Echo):
        def generate(self, prompts: Any, **kwargs: Any) -> Any:
            if len(self.calls) == 1:  # second batch: both envs are mid-episode
                os.kill(venv.worker_pids()[1], signal.SIGKILL)
            return super().generate(prompts, **kwargs)

    # a window longer than the test: a batch goes when every running env waits (lock-step)
    collector = _collector(venv, config, policy, Killer(policy, ["Action: WAIT"]),
                           batch_window_s=60.0, rollout_size=8, step_budget=8)  # fmt: skip
    try:
        rollout = collector.take(min_steps=8, version=0)
    finally:
        collector.stop()
        venv.close()
    lost = [f for f in rollout.finished if f["reward"] is None]
    assert len(lost) == 1 and "died" in str(lost[0]["unscorable_reason"]), rollout.finished
    assert venv.restarts == [0, 1]
    assert all(f["length"] == 3 for f in rollout.finished if f["reward"] is not None)


def test_groups_are_handed_over_whole_and_stop_counts_what_was_not_taken(
    tmp_path: Path, tiny_path: Path
) -> None:
    config = make_config(tmp_path, tiny_path, env={"max_steps": 2}, ppo={"n_envs": 3})
    venv = InProcessVecEnv([EnvFactory(config, "train", index=i, wrap=False) for i in range(3)])
    policy = _policy(config, tiny_path)
    echo = _Echo(policy, ["Action: WAIT", "Action: pyautogui.click(1, 2)", "Action: WAIT"])
    collector = _collector(venv, config, policy, echo, group_size=2, max_policy_lag=1)
    try:
        first = collector.take(min_steps=4, version=0)
        # the collector went on while nobody took: whole groups only, in finish order
        second = collector.take(min_steps=4, version=2)  # two updates later: over the bound
    finally:
        untrained = collector.stop()
        venv.close()
    for rollout in (first, second):
        groups: dict[Any, set[Any]] = {}
        for step in rollout.steps:
            groups.setdefault(step.group_id, set()).add(step.episode_id)
        assert all(len(episodes) == 2 for episodes in groups.values()), groups
        assert rollout.n_steps >= 4
    # gen_tokens counts since the last take: the second's steps may all have been generated
    # before the first take returned (beside 4 busy processes: second.gen_tokens 0); the two
    # together hold every step's tokens, at least one per step
    assert first.gen_tokens + second.gen_tokens >= first.n_steps + second.n_steps
    assert not {s.episode_id for s in first.steps} & {s.episode_id for s in second.steps}
    # steps of version 0 trained at version 2 lag 2 > 1: left out, counted, never trained
    assert second.lagged_episodes == len(second.finished) and not second.steps
    assert second.lagged_steps == second.n_steps
    assert untrained >= 0 and collector.pending() == 0


# -- the learner -----------------------------------------------------------------------------------


def _record_updates(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Each update's trained (episode id, version) pairs."""
    seen: list[list[Any]] = []
    real = VLMLearner.update

    def update(self: VLMLearner, rollout: Any, steps: Any, *args: Any, **kwargs: Any) -> bool:
        seen.append([(s.episode_id, s.version, self.updates_done) for s in steps])
        return real(self, rollout, steps, *args, **kwargs)

    monkeypatch.setattr(VLMLearner, "update", update)
    return seen


def test_asynchronous_training_trains_every_episode_once_and_resumes(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _record_updates(monkeypatch)
    pending: list[int] = []
    real_state = VLMLearner.checkpoint_state

    def checkpoint_state(self: VLMLearner) -> Any:  # saved while the desktops are busy
        c = self.async_collector
        if c is not None and not pending:
            with c._cond:
                c._cond.wait_for(lambda: c._s.running or c._s.ready or c._s.groups, 30)
        state = real_state(self)
        pending.append(int(state["pending_episodes"]))  # type: ignore[call-overload]
        return state

    monkeypatch.setattr(VLMLearner, "checkpoint_state", checkpoint_state)
    config = make_config(tmp_path, tiny_path, env={"max_steps": 2},
                         ppo={"total_timesteps": 12, "vlm": {"max_policy_lag": 2}},
                         checkpoint={"every": 1, "keep_last": 1})  # fmt: skip
    result = train(config)
    assert result.updates_done >= 2
    per_update = [{episode for episode, _, _ in update} for update in seen]
    assert sum(map(len, per_update)) == len(set().union(*per_update))  # no episode twice
    assert all(0 <= learner - version <= 2 for u in seen for _, version, learner in u)
    found = rows(result.run_dir)
    updates = [r for r in found if "train/n_updates" in r]
    assert all("async/desktop_busy_share" in r and "async/lag_mean" in r for r in updates)
    assert all(0 <= r["async/desktop_busy_share"] <= 1 for r in updates)
    assert pending[0] > 0  # the first checkpoint was written with episodes in flight
    # resume from the last checkpoint: what it had pending is counted, the version continues
    last = torch.load(result.checkpoint, weights_only=False)
    seen.clear()
    resumed = train(config, resume=True, total_timesteps=result.num_timesteps + 8)
    assert resumed.updates_done > result.updates_done
    assert seen and min(v for u in seen for _, v, _ in u) >= result.updates_done
    before = last["stats"].get("untrained_episodes", 0) + last["pending_episodes"]
    assert resumed.stats.get("untrained_episodes", 0) >= before


def test_a_failed_adapter_load_is_counted_and_training_goes_on(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.policies.vlm.served import ServedGenerator
    from cua_rl.testing.vlm_server import VLLMTestServer

    seen = _record_updates(monkeypatch)
    with VLLMTestServer(tiny_path, served_name="tiny") as server:
        real_sync: Callable[..., None] = ServedGenerator.sync

        def sync(self: ServedGenerator, policy: Any, version: int) -> None:
            if version == 1:
                server.fail_loads = 1  # the server refuses the first trained adapter
            real_sync(self, policy, version)

        monkeypatch.setattr(ServedGenerator, "sync", sync)
        config = make_config(tmp_path, tiny_path, env={"max_steps": 2}, ppo={
            "total_timesteps": 12, "vlm": {"generation": "served", "max_policy_lag": 2,
                                            "server": {"base_url": server.url, "model": "tiny",
                                                       "timeout_s": 30.0}}})  # fmt: skip
        result = train(config)
    assert result.stats["sync_failures"] == 1 and result.updates_done >= 2
    # the episodes of update 2 (learner version 1) came from version 0: the load failed
    assert {v for _, v, learner in seen[1]} == {0}
    assert "cua-rl-v1" not in {p.name for p in (result.run_dir / "adapters").iterdir()}
