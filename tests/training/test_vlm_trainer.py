"""The VLM trainer end to end on SimDesk with a tiny random Qwen2-VL (CPU, offline).

The model is random, so its answers are rarely valid actions: episodes run to their step budget
and the ground truth is 0. Runs that must update therefore use the SIMULATED judge with a high
false-positive rate as the reward, which gives groups a reward spread.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402

from cua_rl.envs.score import EpisodeScorer  # noqa: E402
from cua_rl.errors import ConfigError  # noqa: E402
from cua_rl.training.config import TrainConfig, load_config  # noqa: E402
from cua_rl.training.train import train  # noqa: E402

from .conftest import tiny_simdesk_dict  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def vlm_dict(run_dir: Path, model: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    data = tiny_simdesk_dict(run_dir)
    data["policy"] = {
        "kind": "vlm",
        "vlm": {
            "model": str(model),
            "lora_r": 4,
            "lora_alpha": 8,
            "value_hidden": [16],
            "min_pixels": 28 * 28 * 4,
            "max_pixels": 28 * 28 * 4,
            "max_new_tokens": 6,
            "history_len": 2,
        },
    }
    data["ppo"] = {
        "n_envs": 2, "n_steps": 2, "batch_size": 4, "n_epochs": 1, "total_timesteps": 4,
        "learning_rate": 0.003, "vlm": {"algorithm": "ppo", "generation_batch": 2},
    }  # fmt: skip
    data["reward"] = {"primary": "judge", "judge": {"kind": "simulated", "e_neg": 0.5, "seed": 1}}
    data["eval"] = {"every": 0, "episodes": 2, "at_start": False, "at_end": True}
    for name, values in sections.items():
        merged = {**data.get(name, {}), **values}
        if name == "ppo" and "vlm" in values:
            merged["vlm"] = {**data["ppo"]["vlm"], **values["vlm"]}
        data[name] = merged
    return data


def make_config(tmp_path: Path, model: Path, **sections: dict[str, Any]) -> TrainConfig:
    return TrainConfig.from_dict(
        vlm_dict(tmp_path / "runs", model, **sections), base_dir=str(tmp_path)
    )


def trainable(policy: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def rows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# -- config --------------------------------------------------------------------------------------


def test_config_sections_of_a_vlm_run(tmp_path: Path) -> None:
    data = vlm_dict(tmp_path, Path("models/tiny"))
    config = TrainConfig.from_dict(data, base_dir=str(tmp_path))
    assert config.policy.kind == "vlm" and config.vlm_update.algorithm == "ppo"
    assert config.policy.vlm is not None and config.policy.vlm.lora_r == 4
    pc = config.policy.vlm
    assert (pc.model, pc.lora_r, pc.value_hidden) == ("models/tiny", 4, (16,))
    del data["policy"]["vlm"]
    with pytest.raises(ConfigError, match=r"policy\.vlm: is needed with kind vlm"):
        TrainConfig.from_dict(data)
    cnn = tiny_simdesk_dict(tmp_path)
    cnn["ppo"]["vlm"] = {"algorithm": "group"}
    with pytest.raises(ConfigError, match=r"ppo\.vlm: is for policy\.kind vlm"):
        TrainConfig.from_dict(cnn)
    bad = vlm_dict(tmp_path, Path("m"), ppo={"vlm": {"generation": "served"}})
    with pytest.raises(ConfigError, match=r"ppo\.vlm\.server: generation: served needs"):
        TrainConfig.from_dict(bad)
    bad = vlm_dict(tmp_path, Path("m"), ppo={"vlm": {"group_size": 1}})
    with pytest.raises(ConfigError, match=r"ppo\.vlm\.group_size: must be >= 2"):
        TrainConfig.from_dict(bad)
    bad = vlm_dict(tmp_path, Path("m"))
    bad["policy"]["vlm"]["thought_factor"] = 2.0
    with pytest.raises(ConfigError, match=r"policy\.vlm\.thought_factor: must be in \[0, 1\]"):
        TrainConfig.from_dict(bad)
    bad["policy"]["vlm"]["lora_rank"] = 2
    with pytest.raises(ConfigError, match=r"policy\.vlm\.lora_rank: unknown key"):
        TrainConfig.from_dict(bad)


def test_the_shipped_vlm_configs_load() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    for name in ("simdesk_vlm.yaml", "simdesk_vlm_group.yaml"):
        config = load_config(root / name)
        assert config.policy.kind == "vlm"
    assert load_config(root / "simdesk_vlm_group.yaml").vlm_update.algorithm == "group"


# -- end to end ----------------------------------------------------------------------------------


class _Choices:
    """A generator that answers one of fixed texts at random, with the policy's own
    teacher-forced log-probs of it: a stand-in for a model that sometimes solves the task
    (a random tiny model never writes a valid action, so its groups never differ)."""

    def __init__(self, policy: Any, answers: list[str], seed: int = 0) -> None:
        self.policy = policy
        self.answers = answers
        self.rng = np.random.default_rng(seed)
        self.synced: list[int] = []

    def generate(self, prompts: Any, *, greedy: bool = False, seed: int | None = None) -> Any:
        from cua_rl.policies.vlm.policy import Generation, parse_answer

        tok = self.policy.tokenizer
        texts = [self.answers[int(self.rng.integers(len(self.answers)))] for _ in prompts]
        ids = [(*tok.encode(t, add_special_tokens=False), tok.eos_token_id) for t in texts]
        with torch.no_grad():
            ev = self.policy.evaluate_actions(list(prompts), ids, [0] * len(ids))
        out = []
        for k, (prompt, text) in enumerate(zip(prompts, texts, strict=True)):
            action_text, action, error = parse_answer(text)
            lps = ev.token_log_probs[k, : len(ids[k])].numpy()
            out.append(Generation(prompt, text, ids[k], lps, 0, float(ev.log_prob[k]),
                                  float("nan"), action_text, action, error))  # fmt: skip
        return out

    def sync(self, policy: Any, version: int) -> None:
        self.synced.append(version)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("algorithm", ["ppo", "group"])
def test_one_iteration_end_to_end_then_resume(
    tmp_path: Path, tiny_path: Path, algorithm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """generate -> parse -> step -> judge -> reward -> update -> checkpoint -> load -> resume.

    PPO generates with the model itself (rewards from the SIMULATED judge's flips); the group
    run answers "press enter" (solves click_ok) or "WAIT" at random through :class:`_Choices`,
    rewarded by the task's own checker, so its group has a reward spread.
    """
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training import vlm_trainer
    from cua_rl.training.build import prepare_run
    from cua_rl.training.evaluate import load_policy

    extra: dict[str, Any] = {}
    if algorithm == "group":
        # one training task, on which Enter presses the dialog's OK button
        split = {"train_seed_start": 811504540, "train_seeds": 1}
        extra = {"reward": {"primary": "ground_truth"}, "env": {"split": split}}
        choices: list[_Choices] = []

        def scripted(config: Any, policy: Any, run_dir: Any) -> _Choices:
            choices.append(_Choices(policy, ["Action: pyautogui.press('enter')", "Action: WAIT"]))
            return choices[-1]

        monkeypatch.setattr(vlm_trainer, "_make_generator", scripted)
    config = make_config(tmp_path, tiny_path, ppo={"vlm": {"algorithm": algorithm}}, **extra)
    parts = prepare_run(config)
    policy = VLMPolicy(dataclasses.replace(config.policy.vlm, model=str(tiny_path)), seed=0)
    before = trainable(policy)
    result = train(config, parts=parts)
    assert result.updates_done >= 1 and result.num_timesteps >= 4
    assert result.checkpoint is not None and result.checkpoint.exists()
    assert result.stats["episodes"] >= 2
    found = rows(result.run_dir)
    update_rows = [r for r in found if "train/n_updates" in r]
    assert update_rows, found
    row = update_rows[0]
    for key in ("train/policy_loss", "train/approx_kl", "train/clip_fraction", "train/entropy",
                "time/gen_tokens_per_s", "rollout/gen_tokens", "rollout/episodes",
                "rollout/success_rate"):  # fmt: skip
        assert key in row, (key, sorted(row))
    assert row["time/gen_tokens_per_s"] > 0
    assert row["train/n_updates"] >= 1  # the batch had a reward spread
    if algorithm == "ppo":
        assert "train/value_loss" in row and "train/explained_variance" in row
        assert "reward/judge" in row and row["env/action_error_rate"] > 0
    else:
        assert row["rollout/groups"] >= 1 and row["rollout/skipped_groups"] == 0
        assert 0 < row["rollout/success_rate"] < 1
        assert choices[0].synced == [0, 1]  # at the start and after the update
    evals = [r for r in found if "eval/episodes" in r]
    assert len(evals) == 1 and evals[0]["eval/episodes"] == 2
    # the checkpoint holds the trained adapters and value head, nothing else
    trained = load_policy(result.checkpoint, config)
    after = trainable(trained.policy)
    assert set(after) == set(before)
    assert all(".lora_" in n or n.startswith("value_head.") for n in after)
    assert any(not torch.equal(after[n], before[n]) for n in after)
    # the loaded policy acts on a bare CUAEnv with its history
    report = trained.evaluate(episodes=1)
    assert report.metrics()["eval/episodes"] == 1
    # resume: one more update from the checkpoint
    resumed = train(config, resume=True, total_timesteps=result.num_timesteps + 4)
    assert resumed.resumed_from == result.checkpoint
    assert resumed.updates_done == result.updates_done + 1


def test_a_checkpoint_of_another_policy_config_is_refused(tmp_path: Path, tiny_path: Path) -> None:
    from cua_rl.training.evaluate import load_policy

    config = make_config(tmp_path, tiny_path)
    result = train(config)
    assert result.checkpoint is not None
    other = make_config(tmp_path, tiny_path, policy={"vlm": {**vlm_dict(tmp_path, tiny_path)[
        "policy"]["vlm"], "lora_r": 8}})  # fmt: skip
    with pytest.raises(ConfigError, match="config hash"):
        load_policy(result.checkpoint, other)


# -- the collector -------------------------------------------------------------------------------


class _Echo:
    """A generator that answers fixed texts (through the real policy's tokenizer), so the
    collector's bookkeeping can be checked exactly."""

    def __init__(self, policy: Any, answers: list[str]) -> None:
        self.policy = policy
        self.answers = answers
        self.calls: list[int] = []

    def generate(self, prompts: Any, *, greedy: bool = False, seed: int | None = None) -> Any:
        from cua_rl.policies.vlm.policy import Generation, parse_answer

        self.calls.append(len(prompts))
        out = []
        for k, prompt in enumerate(prompts):
            text = self.answers[(len(self.calls) + k) % len(self.answers)]
            ids = tuple(self.policy.tokenizer.encode(text, add_special_tokens=False))
            action_text, action, error = parse_answer(text)
            out.append(Generation(prompt, text, ids, np.zeros(len(ids), np.float32), 0, -1.0,
                                  float("nan"), action_text, action, error))  # fmt: skip
        return out

    def sync(self, policy: Any, version: int) -> None:
        pass

    def close(self) -> None:
        pass


def test_collector_groups_whole_episodes_and_marks_invalid_actions(
    tmp_path: Path, tiny_path: Path
) -> None:
    from cua_rl.envs.make import make_tasks
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training.rollouts import make_env_workers
    from cua_rl.training.vlm_rollouts import EpisodeCollector

    config = make_config(tmp_path, tiny_path, env={"max_steps": 3},
                         ppo={"n_envs": 3, "vlm": {"algorithm": "group"}})  # fmt: skip
    settings = dataclasses.replace(config.policy.vlm, model=str(tiny_path))
    policy = VLMPolicy(dataclasses.replace(settings, history_screenshots=1), seed=0)
    echo = _Echo(policy, ["Thought: hmm\nAction: not an action", "Action: WAIT", "Action: DONE"])
    venv = make_env_workers(config, wrap=False)
    try:
        collector = EpisodeCollector(venv, EpisodeScorer(), make_tasks(config.env, "train"),
                                     policy, echo, group_size=2, generation_batch=2,
                                     need_values=True, seed=3)  # fmt: skip
        rollout = collector.collect(min_steps=5)
    finally:
        venv.close()
    episodes: dict[Any, list[Any]] = {}
    for step in rollout.steps:
        episodes.setdefault(step.episode_id, []).append(step)
    groups: dict[Any, set[Any]] = {}
    for steps in episodes.values():
        assert [s.done for s in steps] == [False] * (len(steps) - 1) + [True]
        assert 1 <= len(steps) <= 3
        groups.setdefault(steps[0].group_id, set()).add(steps[0].task_id)
    assert all(len(tasks) == 1 for tasks in groups.values())  # a group shares its task
    sizes = [sum(1 for e in episodes.values() if e[0].group_id == g) for g in groups]
    assert sizes == [2] * len(groups)  # whole groups only
    assert rollout.n_steps == len(rollout.steps) >= 5
    assert all(n <= 2 for n in echo.calls)  # generation batches of at most 2
    assert rollout.invalid_actions >= 1
    assert len(rollout.finished) == len(episodes)
    # the learner's own values were computed for the served-style generator
    assert all(np.isfinite(s.value) for s in rollout.steps)
    # one earlier screen (history_screenshots 1) from the second step of an episode on
    for steps in episodes.values():
        assert [len(s.prompt.images) for s in steps] == [1] + [2] * (len(steps) - 1)


def test_a_worker_that_dies_loses_its_episode_with_weight_zero(
    tmp_path: Path, tiny_path: Path
) -> None:
    from cua_rl.envs.make import make_tasks
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training.rollouts import make_env_workers
    from cua_rl.training.vlm_rollouts import EpisodeCollector

    config = make_config(tmp_path, tiny_path, env={"max_steps": 3}, ppo={"n_envs": 2})
    policy = VLMPolicy(dataclasses.replace(config.policy.vlm, model=str(tiny_path)), seed=0)
    echo = _Echo(policy, ["Action: WAIT"])
    venv = make_env_workers(config, wrap=False)
    worker = venv.workers[1]
    real_step = worker.step_only
    calls = {"n": 0}

    def failing(action: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the desktop crashed")
        return real_step(action)

    worker.step_only = failing  # type: ignore[method-assign]
    try:
        collector = EpisodeCollector(venv, EpisodeScorer(), make_tasks(config.env, "train"),
                                     policy, echo, seed=0)  # fmt: skip
        rollout = collector.collect(min_steps=6)
    finally:
        venv.close()
    lost = [f for f in rollout.finished if f["reward"] is None]
    assert len(lost) == 1 and "the desktop crashed" in lost[0]["unscorable_reason"]
    assert venv.restarts == [0, 1]
    weights = {s.episode_id: s.weight for s in rollout.steps}
    assert sorted(weights.values())[0] == 0.0 and sum(w == 0.0 for w in weights.values()) == 1
    assert all(f["reward"] == 0.0 for f in rollout.finished if f["reward"] is not None)


def test_the_agent_keeps_one_history_per_episode(tiny_path: Path) -> None:
    from cua_rl.policies.vlm.config import VLMPolicyConfig
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training.vlm_trainer import VLMAgent

    policy = VLMPolicy(VLMPolicyConfig(str(tiny_path), lora_r=4, lora_alpha=8, value_hidden=(16,),
                                       min_pixels=3136, max_pixels=3136, max_new_tokens=4))
    echo = _Echo(policy, ["Action: WAIT", "Action: pyautogui.click(3, 4)"])
    agent = VLMAgent(policy, echo)
    obs = {"instruction": "Do it.", "screenshot": np.zeros((56, 56, 3), np.uint8)}
    agent.begin_episode()
    first = [agent(obs), agent(obs)]
    assert agent.history == first and set(first) == {"WAIT", "pyautogui.click(3, 4)"}
    agent.begin_episode()
    assert agent.history == []


def test_served_generation_end_to_end_pushes_the_adapter(tmp_path: Path, tiny_path: Path) -> None:
    """A run whose actions come from a vLLM-style server over real HTTP: the starting adapter
    is pushed before the first rollout and the trained one after the update; the learner's
    recomputed log-probs are what the update uses."""
    from cua_rl.testing.vlm_server import VLLMTestServer

    with VLLMTestServer(tiny_path, served_name="tiny") as server:
        config = make_config(tmp_path, tiny_path, ppo={"vlm": {
            "generation": "served", "server": {"base_url": server.url, "model": "tiny",
                                               "timeout_s": 30.0}}})  # fmt: skip
        result = train(config)
        requests = server.requests
    assert result.updates_done == 1
    adapters = sorted(p.name for p in (result.run_dir / "adapters").iterdir())
    assert adapters == ["cua-rl-v1"]  # v0 was replaced by v1 and deleted
    row = next(r for r in rows(result.run_dir) if "train/n_updates" in r)
    assert row["rollout/gen_tokens"] > 0 and row["time/gen_tokens_per_s"] > 0
    # recomputed old log-probs: the first minibatch's ratio is 1, nothing is clipped
    assert row["train/clip_fraction"] == 0.0
    assert requests >= result.num_timesteps  # one chat request per step (plus evaluation)


@pytest.mark.parametrize(
    "vec_env", ["subproc", pytest.param("ray", marks=pytest.mark.ray)]
)
def test_rollouts_through_process_and_ray_workers_survive_a_killed_worker(
    tmp_path: Path, tiny_path: Path, vec_env: str
) -> None:
    """The same collector over worker processes / Ray actors: a worker SIGKILLed mid-episode
    is replaced, its episode is lost (weight 0, never a score), the others are whole."""
    import signal

    from cua_rl.envs.make import make_tasks
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training.rollouts import make_env_workers
    from cua_rl.training.vlm_rollouts import EpisodeCollector

    ray_cfg = {"num_cpus": 2, "object_store_mb": 80, "step_timeout_s": 60.0}
    config = make_config(tmp_path, tiny_path, env={"max_steps": 3},
                         ppo={"n_envs": 2, "vec_env": vec_env, "ray": ray_cfg})  # fmt: skip
    policy = VLMPolicy(dataclasses.replace(config.policy.vlm, model=str(tiny_path)), seed=0)
    venv = make_env_workers(config, wrap=False)

    class Killer(_Echo):
        def generate(self, prompts: Any, **kwargs: Any) -> Any:
            if len(self.calls) == 1:  # second generation: env 1 is mid-episode
                os.kill(venv.worker_pids()[1], signal.SIGKILL)
            return super().generate(prompts, **kwargs)

    try:
        collector = EpisodeCollector(venv, EpisodeScorer(), make_tasks(config.env, "train"),
                                     policy, Killer(policy, ["Action: WAIT"]), seed=0)  # fmt: skip
        rollout = collector.collect(min_steps=8)
        restarts = list(venv.restarts)
    finally:
        venv.close()
    lost = [f for f in rollout.finished if f["reward"] is None]
    assert len(lost) == 1 and "died" in lost[0]["unscorable_reason"], rollout.finished
    assert restarts == [0, 1]
    scored = [f for f in rollout.finished if f["reward"] is not None]
    assert scored and all(f["length"] == 3 for f in scored)
    weights = {s.episode_id: s.weight for s in rollout.steps}
    assert sum(w == 0.0 for w in weights.values()) == 1


def test_cli_trains_and_evaluates_a_vlm_run(
    tmp_path: Path, tiny_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from cua_rl.cli import main

    data = vlm_dict(Path("runs"), tiny_path, eval={"at_end": False})
    data["logging"]["dir"] = "runs"
    file = tmp_path / "vlm.yaml"
    file.write_text(yaml.safe_dump(data))
    assert main(["train", str(file)]) == 0
    run_dir = tmp_path / "runs" / "run"
    assert (run_dir / "checkpoints").is_dir()
    capsys.readouterr()
    out = str(tmp_path / "e.json")
    code = main(["evaluate", "--config", str(file), "--checkpoint", str(run_dir),
                 "--episodes", "2", "--no-judge", "--json-out", out])  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["episodes"] == 2 and report["success"]["n"] == 2
    assert report["checkpoint"].endswith("ckpt_000001.pt")


def test_the_validator_filter_drops_episodes_of_a_vlm_run(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollout filter works for the VLM trainer as for the compact policy: a reference
    model learned from two passing episodes of the task keeps the episodes that press Enter
    on the dialog and drops (weight 0) those that only wait."""
    from cua_rl.envs.make import make_env
    from cua_rl.training import vlm_trainer
    from cua_rl.validator import EquivalenceConfig, ReferenceModel, Trace, ValidatorConfig

    split = {"train_seed_start": 811504540, "train_seeds": 1}
    plain = make_config(tmp_path, tiny_path, env={"split": split})
    env = make_env(plain.env)
    traces = []
    for _ in range(2):
        env.reset()
        env.step("pyautogui.press('enter')")
        *_, info = env.step("WAIT")
        assert info["episode_end"].ground_truth == 1.0
        traces.append(Trace.from_trajectory(info["episode_end"].trajectory))
    env.close()
    cfg = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False))
    ReferenceModel.learn(traces, cfg).save(tmp_path / "ref")

    made: list[_Choices] = []

    def scripted(config: Any, policy: Any, run_dir: Any) -> _Choices:
        made.append(_Choices(policy, ["Action: pyautogui.press('enter')", "Action: WAIT"], 3))
        return made[-1]

    monkeypatch.setattr(vlm_trainer, "_make_generator", scripted)
    reward = {"primary": "ground_truth", "filter": {"mode": "drop"},
              "reference_models": {"click_ok": "ref"}}  # fmt: skip
    config = make_config(tmp_path, tiny_path, env={"split": split}, reward=reward,
                         ppo={"total_timesteps": 8}, eval={"at_end": False})  # fmt: skip
    result = train(config)
    found = [r for r in rows(result.run_dir) if "rollout/episodes" in r]
    episodes = sum(r["rollout/episodes"] for r in found)
    dropped = result.stats["dropped"]
    assert episodes == result.stats["episodes"] >= 4
    assert 0 < dropped < episodes  # the waiting episodes, not the solving ones
    successes = sum(r["rollout/success_rate"] * r["rollout/episodes"] for r in found)
    assert dropped == episodes - round(successes)
    assert all(r["rollout/filter_failed"] >= 1 for r in found[-1:])
