"""cua_rl._strict's YAML loader: aliases are bounded (billion laughs), duplicate keys refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cua_rl._strict import MAX_YAML_NODES, load_yaml, parse_yaml
from cua_rl.errors import ConfigError
from cua_rl.training.config import load_config
from cua_rl.validator.run import load_validator_config


def _laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" alias bomb: ``width ** levels`` strings from a few hundred bytes."""
    lines = ["a: &a [" + ",".join(['"lol"'] * width) + "]"]
    prev = "a"
    for name in "bcdefghijklmnop"[: levels - 1]:
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * width) + "]")
        prev = name
    return "\n".join(lines) + "\n"


def test_the_alias_bomb_is_refused_within_a_second(tmp_path: Path) -> None:
    text = _laughs()
    assert len(text) < 600  # 9**9 = 387,420,489 strings once expanded
    file = tmp_path / "bomb.yaml"
    file.write_text("ppo:\n  n_steps: 8\n" + text)
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"bomb\.yaml: .*aliases expand to more than "
                                          rf"{MAX_YAML_NODES} nodes"):
        load_config(file)
    assert time.monotonic() - start < 1.0


def test_every_yaml_reader_refuses_it(tmp_path: Path) -> None:
    file = tmp_path / "v.yaml"
    file.write_text(_laughs())
    with pytest.raises(ConfigError, match=r"v\.yaml.*aliases expand"):
        load_validator_config(file)
    with pytest.raises(ConfigError, match=r"^where: .*aliases expand"):
        load_yaml(_laughs(), "where")


def test_a_wide_but_shallow_bomb_is_refused_too() -> None:
    # two aliases per level: few alias events, 2**40 nodes once expanded
    lines = ["l0: &l0 [x, y]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 41)]
    start = time.monotonic()
    with pytest.raises(ConfigError, match="aliases expand"):
        parse_yaml("\n".join(lines))
    assert time.monotonic() - start < 1.0


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^where: .*refers to itself"):
        load_yaml("a: &a [1, *a]\n", "where")


def test_modest_aliases_still_load() -> None:
    data = parse_yaml("base: &b {lr: 0.1, n: [1, 2]}\nrun: *b\nmerged: {<<: *b, n: 3}\n")
    assert data == {"base": {"lr": 0.1, "n": [1, 2]}, "run": {"lr": 0.1, "n": [1, 2]},
                    "merged": {"lr": 0.1, "n": 3}}  # fmt: skip


def test_a_duplicate_key_inside_an_aliased_mapping_is_found_once() -> None:
    with pytest.raises(ConfigError, match=r"duplicate key 'k' at line 1 \(first at line 1\)"):
        parse_yaml("a: &a {k: 1, k: 2}\nb: *a\nc: *a\n")


def test_deep_nesting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_yaml("[" * 5000 + "]" * 5000, "deep")


def test_every_problem_of_a_config_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "ppo: {lerning_rate: 0.1, n_step: 8}\n"
        "polcy: {kind: cnn}\n"
        "eval: {episodez: 3}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "bad.yaml")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'bad.yaml'}: 4 problems: (1) polcy: unknown section "
                              "(did you mean 'policy'?); allowed: ")  # fmt: skip
    for expected in ("ppo.lerning_rate: unknown key (did you mean 'learning_rate'?)",
                     "ppo.n_step: unknown key (did you mean 'n_steps'?)",
                     "eval.episodez: unknown key (did you mean 'episodes'?)"):  # fmt: skip
        assert expected in message
    assert "\n" not in message


def test_one_problem_is_said_without_a_count(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("ppo: {learning_rate: 0.1, zzzz: 1}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: ppo\.zzzz: unknown key; allowed: ") as err:
        load_config(tmp_path / "bad.yaml")
    caught = err
    assert len(caught.value.problems) == 1


def test_problems_are_kept_as_a_list() -> None:
    from cua_rl._strict import build_sections
    from cua_rl.training.config import LoggingConfig, PPOConfig

    with pytest.raises(ConfigError) as caught:
        build_sections({"ppo": {"n_step": 1}, "logging": {"dirr": "x"}},
                       {"ppo": PPOConfig, "logging": LoggingConfig})  # fmt: skip
    assert [p.split(":")[0] for p in caught.value.problems] == ["ppo.n_step", "logging.dirr"]
