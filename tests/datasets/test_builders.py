"""Labelled-set builders: SimDesk expert rollouts and any CUAEnv with a checker."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cua_rl.actions import Wait
from cua_rl.calibration import check_disjoint, load_labelled
from cua_rl.datasets import (
    CALIBRATION_SEED_START,
    SIMDESK_SOURCE,
    SimDeskLabelledConfig,
    build_labelled_from_env,
    build_simdesk_labelled,
    class_balance,
    load_simdesk_labelled_config,
    simdesk_expert_policy,
)
from cua_rl.envs.backends.simdesk import (
    KNOWN_BUGS,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskTasks,
    make_task,
    run_expert,
)
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.simdesk_env import make_simdesk_env
from cua_rl.errors import CalibrationError, ConfigError, TaskSpecError
from cua_rl.tasks.base import FixedTasks

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ["click_ok", "editor_find", "editor_replace_save_as"]
SMALL = SimDeskConfig(width=640, height=400)
KNOBS = {"hesitation": 0.1, "mistakes": 0.1, "give_up": 0.1}


def _build(out: Path, **overrides: Any) -> list:
    kwargs: dict[str, Any] = {
        "families": FAMILIES,
        "n_per_family": 8,
        "seed": 3,
        "config": SMALL,
        "expert_knobs": KNOBS,
        "bug_rate": 0.5,
    }
    kwargs.update(overrides)
    return build_simdesk_labelled(out, **kwargs)


@pytest.fixture(scope="module")
def simdesk_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    out = tmp_path_factory.mktemp("simdesk-set")
    return out, _build(out)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_simdesk_set_mixes_classes_and_loads_back(simdesk_set: tuple[Path, list]) -> None:
    out, examples = simdesk_set
    assert len(examples) == 3 * 8
    assert load_labelled(out / "labelled.jsonl") == examples
    balance = class_balance(examples)
    assert balance["all"]["pos"] == sum(e.label for e in examples)
    assert 0 < balance["all"]["pos"] < len(examples)
    for e in examples:
        assert e.source == SIMDESK_SOURCE and e.os == "simdesk" and e.app in FAMILIES
        family, seed = e.task_id.split("/")[1:]
        assert family == e.app and int(seed) >= CALIBRATION_SEED_START
        assert e.id == f"{family}-{seed}"
        assert len(e.images) == 1 and e.images[0].is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    records = {r["id"]: r for r in manifest["episodes"]}
    assert manifest["class_balance"] == balance
    assert 0 < manifest["n_bugged"] < len(examples)
    # failures that looked successful to the expert (it declared Done) are in the mix
    declared = [r for r in records.values() if r["looks_done_failure"]]
    assert declared and all(r["label"] == 0 and r["end"] == "done" for r in declared)
    assert manifest["outcomes"]["failure_declared_done"] == len(declared)


def test_labels_and_images_match_an_independent_replay(simdesk_set: tuple[Path, list]) -> None:
    out, examples = simdesk_set
    records = {r["id"]: r for r in json.loads((out / "manifest.json").read_text())["episodes"]}
    clean = SimDeskBackend(SMALL)
    bugged = SimDeskBackend(dataclasses.replace(SMALL, bugs=KNOWN_BUGS))
    for e in examples[::3]:
        rec = records[e.id]
        family, seed = e.task_id.split("/")[1:]
        backend = bugged if rec["bugged"] else clean
        _, observations, success = run_expert(
            backend, make_task(family, int(seed)), seed=rec["expert_seed"], **KNOBS
        )
        assert e.label == int(success)
        assert backend.ground_truth(make_task(family, int(seed))) == float(e.label)
        with Image.open(e.images[0]) as img:
            np.testing.assert_array_equal(np.asarray(img), observations[-1].screenshot)


def test_held_out_from_training_tasks(simdesk_set: tuple[Path, list]) -> None:
    _, examples = simdesk_set
    rng = np.random.default_rng(0)
    training = [SimDeskTasks(FAMILIES).sample(rng).id for _ in range(500)]
    check_disjoint((e.task_id for e in examples), training)


def test_rebuild_is_identical_and_idempotent(
    simdesk_set: tuple[Path, list], tmp_path: Path
) -> None:
    out, examples = simdesk_set
    again = _build(tmp_path)
    assert [(e.id, e.label) for e in again] == [(e.id, e.label) for e in examples]
    assert _files(tmp_path) == _files(out)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()}
    _build(tmp_path)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()} == mtimes


def test_other_seed_gives_another_set(simdesk_set: tuple[Path, list], tmp_path: Path) -> None:
    _, examples = simdesk_set
    other = _build(tmp_path, seed=4)
    assert [e.task_id for e in other] == [e.task_id for e in examples]
    records = json.loads((tmp_path / "manifest.json").read_text())["episodes"]
    first = json.loads((simdesk_set[0] / "manifest.json").read_text())["episodes"]
    assert [r["bugged"] for r in records] != [r["bugged"] for r in first]


def test_last_k_keeps_the_final_screens_oldest_first(tmp_path: Path) -> None:
    examples = _build(tmp_path, families=["editor_find"], n_per_family=3, last_k=3, bug_rate=0.0)
    for e in examples:
        assert len(e.images) == 3
        assert [p.name for p in e.images] == [f"{e.id}-{j}.png" for j in range(3)]
    loaded = load_labelled(tmp_path / "labelled.jsonl")
    assert [len(e.images) for e in loaded] == [3, 3, 3]


def test_bad_arguments_raise(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="n_per_family must be an integer >= 1, got 0"):
        _build(tmp_path, n_per_family=0)
    with pytest.raises(ConfigError, match=r"unknown expert knob\(s\) \['typos'\]"):
        _build(tmp_path, expert_knobs={"typos": 0.1})
    with pytest.raises(ConfigError, match="bug_rate must be in"):
        _build(tmp_path, bug_rate=1.5)
    with pytest.raises(ConfigError, match="unknown bug"):
        _build(tmp_path, bugs=["no_such_bug"])
    with pytest.raises(TaskSpecError, match="unknown SimDesk task family 'nope'"):
        _build(tmp_path, families=["nope"])


def test_a_set_without_failures_is_refused_after_writing(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="3 positives and 0 negatives"):
        _build(tmp_path, families=["click_ok"], n_per_family=3, bug_rate=0.0, expert_knobs={})
    assert (tmp_path / "labelled.jsonl").is_file()


# -- build_labelled_from_env ------------------------------------------------------------------


def _crashing(every: int, policy: Any, calls: list[int]) -> Any:
    """Wrap ``policy``: kill the desktop at the first step of every ``every``-th episode."""
    state = {"episode": -1}

    def wrapped(observation: dict, info: dict, env: Any) -> Any:
        calls.append(1)
        if "instruction" in info:
            state["episode"] += 1
            action = policy(observation, info, env)
            if state["episode"] % every == 0:
                env.unwrapped.backend.inject_failure("VM died (test)")
                return Wait()  # reaches the backend, which then dies
            return action
        return policy(observation, info, env)

    return wrapped


def _counting(policy: Any, calls: list[int]) -> Any:
    def wrapped(observation: dict, info: dict, env: Any) -> Any:
        calls.append(1)
        return policy(observation, info, env)

    return wrapped


def _env() -> CUAEnv:
    return make_simdesk_env(families=["click_ok", "editor_type"], width=640, height=400)


def test_env_builder_skips_env_errors_and_labels_with_the_checker(tmp_path: Path) -> None:
    calls: list[int] = []
    expert = simdesk_expert_policy(seed=1, mistakes=0.3, give_up=0.3)
    examples = build_labelled_from_env(
        _env(), _crashing(3, expert, calls), 9, tmp_path, seed=5, source="simdesk-checker"
    )
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["skipped"] == {"env_error": 3}
    assert len(examples) == 6
    assert [e.id for e in examples] == [
        f"simdesk-checker-5-{i:05d}" for i in range(9) if i % 3 != 0
    ]
    skipped = [r for r in manifest["episodes"] if "skip" in r]
    assert [r["i"] for r in skipped] == [0, 3, 6]
    assert all("VM died" in r["message"] for r in skipped)
    assert 0 < sum(e.label for e in examples) < 6
    assert load_labelled(tmp_path / "labelled.jsonl") == examples
    # each label is the checker's verdict on a replay of the same task with the same expert
    for e in examples:
        family, seed = e.task_id.split("/")[1:]
        task = make_task(family, int(seed))
        env = CUAEnv(SimDeskBackend(SimDeskConfig(width=640, height=400)), FixedTasks([task]))
        policy = simdesk_expert_policy(seed=1, mistakes=0.3, give_up=0.3)
        observation, info = env.reset(seed=0)
        while True:
            observation, _, terminated, truncated, info = env.step(policy(observation, info, env))
            if terminated or truncated:
                break
        assert info["episode_end"].ground_truth == float(e.label)


def test_env_builder_resumes_and_extends(tmp_path: Path) -> None:
    expert = simdesk_expert_policy(seed=2, mistakes=0.3, give_up=0.3)
    calls: list[int] = []
    first = build_labelled_from_env(
        _env(),
        _counting(expert, calls),
        4,
        tmp_path,
        seed=0,
        source="s",
        require_both_classes=False,
    )
    assert calls
    text = (tmp_path / "labelled.jsonl").read_bytes()
    calls.clear()
    again = build_labelled_from_env(
        _env(),
        _counting(expert, calls),
        4,
        tmp_path,
        seed=0,
        source="s",
        require_both_classes=False,
    )
    assert not calls and again == first
    assert (tmp_path / "labelled.jsonl").read_bytes() == text
    longer = build_labelled_from_env(
        _env(), expert, 7, tmp_path, seed=0, source="s", require_both_classes=False
    )
    assert len(first) == 4 and longer[:4] == first and len(longer) == 7
    fresh = tmp_path / "fresh"
    whole = build_labelled_from_env(
        _env(),
        simdesk_expert_policy(seed=2, mistakes=0.3, give_up=0.3),
        7,
        fresh,
        seed=0,
        source="s",
        require_both_classes=False,
    )
    assert [(e.id, e.task_id, e.label) for e in whole] == [
        (e.id, e.task_id, e.label) for e in longer
    ]
    with pytest.raises(CalibrationError, match="other arguments"):
        build_labelled_from_env(_env(), expert, 2, tmp_path, seed=1, source="s")


class _NoChecker(SimDeskBackend):
    def ground_truth(self, task: Any) -> float | None:
        return None


def test_env_builder_skips_episodes_without_ground_truth(tmp_path: Path) -> None:
    env = CUAEnv(_NoChecker(SMALL), SimDeskTasks(["click_ok"]))
    with pytest.raises(CalibrationError, match="0 positives and 0 negatives"):
        build_labelled_from_env(env, simdesk_expert_policy(), 3, tmp_path, source="x")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["skipped"] == {"no_ground_truth": 3}
    assert manifest["n_examples"] == 0


def test_env_builder_bad_arguments(tmp_path: Path) -> None:
    env, policy = _env(), simdesk_expert_policy()
    with pytest.raises(ConfigError, match="n_episodes must be an integer >= 1, got 0"):
        build_labelled_from_env(env, policy, 0, tmp_path, source="x")
    with pytest.raises(ConfigError, match="source must be a non-empty string"):
        build_labelled_from_env(env, policy, 1, tmp_path, source=" ")
    with pytest.raises(ConfigError, match=r"threshold must be in \(0, 1\]"):
        build_labelled_from_env(env, policy, 1, tmp_path, source="x", threshold=0.0)


# -- the config and the script ----------------------------------------------------------------


def test_shipped_config_loads() -> None:
    path = REPO / "data" / "calibration" / "simdesk" / "config.yaml"
    cfg = load_simdesk_labelled_config(path)
    assert cfg.task_seed_start >= CALIBRATION_SEED_START
    assert cfg.resolved_out_dir(path) == path.parent / "data"
    assert cfg.simdesk_config().width == cfg.desktop["width"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("n_per_family: 5\ncolour: red\n", r"unknown key\(s\) \['colour'\]"),
        ("task_seed_start: 7\n", "task_seed_start must be an integer >= 2147483648, got 7"),
        ("desktop: {width: 640, wallpaper: x}\n", r"desktop has unknown key\(s\) \['wallpaper'\]"),
        ("desktop: {width: 100}\n", r"width must be an int in \[320, 7680\]"),
        ("expert: {typos: 0.1}\n", r"unknown expert knob\(s\) \['typos'\]"),
        ("families: click_ok\n", "families must be a list of names"),
        ("- 1\n", "expected a mapping"),
        ("a: [\n", "invalid YAML"),
    ],
)
def test_config_is_strict(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_simdesk_labelled_config(path)


def test_config_build_and_defaults(tmp_path: Path) -> None:
    cfg = SimDeskLabelledConfig(
        families=("click_ok", "editor_find"),
        n_per_family=4,
        bug_rate=0.5,
        expert=KNOBS,
        desktop={"width": 640, "height": 400},
    )
    examples = cfg.build(tmp_path)
    assert len(examples) == 8 and (tmp_path / "labelled.jsonl").is_file()


def test_make_labelled_simdesk_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location(
        "make_labelled_simdesk", REPO / "scripts" / "make_labelled_simdesk.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    config = tmp_path / "config.yaml"
    config.write_text(
        "out_dir: built\nfamilies: [click_ok, editor_find]\nn_per_family: 4\nbug_rate: 0.5\n"
        "expert: {mistakes: 0.2, give_up: 0.2}\ndesktop: {width: 640, height: 400}\n"
    )
    assert script.main(["--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "wrote 8 labelled examples" in out and "| simdesk/editor_find |" in out
    assert len(load_labelled(tmp_path / "built" / "labelled.jsonl")) == 8
    config.write_text("n_per_family: 4\nbogus: 1\n")
    assert script.main(["--config", str(config)]) == 2
    assert "unknown key(s) ['bogus']" in capsys.readouterr().err
