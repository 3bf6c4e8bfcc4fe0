"""confine / relative_name: every path from a task file, a VM or a request stays in its root."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_rl._paths import confine, relative_name
from cua_rl.errors import TaskSpecError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("name", ["a.txt", "sub/a.txt", "a b%20c.txt", "x..y", ".hidden"])
def test_names_inside_the_root_resolve_into_it(root: Path, name: str) -> None:
    assert confine(root, name, field="stdout") == root.resolve() / name
    assert relative_name(name, field="stdout") == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("C:\\Windows\\x", "absolute"),
        ("c:x", "absolute"),
        ("\\\\server\\share", "absolute"),
        ("..", r"'\.\.'"),
        ("../x", r"'\.\.'"),
        ("a/../../x", r"'\.\.'"),
        ("a/..", r"'\.\.'"),
        ("", "empty"),
        (".", r"'\.'"),
        ("a//b", "empty"),
        ("a/", "empty"),
        ("a\x00b", "NUL"),
        ("a\\b", "backslash"),
        ("%2Fetc%2Fpasswd", "percent-encoded"),
        ("..%2F..%2Fx", "percent-encoded"),
        ("%252Fetc%252Fpasswd", "percent-encoded"),
        ("a%00b", "percent-encoded"),
        ("%2e%2e", "percent-encoded"),
        ("a%5Cb", "percent-encoded"),
    ],
)
def test_escapes_are_refused_naming_field_and_value(root: Path, name: str, why: str) -> None:
    with pytest.raises(TaskSpecError, match=rf"config\[0\]\.stdout: .*{why}") as err:
        confine(root, name, field="config[0].stdout")
    assert repr(name)[:60] in str(err.value) and "allowed" in str(err.value)
    with pytest.raises(TaskSpecError, match=why):
        relative_name(name, field="config[0].stdout")


@pytest.mark.parametrize("value", [None, 5, b"x", ["a"]])
def test_a_value_that_is_not_a_string_is_refused(root: Path, value: object) -> None:
    with pytest.raises(TaskSpecError, match=r"dest: must be a string, got"):
        confine(root, value, field="dest")


def test_plain_names_have_one_component(root: Path) -> None:
    assert confine(root, "a.txt", field="dest", plain=True) == root.resolve() / "a.txt"
    with pytest.raises(TaskSpecError, match=r"dest: .*a plain file name"):
        confine(root, "sub/a.txt", field="dest", plain=True)


def test_symlinks_out_of_the_root_are_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "dir-link").symlink_to(outside)
    (root / "file-link").symlink_to(outside / "secret")
    (root / "inner").mkdir()
    (root / "inner-link").symlink_to(root / "inner")
    for name in ("dir-link/secret", "file-link", "dir-link/new.txt"):
        with pytest.raises(TaskSpecError, match=r"leaves .*after symlinks"):
            confine(root, name, field="mirror")
    assert confine(root, "inner-link/x", field="mirror") == root.resolve() / "inner" / "x"


def test_a_symlinked_root_is_resolved_first(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert confine(alias, "a.txt", field="dest") == root.resolve() / "a.txt"


def test_the_caller_chooses_the_error_class(root: Path) -> None:
    with pytest.raises(ValueError, match=r"path: '\.\./x'") as err:
        confine(root, "../x", field="path", error=ValueError)
    assert not isinstance(err.value, TaskSpecError)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(name=st.text(alphabet=string.printable + "\x00é/\\%.", max_size=40))
def test_any_text_is_refused_or_lands_inside_the_root(root: Path, name: str) -> None:
    try:
        path = confine(root, name, field="f")
    except TaskSpecError as error:
        assert str(error).startswith("f: ")
        return
    real = os.path.realpath(root)
    assert os.path.commonpath([real, str(path)]) == real and str(path) != real
    assert "\x00" not in name and not name.startswith("/") and ".." not in name.split("/")


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(name=st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._ -]{0,30}", fullmatch=True))
def test_ordinary_file_names_are_accepted(root: Path, name: str) -> None:
    assert confine(root, name, field="f", plain=True) == root.resolve() / name


def test_config_paths_resolve_against_the_config_folder_or_the_shipped_sets(
    tmp_path: Path,
) -> None:
    from cua_rl._paths import config_path, shipped_task_sets
    from cua_rl.errors import ConfigError

    assert {"osworld/local", "osworld/probe"} <= set(shipped_task_sets())
    probe = config_path(tmp_path, "shipped:osworld/probe/examples")
    assert probe.is_dir() and probe.parts[-4:] == ("osworld", "task_sets", "probe", "examples")
    assert config_path(tmp_path, "a/b.json") == tmp_path.resolve() / "a" / "b.json"
    assert config_path(tmp_path, "/x/y") == Path("/x/y")
    assert config_path(tmp_path, "~/z") == Path.home() / "z"
    with pytest.raises(ConfigError, match=r"'shipped:osworld/nope': not a shipped task set; "
                       r"shipped: .*shipped:osworld/probe"):  # fmt: skip
        config_path(tmp_path, "shipped:osworld/nope")
    with pytest.raises(ConfigError, match=r"leads out of the shipped task set shipped:osworld/"):
        config_path(tmp_path, "shipped:osworld/probe/../../spec.py")


def test_a_config_with_shipped_tasks_loads_when_copied_anywhere(tmp_path: Path) -> None:
    import shutil

    from cua_rl.envs.backends.x11.spec import X11
    from cua_rl.training.config import load_config

    copy = tmp_path / "elsewhere" / "probe.yaml"
    copy.parent.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "configs" / "osworld_local.yaml", copy)
    config = load_config(copy)
    s = X11.settings(config.env)
    assert all(Path(t).is_dir() and Path(t).name == "examples" for t in s.tasks)
    assert Path(str(s.mirror)).is_dir()
    assert config.run_dir.parent == tmp_path / "runs"
