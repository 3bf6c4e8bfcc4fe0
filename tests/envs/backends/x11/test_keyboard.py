"""Keyboard (x11/keyboard.py): text that is not ASCII typed into mousepad through cua-rl
desktop-server, saved and read back byte for byte; text no key types is an action error."""

from __future__ import annotations

import json

import pytest

from cua_rl.actions import Hotkey, Type
from cua_rl.core import Task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.x11.keyboard import char_keysym, untypeable
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.errors import ActionError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing.waiting import wait_for
from tests.envs.backends.x11.conftest import call, needs_desktop, needs_mousepad

# Xvfb's US map has 19 keycodes without keysym; 2 stay free for xdotool: 17 to bind. This
# text needs 30 new characters in one action, so keys are rebound after the window's pong.
MANY = "一二三四五六七八九十百千万円上下左右中大小月日年時分秒春夏秋冬"


def save_typed(client: VMServerClient, name: str, texts: list[str]) -> bytes:
    """Type ``texts`` into mousepad editing ``~/Documents/<name>``, save, and the file's bytes
    once they changed (at most 20 s)."""
    client.request("POST", "/cua/reset", idempotent=False, timeout_s=60)
    client.upload_file(f"~/Documents/{name}", b"")
    client.open_file(f"~/Documents/{name}", timeout_s=60)
    for text in texts:
        client.act(Type(text))
    client.act(Hotkey(("ctrl", "s")))
    data = wait_for(lambda: client.get_file(f"~/Documents/{name}"), 20, "mousepad's save")
    return data


@pytest.mark.desktop
@needs_desktop
@needs_mousepad
def test_non_ascii_text_is_typed_exactly(backend) -> None:
    texts = ["é € ñ ü ß", "\n漢字テスト\n", "plain ASCII ~!@#$%^&*()_+{}|:\"<>?\n", MANY, "\tñ"]
    saved = save_typed(backend.client, "typed.txt", texts)
    assert saved.decode("utf-8") == "".join(texts)
    health = json.loads(backend.client.request("GET", "/cua/health").body)["keyboard"]
    assert health["n_rebound"] > 0 and health["n_syncs"] > 0  # MANY rebound keys after a pong


@pytest.mark.desktop
@needs_desktop
@needs_mousepad
def test_text_no_key_types_is_an_action_error_in_the_step_info(backend) -> None:
    with pytest.raises(ActionError, match=r"cannot type '\\x07' \(U\+0007\), '\\x85' "
                                          r"\(U\+0085\): control characters have no key"):
        backend.client.act(Type("a\x07b\x85"))
    task = Task(id="local/keys", instruction="type", domain="mousepad", os="ubuntu", max_steps=3)
    env = CUAEnv(backend, FixedTasks([task]), max_steps=3)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(Type("bell\x07"))
    assert "cannot type '\\x07'" in info["action_error"] and not (terminated or truncated)
    _, _, _, _, info = env.step(Type("é"))
    assert info.get("action_error") is None


def test_keysyms_and_untypeable_characters() -> None:
    from Xlib import XK

    assert char_keysym("a") == XK.string_to_keysym("a")
    assert char_keysym("é") == XK.string_to_keysym("eacute")
    assert char_keysym("ß") == XK.string_to_keysym("ssharp")
    assert char_keysym("€") == 0x01000000 + 0x20AC and char_keysym("漢") == 0x01006F22
    assert char_keysym("\n") == char_keysym("\r") == XK.string_to_keysym("Return")
    assert char_keysym("\t") == XK.string_to_keysym("Tab")
    assert untypeable("a\x00\x1b\x7f\x9f\u200b") == ["\x00", "\x1b", "\x7f", "\x9f"]
    with pytest.raises(ActionError, match=r"cannot type '\\x1b' \(U\+001B, a control "):
        char_keysym("\x1b")


@pytest.mark.desktop
@needs_desktop
def test_rebinding_for_a_window_that_does_not_answer_pings_is_an_action_error(backend) -> None:
    """xterm does not take _NET_WM_PING: a text needing more new characters than there are
    free keycodes cannot be typed safely there, and says so (the start of it was typed)."""
    client = backend.client
    client.request("POST", "/cua/reset", idempotent=False, timeout_s=60)
    status, body, _ = call(client, "POST", "/setup/open_file", json_body={"path": "xterm"})
    assert status == 200, body
    greek = "αβγδεζηθικλμνξοπρστυφχψω"  # 24 new characters, 17 free keycodes
    with pytest.raises(ActionError, match=r"typed 1\d of 24 characters, then stopped at '.': the "
                                          r"text needs more than 1\d characters the keyboard map "
                                          r"lacks, and the focused window did not confirm"):
        client.act(Type(greek))
    client.act(Type(greek[:5]))  # few enough: typed


@needs_desktop
def test_a_display_without_free_keycodes_is_an_action_error(monkeypatch) -> None:
    from cua_rl.envs.backends.x11 import keyboard
    from cua_rl.envs.backends.x11.session import DesktopSession

    monkeypatch.setattr(keyboard, "RESERVED", 10_000)  # every free keycode left to xdotool
    with DesktopSession((320, 240), a11y=False, startup_timeout_s=30.0) as session:
        typist = keyboard.Keyboard(session.display)
        try:
            with pytest.raises(ActionError, match=r"cannot type 'é': the keyboard map of :\d+ "
                                                  "has no free keycode to bind it to"):
                typist.type("aé")
            typist.type("plain ASCII needs none\n")
        finally:
            typist.close()
