"""The training config: strict YAML loading, every documented ConfigError, shipped configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cua_rl.errors import ConfigError
from cua_rl.training.config import (
    PPOConfig,
    SplitConfig,
    TrainConfig,
    config_hash,
    load_config,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(tmp_path: Path, data: Any, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("name", ["simdesk", "osworld", "waa", "macosworld", "miniwob"])
def test_shipped_configs_load(name: str) -> None:
    config = load_config(CONFIGS / f"{name}.yaml")
    assert config.env.backend == name
    assert config.run_dir.name == name
    assert TrainConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_defaults_and_round_trip() -> None:
    config = TrainConfig()
    assert config.ppo.rollout_size == 256
    again = TrainConfig.from_dict(yaml.safe_load(yaml.safe_dump(config.to_dict())))
    assert again == config


def test_unknown_key_names_file_section_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, {"ppo": {"lerning_rate": 1e-3}})
    with pytest.raises(
        ConfigError,
        match=r"x\.yaml: ppo\.lerning_rate: unknown key \(did you mean 'learning_rate'\?\); "
        r"allowed: .*learning_rate",
    ):
        load_config(path)


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"ppoo": {}}, r"ppoo: unknown section"),
        ({"ppo": {"ray": {"adress": "auto"}}}, r"ppo\.ray\.adress: unknown key"),
        ({"env": {"split": {"test_seeds": 3}}}, r"env\.split\.test_seeds: unknown key"),
        ({"reward": {"judge": {"kind": "simulated", "epos": 0.1}}}, r"reward\.judge\.epos"),
        ({"reward": {"filter": {"mode": "drop", "weigth": 1}}}, r"reward\.filter\.weigth"),
        ({"ppo": 3}, r"ppo: expected a mapping"),
        ([1, 2], r"expected a mapping of sections"),
    ],
)
def test_unknown_keys_and_shapes(tmp_path: Path, data: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, data))


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"ppo": {"learning_rate": "fast"}}, r"ppo\.learning_rate: expected a number, got 'fast'"),
        ({"ppo": {"n_envs": 1.5}}, r"ppo\.n_envs: expected an integer"),
        ({"ppo": {"n_envs": True}}, r"ppo\.n_envs: expected an integer"),
        ({"ppo": {"normalize_advantage": 1}}, r"ppo\.normalize_advantage: expected true or false"),
        ({"ppo": {"vec_env": "threads"}}, r"ppo\.vec_env: must be one of \['dummy', 'subproc'"),
        ({"env": {"screen": [640]}}, r"env\.screen: expected a list of 2 items"),
        ({"env": {"families": "click_ok"}}, r"env\.families: expected a list"),
        ({"policy": {"keys": ["enter", 3]}}, r"policy\.keys\[1\]: expected a string"),
        ({"reward": {"calibration": ["a.json"]}}, r"reward\.calibration: expected a mapping"),
        ({"logging": {"wandb": "cloud"}}, r"logging\.wandb: must be one of"),
    ],
)
def test_wrong_types(tmp_path: Path, data: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, data))


SIM = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.1}


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"ppo": {"n_envs": 0}}, r"ppo\.n_envs: must be >= 1, got 0"),
        ({"ppo": {"gamma": 1.5}}, r"ppo\.gamma: must be in \[0, 1\], got 1.5"),
        ({"ppo": {"learning_rate": 0}}, r"ppo\.learning_rate: must be > 0"),
        ({"ppo": {"ent_coef": -1}}, r"ppo\.ent_coef: must be >= 0"),
        ({"ppo": {"target_kl": -0.1}}, r"ppo\.target_kl: must be > 0 or null"),
        ({"ppo": {"n_envs": 2, "n_steps": 8, "batch_size": 32}}, r"ppo\.batch_size: must be <="),
        ({"ppo": {"ray": {"object_store_mb": 10}}}, r"ppo\.ray\.object_store_mb: must be >= 75"),
        ({"env": {"max_steps": 0}}, r"env\.max_steps: must be >= 1 or null"),
        ({"env": {"families": ["click_ok", "click_ok"]}}, r"env\.families: must be distinct"),
        (
            {"env": {"families": ["click_okay"]}},
            r"env\.families: unknown families \['click_okay'\]",
        ),
        (
            {"env": {"backend_kwargs": {"width": 800}}},
            r"env\.backend_kwargs: unknown key\(s\) \['width'\]",
        ),
        ({"env": {"backend_kwargs": {"popup_rate": 2.0}}}, r"env\.backend_kwargs: .*popup_rate"),
        ({"env": {"backend": "osworld"}}, r"env\.task_files: the osworld backend needs a task"),
        ({"env": {"backend": "miniwob"}}, r"env\.families: the miniwob backend needs families"),
        (
            {"env": {"backend": "simdesk", "task_files": ["a.json"]}},
            r"env\.task_files: simdesk takes",
        ),
        (
            {"env": {"split": {"train_seeds": 10, "eval_seed_start": 5}}},
            r"env\.split\.eval_seed_start: eval seeds \[5, 55\) overlap training seeds \[0, 10\)",
        ),
        (
            {"env": {"split": {"train_seed_start": 2000, "eval_seed_start": 10}}},
            r"env\.split\.train_seed_start: must be below eval_seed_start",
        ),
        (
            {"env": {"split": {"eval_seed_start": 2**31 - 5}}},
            r"env\.split\.eval_seeds: task seeds must stay below 2147483648",
        ),
        (
            {"env": {"split": {"eval_fraction": 1.0}}},
            r"env\.split\.eval_fraction: must be in \(0, 1\)",
        ),
        ({"policy": {"grid": [800, 5]}}, r"policy\.grid: must not be finer than the screen"),
        ({"policy": {"resize": [8, 8]}}, r"policy\.resize: must be at least 16x16"),
        ({"policy": {"keys": ["enter", "enter"]}}, r"policy\.keys: must be distinct"),
        ({"reward": {"primary": "judge"}}, r"reward\.judge: primary 'judge' needs a judge section"),
        (
            {"reward": {"primary": "corrected", "judge": SIM}},
            r"reward\.calibration: primary 'corrected' needs a calibration file",
        ),
        (
            {"reward": {"calibration": {"all": "c.json"}}},
            r"reward\.judge: a calibration needs the judge",
        ),
        (
            {
                "reward": {
                    "judge": SIM,
                    "calibration": {"all": "c.json"},
                    "calibration_labelled": {"ubuntu": "l.jsonl"},
                }
            },
            r"reward\.calibration_labelled: strata \['ubuntu'\] have no calibration",
        ),
        (
            {"reward": {"filter": {"mode": "drop"}}},
            r"reward\.reference_models: structural_weight != 0 or a rollout filter needs",
        ),
        ({"reward": {"structural_weight": 0.5}}, r"reward\.reference_models: structural_weight"),
        ({"reward": {"filter": {"weight": 1.0}}}, r"reward\.filter\.weight: must be in \(0, 1\)"),
        (
            {"reward": {"filter": {"min_coverage": 1.5}}},
            r"reward\.filter\.min_coverage: must be in \[0, 1\]",
        ),
        (
            {"reward": {"judge": {"kind": "simulated", "e_neg": 1.5}}},
            r"reward\.judge\.e_neg: must be in \[0, 1\]",
        ),
        (
            {"reward": {"judge": {"kind": "simulated", "per_stratum": {"simdesk": [0.1, 2]}}}},
            r"reward\.judge\.per_stratum: rates must be in \[0, 1\]",
        ),
        (
            {"reward": {"judge": {"kind": "simulated", "options": {"device": "cpu"}}}},
            r"reward\.judge\.options: is for qwen_vl/openai",
        ),
        (
            {"reward": {"judge": {"kind": "qwen_vl"}}},
            r"reward\.judge\.config: a qwen_vl judge needs one \(at least its model\)",
        ),
        (
            {"reward": {"judge": {"kind": "qwen_vl", "config": {"model": "m", "temperature": 1}}}},
            r"reward\.judge\.config: unknown key",
        ),
        (
            {
                "reward": {
                    "judge": {
                        "kind": "qwen_vl",
                        "config": {"model": "m"},
                        "options": {"base_url": "x"},
                    }
                }
            },
            r"reward\.judge\.options: unknown keys \['base_url'\]",
        ),
        (
            {"reward": {"judge": {"kind": "openai", "config": {"model": "m"}}}},
            r"reward\.judge\.options: an openai judge needs base_url",
        ),
        ({"logging": {"run_name": "a/b"}}, r"logging\.run_name: must be a plain folder name"),
        ({"logging": {"log_interval": 0}}, r"logging\.log_interval: must be >= 1"),
        ({"checkpoint": {"keep_last": 0}}, r"checkpoint\.keep_last: must be >= 1"),
        ({"checkpoint": {"every": -1}}, r"checkpoint\.every: must be >= 0"),
        ({"eval": {"episodes": 0}}, r"eval\.episodes: must be >= 1"),
    ],
)
def test_values_out_of_range(tmp_path: Path, data: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, data))


def test_post_init_checks_python_construction_too() -> None:
    with pytest.raises(ConfigError, match=r"ppo\.n_steps: must be >= 1, got 0"):
        PPOConfig(n_steps=0)
    with pytest.raises(ConfigError, match=r"env\.split\.eval_seeds: expected an integer"):
        SplitConfig(eval_seeds="10")  # type: ignore[arg-type]
    assert PPOConfig(learning_rate=1).learning_rate == 1.0  # ints are accepted for floats


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read the config"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"bad\.yaml: invalid YAML"):
        load_config(write(tmp_path, "ppo: [1, 2", name="bad.yaml"))


def test_an_empty_section_is_all_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "ppo: {}\n", name="empty.yaml")).ppo == PPOConfig()


def test_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    sub = tmp_path / "configs"
    sub.mkdir()
    config = load_config(write(sub, {"logging": {"dir": "../runs"}}, name="mine.yaml"))
    assert config.run_dir == (tmp_path / "runs" / "mine").resolve()
    assert config.resolve("/abs/c.json") == Path("/abs/c.json")


def test_config_hash_ignores_where_and_how_long_but_not_what() -> None:
    base = TrainConfig()
    h = config_hash(base)
    longer = TrainConfig.from_dict(
        {
            "ppo": {"total_timesteps": 999, "vec_env": "subproc"},
            "logging": {"wandb": "disabled"},
            "eval": {"every": 3},
        }
    )
    assert config_hash(longer) == h
    assert config_hash(TrainConfig.from_dict({"ppo": {"learning_rate": 1e-3}})) != h
    assert config_hash(TrainConfig.from_dict({"env": {"max_steps": 5}})) != h


def test_simdesk_knobs_convert_lists() -> None:
    from cua_rl.envs.backends.simdesk.spec import SPEC

    config = TrainConfig.from_dict(
        {"env": {"backend_kwargs": {"loading_steps": [1, 2], "bugs": ["save_fails"]}}}
    )
    desktop = SPEC.desktop_config(config.env)
    assert desktop.loading_steps == (1, 2)
    assert desktop.bugs == frozenset({"save_fails"})
    assert (desktop.width, desktop.height) == (640, 400)
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs: SimDeskConfig\.loading_steps"):
        TrainConfig.from_dict({"env": {"backend_kwargs": {"loading_steps": 5}}})


def test_duplicate_keys_and_empty_files_are_refused(tmp_path: Path) -> None:
    text = "ppo:\n  n_steps: 8\n  n_steps: 16\n"
    with pytest.raises(ConfigError, match=r"dup\.yaml: duplicate key 'n_steps' at line 3 "
                                          r"\(first at line 2\)"):
        load_config(write(tmp_path, text, name="dup.yaml"))
    with pytest.raises(ConfigError, match=r"top\.yaml: duplicate key 'ppo' at line 3"):
        load_config(write(tmp_path, "ppo: {}\nenv: {}\nppo: {}\n", name="top.yaml"))
    with pytest.raises(ConfigError, match=r"empty\.yaml: the config is empty"):
        load_config(write(tmp_path, "", name="empty.yaml"))
    with pytest.raises(ConfigError, match=r"blank\.yaml: the config is empty"):
        load_config(write(tmp_path, "# only a comment\n", name="blank.yaml"))
    (tmp_path / "latin.yaml").write_bytes(b"ppo: {n_steps: 8}  # caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin\.yaml: not UTF-8 text"):
        load_config(tmp_path / "latin.yaml")
