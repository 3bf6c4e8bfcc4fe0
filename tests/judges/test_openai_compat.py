"""OpenAIJudge over real HTTP against the local FakeOpenAIServer (127.0.0.1, ephemeral port)."""

from __future__ import annotations

import http.client
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cua_rl.errors import ConfigError, JudgeError
from cua_rl.judges.base import Judge, JudgeRequest
from cua_rl.judges.config import JudgeConfig, ThresholdRule, VoteRule
from cua_rl.judges.openai_compat import OpenAIJudge, p_success_from_logprobs
from cua_rl.judges.prompts import prompt_text
from cua_rl.testing.openai_server import FakeOpenAIServer, green_policy

Image3 = Callable[..., np.ndarray]

GREEN, RED = (20, 200, 40), (210, 30, 30)
CONFIG = JudgeConfig("fake-judge", kind="openai", min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16)


def make_judge(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIJudge:
    config = kwargs.pop("config", CONFIG)
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIJudge(config, server.url, **kwargs)


def test_verdicts_come_from_the_logprobs(solid: Image3) -> None:
    with FakeOpenAIServer() as server:
        judge = make_judge(server)
        assert isinstance(judge, Judge)
        verdicts = judge.judge(
            [JudgeRequest("Make it green.", (solid(GREEN),)), JudgeRequest("x", (solid(RED),))]
        )
        judge.close()
    assert [v.success for v in verdicts] == [True, False]
    # The server spreads P(YES) = 0.9 / 0.1 over YES/Yes/yes and NO/No/no plus other tokens.
    assert verdicts[0].p_success == pytest.approx(0.9, abs=1e-9)
    assert verdicts[1].p_success == pytest.approx(0.1, abs=1e-9)
    assert [v.raw for v in verdicts] == ["YES", "NO"]
    assert all(v.ok and v.judge_id == CONFIG.judge_id for v in verdicts)
    assert server.requests == 2


def test_request_body_and_images(solid: Image3) -> None:
    with FakeOpenAIServer() as server:
        judge = make_judge(server, max_tokens=3)
        shots = (solid(RED, 400, 640), solid(GREEN, 400, 640))
        judge.judge([JudgeRequest("Open it.", shots)])
    body = server.bodies[0]
    assert body["model"] == "fake-judge"
    assert (body["temperature"], body["max_tokens"], body["n"]) == (0.0, 3, 1)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
    content = body["messages"][0]["content"]
    assert [c["type"] for c in content] == ["image_url", "text"]  # last_k = 1
    assert content[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert content[1]["text"] == prompt_text("Open it.", 1)


def test_images_are_resized_to_the_pixel_bounds(solid: Image3) -> None:
    sizes: list[tuple[int, ...]] = []

    def policy(images: Any, text: str) -> float:
        sizes.extend(i.shape for i in images)
        return green_policy(images, text)

    config = JudgeConfig("fake-judge", kind="openai", max_pixels=28 * 28 * 64, last_k=2)
    with FakeOpenAIServer(policy) as server:
        make_judge(server, config=config).judge(
            [JudgeRequest("x", (solid(RED, 100, 100), solid(GREEN, 400, 640), solid(RED, 40, 40)))]
        )
    assert sizes == [(168, 280, 3), (56, 56, 3)]  # the last two, oldest first; 40 -> 56 (min)


def test_without_logprobs_the_text_decides(solid: Image3) -> None:
    with FakeOpenAIServer(logprobs=False) as server:
        verdicts = make_judge(server).judge(
            [JudgeRequest("x", (solid(GREEN),)), JudgeRequest("x", (solid(RED),))]
        )
    assert [(v.success, v.p_success, v.raw) for v in verdicts] == [
        (True, None, "YES"),
        (False, None, "NO"),
    ]


def test_logprobs_can_be_switched_off(solid: Image3) -> None:
    with FakeOpenAIServer() as server:
        verdict = make_judge(server, top_logprobs=0).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert "logprobs" not in server.bodies[0]
    assert (verdict.success, verdict.p_success) == (True, None)


def test_unparsable_text_without_logprobs_is_an_error_not_a_false(solid: Image3) -> None:
    with FakeOpenAIServer(logprobs=False, answer_text="I cannot tell.") as server:
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.error == "unparsable answer 'I cannot tell.' (expected YES or NO)"
    assert verdict.raw == "I cannot tell." and verdict.p_success is None


def test_threshold_applies_to_the_logprob_p(solid: Image3) -> None:
    config = JudgeConfig("fake-judge", kind="openai", decision=ThresholdRule(0.95))
    with FakeOpenAIServer() as server:
        verdict = make_judge(server, config=config).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.p_success == pytest.approx(0.9) and verdict.success is False


def test_retries_after_503s(solid: Image3) -> None:
    with FakeOpenAIServer(fail_first=2) as server:
        judge = make_judge(server, max_retries=3)
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.ok and verdict.success
    assert server.requests == 3
    assert (judge.n_attempts, judge.n_retries, judge.n_failed) == (3, 2, 0)
    assert judge.summary()["judge/http_retries"] == 2.0


def test_gives_up_after_the_retries_with_an_error_verdict(solid: Image3) -> None:
    with FakeOpenAIServer(fail_first=100, fail_status=502) as server:
        judge = make_judge(server, max_retries=2)
        verdicts = judge.judge(
            [JudgeRequest("x", (solid(GREEN),)), JudgeRequest("y", (solid(RED),))]
        )
    assert server.requests == 6
    for verdict in verdicts:
        assert verdict.error is not None
        assert verdict.error.startswith("failed after 3 attempts: HTTP 502:")
        assert "injected failure" in verdict.error
        assert verdict.p_success is None and verdict.success is False
    assert judge.n_failed == 2


def test_429_is_retried_and_retry_after_is_honoured(solid: Image3) -> None:
    with FakeOpenAIServer(fail_first=1, fail_status=429, retry_after=0.3) as server:
        start = time.perf_counter()
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
        elapsed = time.perf_counter() - start
    assert verdict.ok and server.requests == 2
    assert elapsed >= 0.3


def test_other_4xx_are_not_retried(solid: Image3) -> None:
    with FakeOpenAIServer(fail_first=1, fail_status=400) as server:
        verdict = make_judge(server, max_retries=3).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert server.requests == 1
    assert verdict.error is not None and verdict.error.startswith("HTTP 400:")


def test_backoff_grows_exponentially_with_jitter(solid: Image3) -> None:
    with FakeOpenAIServer(fail_first=3) as server:
        judge = make_judge(server, max_retries=3, backoff_s=0.05, max_backoff_s=10.0)
        start = time.perf_counter()
        assert judge.judge([JudgeRequest("x", (solid(GREEN),))])[0].ok
        elapsed = time.perf_counter() - start
    # Waits of 0.05, 0.1, 0.2 s times a factor in [0.5, 1): between 0.175 and 0.35 s.
    assert 0.17 <= elapsed < 1.5


def test_timeout_gives_an_error_verdict(solid: Image3) -> None:
    with FakeOpenAIServer(delay_s=2.0) as server:
        judge = make_judge(server, timeout_s=0.2, max_retries=1)
        start = time.perf_counter()
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        elapsed = time.perf_counter() - start
    assert verdict.error is not None
    assert verdict.error.startswith("failed after 2 attempts: TimeoutError")
    assert server.requests == 2
    assert elapsed < 1.5


def test_unreachable_server_gives_error_verdicts(solid: Image3) -> None:
    server = FakeOpenAIServer().start()
    url = server.url
    server.stop()  # nothing listens on that port now
    judge = OpenAIJudge(CONFIG, url, max_retries=1, backoff_s=0.01, timeout_s=2.0)
    verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.error is not None and "ConnectionRefusedError" in verdict.error


def test_404_raises_a_clear_judge_error(solid: Image3) -> None:
    with FakeOpenAIServer(mode="not_found") as server:
        judge = make_judge(server)
        requests = [JudgeRequest("x", (solid(GREEN),)) for _ in range(3)]
        with pytest.raises(JudgeError, match=r"no such endpoint or model \(404\) at http://127"):
            judge.judge(requests)
        with pytest.raises(JudgeError, match="Check base_url"):
            judge.judge(requests[:1])


def test_401_raises_and_names_the_key_variable_not_the_key(
    solid: Image3, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-very-secret")
    with FakeOpenAIServer(fail_first=1, fail_status=401) as server:
        judge = make_judge(server, api_key_env="JUDGE_TEST_KEY")
        with pytest.raises(JudgeError, match=r"refused the API key \(401\)") as info:
            judge.judge([JudgeRequest("x", (solid(GREEN),))])
    assert "$JUDGE_TEST_KEY" in str(info.value)
    assert "sk-very-secret" not in str(info.value)


def test_malformed_json_gives_an_error_verdict(solid: Image3) -> None:
    with FakeOpenAIServer(mode="malformed") as server:
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.error is not None and verdict.error.startswith("malformed response (")
    assert server.requests == 1


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_is_bounded(solid: Image3, limit: int) -> None:
    with FakeOpenAIServer(delay_s=0.15) as server:
        judge = make_judge(server, max_concurrency=limit)
        verdicts = judge.judge([JudgeRequest(f"t{i}", (solid(GREEN),)) for i in range(6)])
        judge.close()
    assert all(v.ok for v in verdicts)
    assert server.max_in_flight == limit


def test_results_keep_the_request_order(solid: Image3) -> None:
    with FakeOpenAIServer(delay_s=0.01) as server:
        judge = make_judge(server, max_concurrency=4)
        colours = [GREEN if i % 3 else RED for i in range(10)]
        verdicts = judge.judge([JudgeRequest("x", (solid(c),)) for c in colours])
    assert [v.success for v in verdicts] == [c == GREEN for c in colours]


def test_api_key_is_sent_but_never_logged(
    solid: Image3, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-very-secret")
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(fail_first=1, fail_status=400) as server:
        judge = make_judge(server, api_key_env="JUDGE_TEST_KEY")
        judge.judge([JudgeRequest("x", (solid(GREEN),)), JudgeRequest("y", (solid(GREEN),))])
    assert [h.get("Authorization") for h in server.headers] == ["Bearer sk-very-secret"] * 2
    assert "sk-very-secret" not in caplog.text
    assert "sk-very-secret" not in repr(judge) and "sk-very-secret" not in str(
        vars(judge).get("api_key_env")
    )


def test_no_key_no_header(solid: Image3) -> None:
    with FakeOpenAIServer() as server:
        make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])
    assert "Authorization" not in server.headers[0]


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="api_key_env names 'JUDGE_TEST_KEY', which is not set"):
        OpenAIJudge(CONFIG, "http://127.0.0.1:1/v1", api_key_env="JUDGE_TEST_KEY")


def test_vote_asks_for_k_samples(solid: Image3) -> None:
    config = JudgeConfig(
        "fake-judge", kind="openai", decision=VoteRule(k=5, temperature=0.8, seed=3)
    )
    with FakeOpenAIServer(policy=lambda images, text: 0.6) as server:
        judge = make_judge(server, config=config)
        first = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        again = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
    body = server.bodies[0]
    assert (body["n"], body["temperature"], body["seed"], body["max_tokens"]) == (5, 0.8, 3, 4)
    answers = json.loads(first.raw)
    assert len(answers) == 5
    yes = sum(a == "YES" for a in answers)
    assert first.p_success == pytest.approx(yes / 5)
    assert first.success is (yes >= 3)
    assert again == first  # same seed, same samples


def test_vote_with_unparsable_samples_is_an_error(solid: Image3) -> None:
    config = JudgeConfig("fake-judge", kind="openai", decision=VoteRule(k=3))
    with FakeOpenAIServer(answer_text="hmm") as server:
        verdict = make_judge(server, config=config).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.error == (
        "only 0 of 3 sampled answers are YES or NO (3 unparsable); need at least 2"
    )


def test_base_url_without_v1_is_completed(solid: Image3) -> None:
    with FakeOpenAIServer() as server:
        root = f"http://127.0.0.1:{server.port}"
        judge = OpenAIJudge(CONFIG, root + "/")
        assert judge.base_url == root + "/v1"
        assert judge.judge([JudgeRequest("x", (solid(GREEN),))])[0].ok


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "ftp://host/v1"}, "base_url must be an http\\(s\\) URL, got 'ftp://host/v1'"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1, got 0"),
        ({"max_retries": -1}, "max_retries must be an integer >= 0, got -1"),
        ({"config": JudgeConfig("m")}, "needs a config with kind='openai', got 'qwen_vl'"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"config": CONFIG, "base_url": "http://127.0.0.1:1/v1", **kwargs}
    with pytest.raises(ConfigError, match=match):
        OpenAIJudge(args.pop("config"), args.pop("base_url"), **args)


def test_p_success_from_logprobs_edge_cases() -> None:
    def entry(token: str, p: float) -> dict[str, Any]:
        return {"token": token, "logprob": math.log(p)}

    top = [entry("Yes", 0.3), entry(" yes", 0.1), entry("No", 0.2), entry("Maybe", 0.4)]
    assert p_success_from_logprobs({"content": [{"top_logprobs": top}]}) == pytest.approx(2 / 3)
    assert p_success_from_logprobs(None) is None
    assert p_success_from_logprobs({"content": []}) is None
    assert p_success_from_logprobs({"content": [{"token": "YES", "logprob": 0.0}]}) is None
    assert p_success_from_logprobs({"content": [{"top_logprobs": [entry("The", 1.0)]}]}) is None
    bad = {"content": [{"top_logprobs": [{"token": "YES", "logprob": "x"}]}]}
    assert p_success_from_logprobs(bad) is None


def test_server_lists_models_and_binds_loopback() -> None:
    with FakeOpenAIServer(model="judge-x") as server:
        assert server.url.startswith("http://127.0.0.1:")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/v1/models")
        assert json.loads(conn.getresponse().read())["data"][0]["id"] == "judge-x"
        conn.close()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port
