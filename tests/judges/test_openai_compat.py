"""OpenAIJudge over real HTTP against the local FakeOpenAIServer (127.0.0.1, ephemeral port)."""

from __future__ import annotations

import http.client
import json
import logging
import math
import socket
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cua_rl.errors import ConfigError, JudgeError
from cua_rl.judges.base import Judge, JudgeRequest, check_judge
from cua_rl.judges.cache import CachedJudge, VerdictCache
from cua_rl.judges.config import JudgeConfig, ThresholdRule, VoteRule
from cua_rl.judges.openai_compat import OpenAIJudge, p_success_from_logprobs
from cua_rl.judges.prompts import prompt_text
from cua_rl.judges.simulated import SimulatedJudge
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
    assert verdict.error == "failed after 2 attempts: timed out after 0.2 s"
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
    assert verdict.error is not None
    assert verdict.error.startswith("malformed response: the body is not JSON (")
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


# -- hardening: deadlines, size caps, response shapes, check(), dead servers -------------------


def _unused_url() -> str:
    """A 127.0.0.1 URL where nothing listens (the port was bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_slow_drip_is_bounded_by_the_total_deadline(solid: Image3) -> None:
    # The server sends one byte every 0.25 s: a socket-read timeout of 1 s never fires.
    with FakeOpenAIServer(mode="drip", drip_interval_s=0.25) as server:
        judge = make_judge(server, timeout_s=1.0, max_retries=0)
        start = time.perf_counter()
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        elapsed = time.perf_counter() - start
        judge.close()
    assert verdict.error is not None and not verdict.ok
    assert "timed out after 1 s" in verdict.error
    assert 0.9 <= elapsed < 2.0


def test_the_deadline_holds_for_every_attempt(solid: Image3) -> None:
    with FakeOpenAIServer(mode="drip", drip_interval_s=0.2) as server:
        judge = make_judge(server, timeout_s=0.5, max_retries=2, backoff_s=0.0)
        start = time.perf_counter()
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        elapsed = time.perf_counter() - start
        judge.close()
    assert verdict.error is not None
    assert verdict.error.startswith("failed after 3 attempts: timed out after 0.5 s")
    assert server.requests == 3
    assert 1.4 <= elapsed < 2.5  # 3 attempts of 0.5 s, no backoff


def test_a_huge_streamed_body_is_cut_at_the_cap(solid: Image3) -> None:
    # 50 MB without a Content-Length: read in chunks, stop past the cap, keep memory small.
    with FakeOpenAIServer(mode="huge", huge_bytes=50_000_000) as server:
        judge = make_judge(server, max_response_bytes=1_000_000, max_retries=2)
        tracemalloc.start()
        start = time.perf_counter()
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        judge.close()
    assert verdict.error == "the response is larger than max_response_bytes=1000000 bytes"
    assert server.requests == 1  # not retried: the same request gets the same answer
    assert elapsed < 2.0
    assert peak < 8_000_000


def test_a_content_length_over_the_cap_is_refused_before_reading(solid: Image3) -> None:
    body = json.dumps({"choices": [{"message": {"content": "YES" + " " * 5000}}]}).encode()
    with FakeOpenAIServer(raw_body=body) as server:
        verdict = make_judge(server, max_response_bytes=1024).judge(
            [JudgeRequest("x", (solid(GREEN),))]
        )[0]
    assert verdict.error == "the response is larger than max_response_bytes=1024 bytes"


def _choice_body(content: Any) -> bytes:
    message = {"role": "assistant", "content": content}
    return json.dumps({"choices": [{"message": message}]}).encode()


@pytest.mark.parametrize(
    ("content", "success"),
    [
        ([{"type": "text", "text": "YES"}], True),
        ([{"type": "text", "text": "N"}, {"type": "text", "text": "O"}], False),
        ([{"type": "refusal", "refusal": "hm"}, {"type": "text", "text": "Yes."}], True),
    ],
)
def test_content_as_a_list_of_parts_is_joined(solid: Image3, content: Any, success: bool) -> None:
    with FakeOpenAIServer(raw_body=_choice_body(content)) as server:
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.ok, verdict.error
    assert verdict.success is success and verdict.p_success is None


def test_vote_accepts_content_parts(solid: Image3) -> None:
    body = json.dumps(
        {"choices": [{"message": {"content": [{"type": "text", "text": "YES"}]}}] * 3}
    ).encode()
    config = JudgeConfig("fake-judge", kind="openai", decision=VoteRule(k=3))
    with FakeOpenAIServer(raw_body=body) as server:
        verdict = make_judge(server, config=config).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.ok and verdict.success is True and verdict.p_success == 1.0


_DEEP = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
_DEEP_TOKEN = (
    b'{"choices": [{"message": {"content": "YES"}, "logprobs": {"content": [{"top_logprobs": '
    b'[{"token": ' + b"[" * 900 + b"]" * 900 + b', "logprob": 0.0}]}]}}]}'
)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_choice_body(1), "choices[0].message.content is a number"),
        (_choice_body(None), "choices[0].message.content is null"),
        (_choice_body({"text": "YES"}), "choices[0].message.content is an object"),
        (_choice_body(True), "choices[0].message.content is a boolean"),
        (_choice_body([{"type": "text", "text": 3}]), "content part 0 is not a text part"),
        (_choice_body(["YES"]), "content part 0 is not a text part"),
        (json.dumps({"choices": {"message": "YES"}}).encode(), "choices is an object"),
        (json.dumps({"choices": ["YES"]}).encode(), "choices[0] is a string"),
        (json.dumps({"choices": [{"message": 2}]}).encode(), "choices[0].message is a number"),
        (json.dumps([1, 2]).encode(), "the response is an array"),
        (b'{"choices": [{"message": {"content": "\xff\xfeYES"}}]}', "not valid UTF-8"),
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (_DEEP, "nested too deeply"),
    ],
)
def test_odd_responses_are_error_verdicts(solid: Image3, raw: bytes, message: str) -> None:
    with FakeOpenAIServer(raw_body=raw) as server:
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert not verdict.ok and verdict.error is not None
    assert verdict.error.startswith("malformed response: ")
    assert message in verdict.error
    assert verdict.success is False and verdict.p_success is None


def test_deeply_nested_logprob_tokens_fall_back_to_the_text(solid: Image3) -> None:
    with FakeOpenAIServer(raw_body=_DEEP_TOKEN) as server:
        verdict = make_judge(server).judge([JudgeRequest("x", (solid(GREEN),))])[0]
    assert verdict.ok and verdict.success is True and verdict.p_success is None


def test_check_asks_the_model_list_once() -> None:
    with FakeOpenAIServer() as server:
        judge = make_judge(server)
        assert judge.check() is None
        check_judge(judge)
    assert (server.model_requests, server.requests) == (2, 0)


def test_check_names_the_url_of_an_unreachable_server() -> None:
    url = _unused_url()
    judge = OpenAIJudge(CONFIG, url, timeout_s=5.0)
    start = time.perf_counter()
    with pytest.raises(JudgeError, match=f"^judge at {url} is unreachable: ConnectionRefused"):
        judge.check()
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "not_found"}, r"GET http://127\.0\.0\.1:\d+/v1/models answered HTTP 404"),
        ({"mode": "malformed"}, r"answered a body that is not an OpenAI model list"),
        ({"model": "other"}, r"does not serve model 'fake-judge'; it serves \['other'\]"),
        ({"mode": "drip", "drip_interval_s": 0.2}, r"is unreachable: timed out after 1 s"),
    ],
)
def test_check_refuses_servers_that_answer_garbage(kwargs: dict[str, Any], message: str) -> None:
    with FakeOpenAIServer(**kwargs) as server:
        judge = make_judge(server, timeout_s=1.0)
        start = time.perf_counter()
        with pytest.raises(JudgeError, match=f"^judge at {server.url}.*{message}"):
            judge.check()
        assert time.perf_counter() - start < 2.0


def test_check_judge_forwards_through_the_cache_and_skips_judges_without_check(
    tmp_path: Any,
) -> None:
    check_judge(SimulatedJudge(0.1, 0.1))  # nothing to check
    cached = CachedJudge(OpenAIJudge(CONFIG, _unused_url()), VerdictCache(tmp_path / "v.sqlite"))
    with pytest.raises(JudgeError, match="is unreachable"):
        check_judge(cached)
    cached.close()


def test_consecutive_connection_failures_stop_the_batch(solid: Image3) -> None:
    url = _unused_url()
    judge = OpenAIJudge(
        CONFIG, url, max_retries=10, backoff_s=0.01, max_concurrency=1, max_connection_failures=3
    )
    requests = [JudgeRequest(f"t{i}", (solid(GREEN),)) for i in range(4)]
    start = time.perf_counter()
    with pytest.raises(
        JudgeError, match=f"^judge at {url} unreachable: 3 consecutive connection failures"
    ):
        judge.judge(requests)
    assert time.perf_counter() - start < 1.0
    assert judge.n_attempts == 3
    judge.close()


def test_a_server_that_dies_mid_batch_stops_the_batch(solid: Image3) -> None:
    with FakeOpenAIServer(die_after=3) as server:
        url = server.url
        judge = make_judge(server, max_concurrency=1, max_retries=3)
        requests = [JudgeRequest(f"t{i}", (solid(GREEN),)) for i in range(8)]
        with pytest.raises(JudgeError, match="unreachable: 5 consecutive connection failures"):
            judge.judge(requests)
        judge.close()
    assert server.requests == 3 and url.startswith("http://127.0.0.1:")


def test_a_success_resets_the_consecutive_failure_count(
    solid: Image3, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = json.dumps({"choices": [{"message": {"content": "YES"}}]}).encode()
    script = iter([ConnectionRefusedError(111, "refused")] * 2 + [ok] + [ConnectionResetError()] * 2
                  + [ok])  # fmt: skip

    def fake_exchange(*args: Any, **kwargs: Any) -> tuple[int, bytes, str | None]:
        step = next(script)
        if isinstance(step, Exception):
            raise step
        return 200, step, None

    judge = OpenAIJudge(CONFIG, _unused_url(), max_retries=5, backoff_s=0.0, max_concurrency=1,
                        max_connection_failures=3)  # fmt: skip
    monkeypatch.setattr(judge, "_exchange", fake_exchange)
    verdicts = judge.judge([JudgeRequest(f"t{i}", (solid(GREEN),)) for i in range(2)])
    assert [v.success for v in verdicts] == [True, True]
    assert judge.n_attempts == 6


def test_timeouts_are_not_connection_failures(solid: Image3) -> None:
    with FakeOpenAIServer(delay_s=2.0) as server:
        judge = make_judge(server, timeout_s=0.2, max_retries=3, max_connection_failures=2)
        verdict = judge.judge([JudgeRequest("x", (solid(GREEN),))])[0]
        judge.close()
    assert verdict.error is not None and "timed out after 0.2 s" in verdict.error
    assert server.requests == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_response_bytes": 0}, "max_response_bytes must be an integer >= 1024, got 0"),
        ({"max_connection_failures": 0}, "max_connection_failures must be an integer >= 1, got 0"),
    ],
)
def test_bad_hardening_settings_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        OpenAIJudge(CONFIG, "http://127.0.0.1:1/v1", **kwargs)
