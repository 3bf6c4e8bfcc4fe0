"""JudgeConfig: validation, strict loading, and a judge id that is stable and covers every field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cua_rl.errors import ConfigError
from cua_rl.judges import prompts
from cua_rl.judges.config import JudgeConfig, ThresholdRule, VoteRule, model_name, vote_verdict

BASE = JudgeConfig("Qwen/Qwen2-VL-2B-Instruct")


def test_judge_id_is_stable_across_runs_and_versions() -> None:
    # A literal: if this changes, every stored calibration is orphaned (bump ID_FORMAT on purpose).
    assert BASE.judge_id == (
        "qwen_vl:Qwen2-VL-2B-Instruct:prompt-v1:threshold-0.5:px-3136-1003520:last-1:"
        + BASE.content_hash
    )
    assert BASE.content_hash == "8934cd1f"
    assert JudgeConfig("Qwen/Qwen2-VL-2B-Instruct").judge_id == BASE.judge_id


def test_round_trip_through_plain_data_keeps_the_id() -> None:
    config = JudgeConfig(
        "/models/judge",
        kind="openai",
        decision=VoteRule(k=3, rule="unanimous", temperature=0.7, max_new_tokens=2, seed=5),
        min_pixels=28 * 28,
        max_pixels=28 * 28 * 8,
        last_k=3,
    )
    again = JudgeConfig.from_dict(config.to_dict())
    assert again == config
    assert again.judge_id == config.judge_id


# One change per field of JudgeConfig and of each decision rule.
CHANGES: dict[str, dict[str, Any]] = {
    "model": {"model": "Qwen/Qwen2-VL-7B-Instruct"},
    "model (same name, other org)": {"model": "someone/Qwen2-VL-2B-Instruct"},
    "kind": {"kind": "openai"},
    "prompt_version": {"prompt_version": "v2"},
    "decision.threshold": {"decision": ThresholdRule(0.7)},
    "decision (vote)": {"decision": VoteRule()},
    "min_pixels": {"min_pixels": 28 * 28 * 8},
    "max_pixels": {"max_pixels": 28 * 28 * 64},
    "last_k": {"last_k": 2},
}
VOTE_CHANGES: dict[str, dict[str, Any]] = {
    "k": {"k": 7},
    "rule": {"rule": "unanimous"},
    "temperature": {"temperature": 0.5},
    "max_new_tokens": {"max_new_tokens": 8},
    "seed": {"seed": 1},
}


def test_the_change_lists_cover_every_field() -> None:
    covered = {name.split(" ")[0].split(".")[0] for name in CHANGES}
    assert covered == {f.name for f in dataclasses.fields(JudgeConfig)}
    assert set(VOTE_CHANGES) == {f.name for f in dataclasses.fields(VoteRule)}
    assert {"threshold"} == {f.name for f in dataclasses.fields(ThresholdRule)}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_judge_id_changes_with_each_field(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(prompts.PROMPT_VERSIONS, "v2", prompts.PROMPT_VERSIONS["v1"] + " ")
    changed = dataclasses.replace(BASE, **CHANGES[name])
    assert changed.judge_id != BASE.judge_id
    assert changed.content_hash != BASE.content_hash


@pytest.mark.parametrize("name", sorted(VOTE_CHANGES))
def test_judge_id_changes_with_each_vote_setting(name: str) -> None:
    base = dataclasses.replace(BASE, decision=VoteRule())
    changed = dataclasses.replace(BASE, decision=VoteRule(**VOTE_CHANGES[name]))
    assert changed.judge_id != base.judge_id


def test_every_change_gives_a_distinct_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(prompts.PROMPT_VERSIONS, "v2", prompts.PROMPT_VERSIONS["v1"] + " ")
    ids = {dataclasses.replace(BASE, **c).judge_id for c in CHANGES.values()}
    ids |= {
        dataclasses.replace(BASE, decision=VoteRule(**c)).judge_id for c in VOTE_CHANGES.values()
    }
    assert len(ids) == len(CHANGES) + len(VOTE_CHANGES)


def test_readable_parts_of_the_id() -> None:
    config = JudgeConfig(
        "/data/ckpt/judge-7b/",
        decision=VoteRule(k=3, rule="unanimous"),
        min_pixels=100,
        max_pixels=200,
        last_k=2,
    )
    kind, name, prompt, rule, px, last, digest = config.judge_id.split(":")
    assert (kind, name, prompt, rule, px, last) == (
        "qwen_vl",
        "judge-7b",
        "prompt-v1",
        "vote-unanimous-3",
        "px-100-200",
        "last-2",
    )
    assert len(digest) == 8 and int(digest, 16) >= 0


def test_equivalent_model_paths_share_an_id() -> None:
    a = JudgeConfig("models/judge/")
    assert JudgeConfig("models/./judge").judge_id == a.judge_id
    assert JudgeConfig("other/judge").judge_id != a.judge_id


def test_model_name() -> None:
    assert model_name("Qwen/Qwen2-VL-2B-Instruct") == "Qwen2-VL-2B-Instruct"
    assert model_name("C:\\models\\judge\\") == "judge"
    assert model_name("plain") == "plain"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": ""}, "model must be a non-empty string, got ''"),
        ({"kind": "gpt"}, "kind must be one of .* got 'gpt'"),
        ({"prompt_version": "v9"}, "prompt_version must be one of \\['v1'\\], got 'v9'"),
        ({"decision": "threshold"}, "decision must be a ThresholdRule or a VoteRule, got str"),
        ({"min_pixels": 0}, "min_pixels must be an integer >= 1, got 0"),
        ({"max_pixels": 2.5}, "max_pixels must be an integer >= 1, got 2.5"),
        ({"last_k": 0}, "last_k must be an integer >= 1, got 0"),
        ({"min_pixels": 500, "max_pixels": 400}, "min_pixels \\(500\\) must be <= max_pixels"),
    ],
)
def test_invalid_config_is_refused(kwargs: dict[str, Any], match: str) -> None:
    args = {"model": "m", **kwargs}
    with pytest.raises(ConfigError, match=match):
        JudgeConfig(**args)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ThresholdRule(1.5), "threshold must be in \\[0, 1\\], got 1.5"),
        (lambda: ThresholdRule(True), "threshold must be in \\[0, 1\\], got True"),
        (lambda: VoteRule(k=0), "k must be an integer >= 1, got 0"),
        (lambda: VoteRule(rule="any"), "rule must be one of .* got 'any'"),
        (lambda: VoteRule(temperature=0.0), "temperature must be > 0, got 0.0"),
        (lambda: VoteRule(max_new_tokens=0), "max_new_tokens must be an integer >= 1, got 0"),
        (lambda: VoteRule(seed=1.5), "seed must be an integer, got 1.5"),
    ],
)
def test_invalid_rule_is_refused(make: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"model": "m", "temperature": 0}, "unknown key\\(s\\) \\['temperature'\\] in JudgeConfig"),
        ({"kind": "openai"}, "needs a 'model' key"),
        ({"model": "m", "decision": 0.5}, "decision must be a mapping, got 0.5"),
        ({"model": "m", "decision": {"rule": "best"}}, "must be 'threshold' or 'vote', got 'best'"),
        (
            {"model": "m", "decision": {"rule": "threshold", "k": 3}},
            "unknown key\\(s\\) \\['k'\\] in decision \\(threshold\\)",
        ),
        (
            {"model": "m", "decision": {"rule": "vote", "threshold": 0.5}},
            "unknown key\\(s\\) \\['threshold'\\] in decision \\(vote\\)",
        ),
    ],
)
def test_from_dict_is_strict(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        JudgeConfig.from_dict(data)


def test_from_dict_reads_a_vote_rule() -> None:
    config = JudgeConfig.from_dict(
        {"model": "m", "decision": {"rule": "vote", "k": 3, "vote": "unanimous", "seed": 2}}
    )
    assert config.decision == VoteRule(k=3, rule="unanimous", seed=2)


def test_threshold_rule_decides_at_the_threshold() -> None:
    rule = ThresholdRule(0.3)
    assert rule.decide(0.3) and rule.decide(0.9)
    assert not rule.decide(0.2999)


@pytest.mark.parametrize(
    ("rule", "yes", "no", "expected"),
    [
        ("majority", 3, 2, (True, 0.6)),
        ("majority", 2, 2, (False, 0.5)),  # a tie is a failure
        ("majority", 1, 4, (False, 0.2)),
        ("majority", 2, 1, (True, 2 / 3)),  # 2 unparsable left out
        ("unanimous", 5, 0, (True, 1.0)),
        ("unanimous", 3, 0, (True, 1.0)),
        ("unanimous", 4, 1, (False, 0.8)),
        ("majority", 2, 0, None),  # only 2 of 5 parsable: below a majority of samples
        ("unanimous", 0, 0, None),
    ],
)
def test_vote_rule_decides(
    rule: str, yes: int, no: int, expected: tuple[bool, float] | None
) -> None:
    decided = VoteRule(k=5, rule=rule).decide(yes, no)  # type: ignore[arg-type]
    if expected is None:
        assert decided is None
    else:
        assert decided is not None
        assert decided[0] is expected[0]
        assert decided[1] == pytest.approx(expected[1])


def test_editing_a_prompt_template_changes_the_id(monkeypatch: pytest.MonkeyPatch) -> None:
    before = BASE.judge_id
    monkeypatch.setitem(
        prompts.PROMPT_VERSIONS, "v1", prompts.PROMPT_VERSIONS["v1"] + " Be strict."
    )
    assert BASE.judge_id != before


def test_a_path_is_stored_as_a_string(tmp_path: Path) -> None:
    config = JudgeConfig(tmp_path / "judge")
    assert config.model == str(tmp_path / "judge")
    assert config.judge_id == JudgeConfig(str(tmp_path / "judge")).judge_id


@pytest.mark.parametrize(
    ("texts", "rule", "success", "share"),
    [
        (["YES", "no", "Yes."], "majority", True, 2 / 3),
        (["YES", "no", "Yes."], "unanimous", False, 2 / 3),
        (["NO", "no", "huh"], "majority", False, 0.0),
        (["yes", "YES", "?"], "unanimous", True, 1.0),
    ],
)
def test_vote_verdict_counts_the_parsable_answers(
    texts: list[str], rule: str, success: bool, share: float
) -> None:
    verdict = vote_verdict(texts, VoteRule(k=3, rule=rule), "judge-1")  # type: ignore[arg-type]
    assert (verdict.success, verdict.p_success, verdict.error) == (success, share, None)
    assert verdict.judge_id == "judge-1" and json.loads(verdict.raw) == texts


def test_vote_verdict_errors_on_too_few_or_wrong_count() -> None:
    few = vote_verdict(["?", "YES", ""], VoteRule(k=3), "j")
    assert (few.success, few.p_success) == (False, None)
    assert few.error == "only 1 of 3 sampled answers are YES or NO (2 unparsable); need at least 2"
    assert vote_verdict(["YES"], VoteRule(k=3), "j").error == (
        "asked for 3 sampled answers, got 1"
    )
