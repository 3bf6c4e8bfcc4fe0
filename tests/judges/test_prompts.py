"""Judge prompt: text, Qwen and OpenAI messages, image resizing, and answer parsing."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.prompts import (
    NO_VARIANTS,
    PROMPT_VERSION,
    YES_VARIANTS,
    answer_counts,
    answer_of_token,
    openai_messages,
    parse_answer,
    prompt_text,
    qwen_messages,
    select_screenshots,
)
from cua_rl.messages import fit_pixels, png_data_url

Image3 = Callable[..., np.ndarray]


def _decode(url: str) -> np.ndarray:
    assert url.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as img:
        assert img.format == "PNG"
        return np.asarray(img.convert("RGB"))


def test_prompt_text_v1() -> None:
    text = prompt_text("  Rename the file to a.txt. ", 1)
    assert PROMPT_VERSION == "v1"
    assert text.splitlines() == [
        "You are judging whether a computer-use agent completed a task on a desktop.",
        "Task instruction: Rename the file to a.txt.",
        "The image above is the final screenshot of the episode.",
        "Did the agent complete the task? Answer with one word: YES or NO.",
    ]
    several = prompt_text("x", 3)
    assert "The 3 images above are the last 3 screenshots of the episode, oldest first" in several


def test_prompt_text_refuses_unknown_versions_and_no_images() -> None:
    with pytest.raises(
        ConfigError, match="unknown prompt version 'v0'; known versions: \\['v1'\\]"
    ):
        prompt_text("x", 1, version="v0")
    with pytest.raises(ValueError, match="n_images must be >= 1, got 0"):
        prompt_text("x", 0)


def test_select_screenshots_keeps_the_last_k_oldest_first(noise: Image3) -> None:
    shots = tuple(noise(i) for i in range(3))
    request = JudgeRequest("x", shots)
    assert [s is t for s, t in zip(select_screenshots(request, 2), shots[1:], strict=True)] == [
        True,
        True,
    ]
    assert len(select_screenshots(request, 10)) == 3
    with pytest.raises(ValueError, match="last_k must be >= 1, got 0"):
        select_screenshots(request, 0)


def test_qwen_messages_carry_images_oldest_first_then_text(noise: Image3) -> None:
    shots = (noise(1), noise(2, 60, 90), noise(3))
    msgs = qwen_messages(
        JudgeRequest("Open the menu.", shots), last_k=2, min_pixels=100, max_pixels=2000
    )
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    content = msgs[0]["content"]
    assert [c["type"] for c in content] == ["image", "image", "text"]
    for part, shot in zip(content[:2], shots[1:], strict=True):
        assert isinstance(part["image"], Image.Image)
        np.testing.assert_array_equal(np.asarray(part["image"]), shot)
        assert (part["min_pixels"], part["max_pixels"]) == (100, 2000)
    assert content[2]["text"] == prompt_text("Open the menu.", 2)


def test_openai_messages_send_resized_pngs_and_the_same_text(solid: Image3) -> None:
    shot = solid((10, 200, 30), 400, 640)
    request = JudgeRequest("Open the menu.", (shot,))
    px = {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 64}
    msgs = openai_messages(request, **px)
    content = msgs[0]["content"]
    assert [c["type"] for c in content] == ["image_url", "text"]
    image = _decode(content[0]["image_url"]["url"])
    assert image.shape == (168, 280, 3)  # fit_pixels(640, 400) -> 280 x 168
    assert (image == np.array([10, 200, 30], np.uint8)).all()
    assert content[1]["text"] == qwen_messages(request, **px)[0]["content"][1]["text"]


def test_png_data_url_round_trips(noise: Image3) -> None:
    shot = noise(4, 33, 47)
    np.testing.assert_array_equal(_decode(png_data_url(shot)), shot)


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 4000),
    height=st.integers(1, 4000),
    min_tokens=st.integers(1, 64),
    extra_tokens=st.integers(0, 2000),
)
def test_fit_pixels_matches_qwen_vl_utils(
    width: int, height: int, min_tokens: int, extra_tokens: int
) -> None:
    vision = pytest.importorskip("qwen_vl_utils.vision_process")
    if max(width, height) / min(width, height) > 200:
        with pytest.raises(ValueError, match="aspect ratio"):
            fit_pixels(width, height, 784, 784 * 4)
        return
    lo, hi = 28 * 28 * min_tokens, 28 * 28 * (min_tokens + extra_tokens)
    w, h = fit_pixels(width, height, lo, hi)
    assert w % 28 == 0 and h % 28 == 0 and w >= 28 and h >= 28
    qh, qw = vision.smart_resize(height, width, 28, min_pixels=lo, max_pixels=hi)
    if qh > 0 and qw > 0:  # for thin images qwen_vl_utils can return 0; we keep one patch
        assert (w, h) == (qw, qh)
    else:
        assert (w, h) == (max(qw, 28), max(qh, 28))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 10, 1, 2), "image size must be positive, got 0x10"),
        ((10, 10, 5, 2), "min_pixels \\(5\\) must be <= max_pixels \\(2\\)"),
        ((1000, 2, 1, 10**6), "aspect ratio of 1000x2 is above 200"),
    ],
)
def test_fit_pixels_refuses_bad_input(args: tuple[int, int, int, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit_pixels(*args)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("YES", True),
        ("yes", True),
        ("Yes.", True),
        ("  **YES**  \n", True),
        ('"Yes"', True),
        ("yes, the file is saved", True),
        ("NO", False),
        ("no.", False),
        ("No!\n<|im_end|>", False),
        ("- no", False),
        ("", None),
        ("   ", None),
        ("Maybe", None),
        ("Y", None),
        ("Yesterday", None),
        ("nope", None),
        ("yes2", None),
        ("I think yes", None),
        ("1. YES", None),
        ("是", None),
    ],
)
def test_parse_answer_examples(text: str, expected: bool | None) -> None:
    assert parse_answer(text) is expected


@given(st.text())
def test_parse_answer_never_raises(text: str) -> None:
    assert parse_answer(text) in (True, False, None)


_PUNCT = st.text(alphabet=" \t\n*_\"'`.,:;!?-()[]", max_size=6)


@given(word=st.sampled_from(YES_VARIANTS + NO_VARIANTS), before=_PUNCT, after=_PUNCT)
def test_answer_words_parse_with_any_surrounding_punctuation(
    word: str, before: str, after: str
) -> None:
    assert parse_answer(before + word + after) is (word.lower() == "yes")


@given(word=st.text(alphabet=st.characters(categories=["Lu", "Ll"]), min_size=1), rest=st.text())
def test_a_first_word_other_than_yes_or_no_is_unparsable(word: str, rest: str) -> None:
    first = parse_answer(word + " " + rest)
    if word.lower() not in ("yes", "no"):
        assert first is None


def test_answer_of_token() -> None:
    assert [answer_of_token(t) for t in ("YES", " yes", "\u0120Yes", "\u2581no", "No\n")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert [answer_of_token(t) for t in ("Y", "Ye", "The", "yes.", "")] == [None] * 5


def test_answer_counts() -> None:
    assert answer_counts(["YES", "no", "Yes.", "huh", ""]) == (2, 1, 2)


@pytest.mark.parametrize(
    "module", ["cua_rl.judges.prompts", "cua_rl.judges.config", "cua_rl.judges.openai_compat"]
)
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
