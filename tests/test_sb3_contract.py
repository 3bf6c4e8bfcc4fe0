"""The stable-baselines3 internals cua_rl.training subclasses or calls still exist.

``WeightedPPO`` / ``WeightedDictRolloutBuffer`` (training/ppo_sb3.py), ``RestartingVecEnv``
(training/rollouts.py), the callbacks and the checkpoint code use private SB3 members. SB3 is
pinned to the tested minor version in pyproject.toml; when it is bumped, these checks name
what moved. Each entry: (owner, member, where cua_rl relies on it, leading parameters in call
order or None for a data attribute).
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.buffers import DictRolloutBuffer  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from stable_baselines3.common.vec_env import (  # noqa: E402
    DummyVecEnv,
    VecEnv,
    VecEnvWrapper,
    base_vec_env,  # noqa: E402
)

PPO_SB3 = "cua_rl.training.ppo_sb3.WeightedPPO"
BUFFER = "cua_rl.training.ppo_sb3.WeightedDictRolloutBuffer"
VECENV = "cua_rl.training.rollouts.RestartingVecEnv"
CALLBACKS = "cua_rl.training.callbacks"
CHECKPOINT = "cua_rl.training.checkpoint"

METHODS: list[tuple[type, str, str, tuple[str, ...]]] = [
    # WeightedPPO.learn passes these positionally
    (PPO, "_setup_learn", PPO_SB3,
     ("total_timesteps", "callback", "reset_num_timesteps", "tb_log_name", "progress_bar")),
    (PPO, "_update_info_buffer", PPO_SB3, ("infos", "dones")),
    (PPO, "_update_learning_rate", PPO_SB3, ("optimizers",)),
    (PPO, "_update_current_progress_remaining", PPO_SB3, ("num_timesteps", "total_timesteps")),
    (PPO, "collect_rollouts", PPO_SB3, ("env", "callback", "rollout_buffer", "n_rollout_steps")),
    (PPO, "train", PPO_SB3, ()),
    (PPO, "__init__", PPO_SB3, ("policy", "env")),
    (DictRolloutBuffer, "swap_and_flatten", BUFFER, ("arr",)),
    (DictRolloutBuffer, "to_torch", BUFFER, ("array",)),
    (DictRolloutBuffer, "reset", BUFFER, ()),
    (DictRolloutBuffer, "add",
     BUFFER, ("obs", "action", "reward", "episode_start", "value", "log_prob")),
    (DictRolloutBuffer, "compute_returns_and_advantage", BUFFER, ("last_values", "dones")),
    (VecEnv, "_get_indices", VECENV, ("indices",)),
    (VecEnv, "_reset_seeds", VECENV, ()),
    (VecEnv, "_reset_options", VECENV, ()),
    (VecEnv, "__init__", VECENV, ("num_envs", "observation_space", "action_space")),
    (BaseCallback, "update_locals", CALLBACKS, ("locals_",)),
    (BaseCallback, "on_training_start", CALLBACKS, ("locals_", "globals_")),
    (BaseCallback, "_on_training_end", CALLBACKS, ()),
]

KWARGS: list[tuple[type, str, str, str]] = [
    (PPO, "__init__", "rollout_buffer_class", PPO_SB3),
]


def _where(owner: type, member: str) -> str:
    return f"stable_baselines3 {sb3.__version__}: {owner.__name__}.{member}"


def _params(func: Any) -> list[str]:
    return [p.name for p in inspect.signature(func).parameters.values() if p.name != "self"]


@pytest.mark.parametrize(("owner", "member", "user", "params"), METHODS,
                         ids=[f"{o.__name__}.{m}" for o, m, _, _ in METHODS])
def test_method_exists_with_its_parameters(owner: type, member: str, user: str,
                                           params: tuple[str, ...]) -> None:
    where = _where(owner, member)
    assert hasattr(owner, member), f"{where} is gone; {user} relies on it"
    func = getattr(owner, member)
    assert callable(func), f"{where} is no longer callable; {user} relies on it"
    got = _params(func)
    assert got[: len(params)] == list(params), (
        f"{where} now takes {got}, {user} calls it with {list(params)}"
    )


@pytest.mark.parametrize(("owner", "member", "kwarg", "user"), KWARGS)
def test_keyword_arguments(owner: type, member: str, kwarg: str, user: str) -> None:
    assert kwarg in _params(getattr(owner, member)), (
        f"{_where(owner, member)} has no '{kwarg}' argument any more; {user} passes it"
    )


class _Tiny(gym.Env[Any, Any]):
    observation_space = gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return {"x": np.zeros(2, np.float32)}, {}

    def step(self, action: Any) -> Any:
        return {"x": np.zeros(2, np.float32)}, 0.0, True, False, {}


def _attributes(obj: object, names: list[str], owner: str, user: str) -> None:
    for name in names:
        assert hasattr(obj, name), (
            f"stable_baselines3 {sb3.__version__}: {owner}.{name} is gone; {user} relies on it"
        )


def test_instance_attributes() -> None:
    venv = DummyVecEnv([_Tiny])
    model = PPO("MultiInputPolicy", venv, n_steps=4, batch_size=4, device="cpu")
    model._setup_learn(8, None, True, "contract", False)
    _attributes(model, ["_last_obs", "_last_episode_starts", "_n_updates",
                        "_current_progress_remaining"], "PPO", PPO_SB3)  # fmt: skip
    _attributes(model, ["_n_updates"], "PPO", CHECKPOINT)
    _attributes(model, ["clip_range", "normalize_advantage", "ent_coef", "vf_coef",
                        "max_grad_norm", "target_kl", "n_epochs", "batch_size", "n_steps",
                        "num_timesteps", "rollout_buffer"], "PPO", PPO_SB3)  # fmt: skip
    assert callable(model.clip_range), (
        f"stable_baselines3 {sb3.__version__}: PPO.clip_range is no longer a schedule; "
        f"{PPO_SB3}.train calls it"
    )
    buffer = model.rollout_buffer
    _attributes(buffer, ["buffer_size", "n_envs", "pos", "observations", "actions", "values",
                         "log_probs", "advantages", "returns", "rewards", "episode_starts",
                         "gamma", "gae_lambda"], "DictRolloutBuffer", BUFFER)  # fmt: skip
    _attributes(venv, ["_seeds", "_options", "reset_infos"], "VecEnv", VECENV)
    callback = CallbackList([])
    callback.init_callback(model)
    _attributes(callback, ["callbacks", "model"], "CallbackList", CALLBACKS)
    venv.close()


def test_module_level_names() -> None:
    for module, name, user in [
        (base_vec_env, "VecEnvIndices", VECENV),
        (base_vec_env, "VecEnvStepReturn", VECENV),
    ]:
        assert hasattr(module, name), (
            f"stable_baselines3 {sb3.__version__}: {module.__name__}.{name} is gone; "
            f"{user} imports it"
        )
    assert "venv" in _params(VecEnvWrapper.__init__), (
        f"stable_baselines3 {sb3.__version__}: VecEnvWrapper no longer wraps a 'venv'; "
        f"{CALLBACKS}._batch_rewards walks .venv"
    )
