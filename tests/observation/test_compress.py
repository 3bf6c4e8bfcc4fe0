"""Compressors: the a11y filter keeps what the task needs, the VLM summary goes through a judge
backend (the local fake OpenAI server, 127.0.0.1), token counts are exact for their rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cua_rl.core import Observation, Task
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task
from cua_rl.errors import ConfigError, JudgeError
from cua_rl.judges.config import JudgeConfig
from cua_rl.judges.openai_compat import OpenAIJudge
from cua_rl.observation import (
    A11yFilter,
    RawA11y,
    Screenshot,
    VLMSummary,
    count_tokens,
    image_tokens,
)
from cua_rl.testing.openai_server import FakeOpenAIServer

A11Y = """desktop "SimDesk" @(0,0,640,400)
  window "notes.txt - Editor" [focused] @(50,10,400,300)
    button "Close" @(430,10,16,16)
    label "Line 1" @(60,40,100,12)
    label "kettle count" @(60,60,100,12)
    textarea "Text" value="the kettle is hot" [focused] @(60,80,300,200)
  taskbar "Taskbar" @(0,380,640,20)
    clock "Clock" value="08:00:01" @(569,380,71,20)"""

TASK = Task("t", "Count how often 'kettle' appears", "editor", "simdesk")


def _obs(a11y: str = A11Y) -> Observation:
    return Observation(np.zeros((400, 640, 3), np.uint8), a11y=a11y)


def test_count_tokens_and_image_tokens() -> None:
    assert count_tokens("") == 0 and count_tokens(None) == 0
    assert count_tokens('button "OK"') == 4
    assert image_tokens(1280, 720) == 46 * 26  # fit_pixels: 1288 x 728
    assert image_tokens(28, 28) == 4  # raised to min_pixels (56 x 56)
    # capped by max_pixels: 1920 x 1080 scaled to 1280 * 784 pixels
    assert image_tokens(1920, 1080) <= 1280


def test_a11y_filter_keeps_interactive_and_task_words() -> None:
    got = A11yFilter().compress(_obs(), TASK)
    lines = got.text.splitlines()
    assert lines == [
        '  window "notes.txt - Editor" [focused] @(250,160)',
        '    button "Close" @(438,18)',
        '    label "kettle count" @(110,66)',
        '    textarea "Text" = "the kettle is hot" [focused] @(210,180)',
    ]
    assert got.tokens == count_tokens(got.text)
    raw = RawA11y().compress(_obs(), TASK)
    assert raw.text == A11Y and raw.tokens == count_tokens(A11Y)
    assert got.tokens < raw.tokens


def test_a11y_filter_on_a_simdesk_screen() -> None:
    backend = SimDeskBackend(SimDeskConfig(640, 400))
    task = make_task("webform_fill", seed=0)
    obs = backend.reset(task)
    from cua_rl.envs.backends.simdesk.expert import SimDeskExpert

    expert = SimDeskExpert(backend, task)
    for _ in range(2):
        obs = backend.step(expert.next_action())
    f = A11yFilter().compress(obs, task)
    r = RawA11y().compress(obs, task)
    assert "Clock" not in f.text and "Submit" in f.text
    assert f.tokens < 0.8 * r.tokens, (f.tokens, r.tokens)


def test_a11y_filter_max_lines_and_errors() -> None:
    assert len(A11yFilter(max_lines=2).compress(_obs(), TASK).text.splitlines()) == 2
    with pytest.raises(ConfigError, match="max_lines must be an int >= 1, got 0"):
        A11yFilter(max_lines=0)


def test_screenshot_form_counts_visual_tokens() -> None:
    got = Screenshot().compress(_obs(), TASK)
    assert got.text is None and got.screenshot.shape == (400, 640, 3)
    assert got.tokens == image_tokens(640, 400)


def _judge(server: FakeOpenAIServer, **kw) -> OpenAIJudge:
    cfg = JudgeConfig("fake-judge", kind="openai", min_pixels=28 * 28 * 4,
                      max_pixels=28 * 28 * 16)
    return OpenAIJudge(cfg, server.url, max_tokens=64, backoff_s=0.01, timeout_s=5.0, **kw)


def test_vlm_summary_through_a_served_judge() -> None:
    answer = "dialog | Software Update | - | centre\ntextarea | Text | the kettle is hot | left"
    with FakeOpenAIServer(answer_text=answer) as server:
        comp = VLMSummary(_judge(server))
        got = comp.compress(_obs(), TASK)
        body = server.bodies[-1]
    assert got.text == answer and got.tokens == count_tokens(answer)
    assert comp.model_calls == 1
    assert body["max_tokens"] == 64
    text = json.dumps(body["messages"])
    assert "Count how often 'kettle' appears" in text and "image_url" in text


def test_vlm_summary_error_is_raised_not_emptied() -> None:
    with FakeOpenAIServer(fail_first=10, fail_status=400) as server:
        comp = VLMSummary(_judge(server, max_retries=0))
        with pytest.raises(JudgeError, match="VLMSummary: the judge backend failed"):
            comp.compress(_obs(), TASK)


def test_vlm_summary_config_errors() -> None:
    with pytest.raises(ConfigError, match="needs a judge with judge_messages"):
        VLMSummary(object())  # type: ignore[arg-type]
    class _Local:
        judge_id = "local"

        def judge_messages(self, conversations):
            return []

        def prepare_messages(self, conversations):
            return None

    with pytest.raises(ConfigError, match="_Local decides YES/NO from the next token"):
        VLMSummary(_Local())
    with FakeOpenAIServer() as server, pytest.raises(ConfigError, match="instruction"):
        VLMSummary(_judge(server), prompt="Describe the screen.")
