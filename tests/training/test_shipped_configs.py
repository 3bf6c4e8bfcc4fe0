"""Every shipped training config (configs/*.yaml) loads, into the library's own section classes,
with the values it states."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.calibration.audit import AuditSettings
from cua_rl.judges.config import JudgeConfig, ThresholdRule
from cua_rl.policies.vlm.config import LORA_TARGET, VLMPolicyConfig
from cua_rl.training.config import TrainConfig, VLMUpdateSection, config_hash, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: Validator configs, not training configs.
NOT_TRAINING = {"validator_desktop.yaml", "validator_miniwob.yaml"}

#: file -> (backend, policy kind, n_envs, n_steps, batch_size, clip_range, ent_coef, gamma,
#: primary reward)
EXPECTED = {
    "macosworld.yaml": ("macosworld", "cnn", 2, 64, 64, 0.2, 0.01, 0.99, "corrected"),
    "miniwob.yaml": ("miniwob", "cnn", 2, 128, 64, 0.2, 0.01, 0.99, "ground_truth"),
    "miniwob_ppo.yaml": ("miniwob", "cnn", 2, 64, 64, 0.2, 0.01, 0.99, "ground_truth"),
    "osworld.yaml": ("osworld", "cnn", 2, 64, 128, 0.2, 0.01, 0.99, "corrected"),
    "osworld_local.yaml": ("x11", "cnn", 2, 16, 32, 0.2, 0.05, 0.99, "ground_truth"),
    "simdesk.yaml": ("simdesk", "cnn", 4, 64, 64, 0.2, 0.01, 0.99, "ground_truth"),
    "simdesk_vlm.yaml": ("simdesk", "vlm", 8, 16, 8, 0.1, 0.0, 0.9, "ground_truth"),
    "simdesk_vlm_group.yaml": ("simdesk", "vlm", 8, 16, 8, 0.1, 0.0, 0.9, "ground_truth"),
    "simdesk_vlm_cpu.yaml": ("simdesk", "vlm", 2, 4, 4, 0.1, 0.0, 0.9, "ground_truth"),
    "waa.yaml": ("waa", "cnn", 4, 64, 128, 0.2, 0.01, 0.99, "corrected"),
}


def test_every_shipped_training_config_is_listed() -> None:
    shipped = {p.name for p in CONFIGS.glob("*.yaml")} - NOT_TRAINING
    assert shipped == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_shipped_config_loads_with_its_values(name: str) -> None:
    config = load_config(CONFIGS / name)
    ppo = config.ppo
    found = (config.env.backend, config.policy.kind, ppo.n_envs, ppo.n_steps, ppo.batch_size,
             ppo.clip_range, ppo.ent_coef, ppo.gamma, config.reward.primary)  # fmt: skip
    assert found == EXPECTED[name]
    assert config.run_dir == (CONFIGS / ".." / "runs").resolve() / Path(name).stem
    assert isinstance(config.reward.audit, AuditSettings) and config.reward.audit.every == 0
    # what was written to the run folder reads back to the same config
    again = TrainConfig.from_dict(config.to_dict(), base_dir=config.base_dir, source=config.source)
    assert again == config and config_hash(again) == config_hash(config)


@pytest.mark.parametrize("name", ["macosworld.yaml", "osworld.yaml", "waa.yaml"])
def test_a_judge_section_holds_the_judges_own_config(name: str) -> None:
    judge = load_config(CONFIGS / name).reward.judge
    assert judge is not None and isinstance(judge.config, JudgeConfig)
    assert (judge.kind, judge.config.kind, judge.config.model, judge.last_k) == (
        "qwen_vl", "qwen_vl", "Qwen/Qwen2-VL-7B-Instruct", 1)  # fmt: skip
    assert judge.config.decision == ThresholdRule(0.5)
    assert judge.judge_config().judge_id.startswith(  # type: ignore[union-attr]
        "qwen_vl:Qwen2-VL-7B-Instruct:prompt-v1:threshold-0.5:px-3136-1003520:last-1:"
    )


@pytest.mark.parametrize(("name", "algorithm"),
                         [("simdesk_vlm.yaml", "ppo"), ("simdesk_vlm_group.yaml", "group")])
def test_a_vlm_config_holds_the_policys_own_config(name: str, algorithm: str) -> None:
    config = load_config(CONFIGS / name)
    vlm = config.policy.vlm
    assert isinstance(vlm, VLMPolicyConfig)
    assert (vlm.model, vlm.lora, vlm.lora_r, vlm.target_modules) == (
        "Qwen/Qwen2-VL-2B-Instruct", True, 128, LORA_TARGET)  # fmt: skip
    assert isinstance(config.vlm_update, VLMUpdateSection)
    assert (config.vlm_update.algorithm, config.vlm_update.group_size) == (algorithm, 4)
