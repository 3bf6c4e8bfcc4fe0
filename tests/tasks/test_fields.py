"""The task-file field checks (cua_rl/tasks/fields.py) shared by the OSWorld and WAA loaders."""

from __future__ import annotations

import math

import pytest

from cua_rl.errors import TaskSpecError
from cua_rl.tasks.fields import (
    integer,
    kind_of,
    list_of,
    nonempty_string,
    nonnegative_number,
    record,
    string,
)


def test_scalars_pass_through_or_name_the_field() -> None:
    assert string("", "f") == "" and nonempty_string("x", "f") == "x"
    assert nonnegative_number(2, "f") == 2.0 and integer(3, "f") == 3
    for check, value, message in [
        (string, 1, "t.x must be a string, got int"),
        (nonempty_string, "", "t.x must be a non-empty string, got ''"),
        (nonnegative_number, -1, "t.x must be a finite number >= 0, got -1 (int)"),
        (nonnegative_number, math.inf, "t.x must be a finite number >= 0, got inf (float)"),
        (nonnegative_number, True, "t.x must be a finite number >= 0, got True (bool)"),
        (integer, 1.0, "t.x must be an integer, got 1.0 (float)"),
    ]:
        with pytest.raises(TaskSpecError) as caught:
            check(value, "t.x")
        assert str(caught.value) == message
    assert kind_of(None) == "null" and kind_of([]) == "list"


def test_records_and_lists_check_their_parts() -> None:
    check = record({"url": nonempty_string}, {"n": integer})
    out = check({"url": "u", "n": 1}, "step")
    assert dict(out) == {"url": "u", "n": 1}
    with pytest.raises(TypeError):
        out["url"] = "v"  # type: ignore[index]  # read-only
    with pytest.raises(TaskSpecError, match=r"^step: unknown key 'x'; allowed \['n', 'url'\]$"):
        check({"url": "u", "x": 1}, "step")
    with pytest.raises(TaskSpecError, match=r"^step: missing key 'url'$"):
        check({}, "step")
    urls = list_of(nonempty_string)
    assert urls(["a", "b"], "u") == ("a", "b")
    with pytest.raises(TaskSpecError, match=r"^u must be a non-empty list, got \[\]$"):
        urls([], "u")
    assert list_of(string, nonempty=False)([], "u") == ()
    with pytest.raises(TaskSpecError, match=r"^u\[1\] must be a non-empty string, got ''$"):
        urls(["a", ""], "u")
