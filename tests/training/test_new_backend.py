"""Adding a backend touches no training code: FakeBackend via the registry, trained from YAML."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cua_rl.envs.backends import registry
from cua_rl.errors import ConfigError
from cua_rl.training.config import load_config
from cua_rl.training.train import train

CONFIG = {
    "env": {"backend": "fake", "screen": [64, 48], "max_steps": 3},
    "policy": {"resize": [32, 24], "grid": [4, 4], "cnn_channels": [4, 4, 4], "cnn_features": 8,
               "text_features": 4, "net_arch": [8]},
    "ppo": {"n_envs": 2, "n_steps": 6, "batch_size": 6, "n_epochs": 1, "total_timesteps": 24},
    "logging": {"dir": "runs", "run_name": "fake", "wandb": "disabled", "progress": False},
    "checkpoint": {"every": 1, "keep_last": 5},
    "eval": {"every": 0, "episodes": 2, "at_start": False},
}  # fmt: skip


@pytest.fixture
def fake_registered() -> Iterator[None]:
    registry.register_backend("fake", "tests.training.fake_spec:SPEC")
    try:
        yield
    finally:
        registry.BACKENDS.pop("fake", None)


def test_trains_two_updates_on_a_registered_backend(fake_registered: None, tmp_path: Path) -> None:
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    result = train(load_config(path))
    assert result.updates_done == 2 and result.num_timesteps == 24  # 2 x (2 envs x 6 steps)
    assert result.stats["episodes"] >= 6  # episodes of at most 3 steps
    assert result.stats.get("unscorable", 0) == 0  # FakeBackend has a checker: every episode scored
    (evaluated_at, _, metrics), = result.evals
    assert evaluated_at == 2 and metrics["eval/episodes"] == 2.0
    assert 0.0 <= metrics["eval/success_rate"] <= 1.0
    assert sorted(p.name for p in (tmp_path / "runs/fake/checkpoints").iterdir()) == [
        "ckpt_000001.pt", "ckpt_000002.pt"]


def test_a_worker_process_builds_a_backend_registered_in_the_parent(
    fake_registered: None, tmp_path: Path
) -> None:
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "ppo": {**CONFIG["ppo"], "vec_env": "subproc"}}))
    result = train(load_config(path))
    assert result.updates_done == 2 and result.stats.get("unscorable", 0) == 0


def test_config_checks_are_the_backends(fake_registered: None, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "env": {**CONFIG["env"],
                                                      "backend_kwargs": {"colour": 1}}}))
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs: unknown key\(s\) \['colour'\]"):
        load_config(path)


def _code_words(source: str) -> list[str]:
    """Identifiers and string constants of a module, docstrings and comments left out."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }  # fmt: skip
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
        elif isinstance(node, (ast.ImportFrom,)) and node.module:
            words.append(node.module)
    return words


def test_training_code_names_no_backend() -> None:
    root = Path(__file__).resolve().parents[2] / "cua_rl" / "training"
    found = {
        f"{path.name}: {word!r}"
        for path in sorted(root.glob("*.py"))
        for word in _code_words(path.read_text(encoding="utf-8"))
        if "simdesk" in word.lower()
    }
    assert not found, sorted(found)


def test_the_scan_sees_code_and_skips_docstrings_and_comments() -> None:
    words = _code_words('"""SimDesk doc."""\nimport a.simdesk_x\nx = "SimDesk"  # simdesk\n')
    assert "SimDesk" in words and "a.simdesk_x" in words
    assert "SimDesk doc." not in words and "# simdesk" not in words


def test_a_dead_desktop_stops_training_with_a_clear_error(
    fake_registered: None, tmp_path: Path
) -> None:
    """Episodes die with their desktop (all but those ended by DONE at once): training stops."""
    from cua_rl.errors import BackendError

    data = {**CONFIG, "env": {**CONFIG["env"], "backend_kwargs": {"fail_at_step": 0}},
            "ppo": {**CONFIG["ppo"], "unscorable_window": 8, "max_unscorable_share": 0.5}}
    path = tmp_path / "dead.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(BackendError, match=r"training stopped: [5-8] of the last 8 episodes were "
                                           r"unscorable .*last reason: env error: FakeBackend"):
        train(load_config(path))
    tolerant = {**data, "ppo": {**data["ppo"], "max_unscorable_share": 1.0},
                "logging": {**CONFIG["logging"], "run_name": "tolerant"}}
    path.write_text(yaml.safe_dump(tolerant))
    result = train(load_config(path))  # 1.0 never stops; the dead episodes are counted
    assert result.updates_done == 2
    assert result.stats["unscorable"] > 0.5 * result.stats["episodes"]
