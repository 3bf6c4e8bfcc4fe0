"""VerdictCache (sqlite, content-hash keys, threads) and the CachedJudge wrapper."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from cua_rl.core import Verdict
from cua_rl.errors import JudgeError
from cua_rl.judges.base import Judge, JudgeRequest
from cua_rl.judges.cache import CachedJudge, VerdictCache, verdict_key

Image3 = Callable[..., np.ndarray]


class CountingJudge:
    """Answers YES when the instruction contains "ok"; counts what it is asked."""

    def __init__(self, judge_id: str = "counting:v1", fail: str = "") -> None:
        self.judge_id = judge_id
        self.fail = fail
        self.calls: list[int] = []
        self.seen: list[str] = []
        self.closed = False

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.calls.append(len(requests))
        out = []
        for r in requests:
            self.seen.append(r.instruction)
            if self.fail and self.fail in r.instruction:
                out.append(Verdict(False, None, "", self.judge_id, error="timeout"))
            else:
                ok = "ok" in r.instruction
                out.append(Verdict(ok, 0.9 if ok else 0.2, "YES" if ok else "NO", self.judge_id))
        return out

    def close(self) -> None:
        self.closed = True


class PromptingJudge(CountingJudge):
    """Sees only the last screenshot and a fixed prompt prefix (like the model judges)."""

    def prompt_parts(self, request: JudgeRequest) -> tuple[str, tuple[np.ndarray, ...]]:
        return "PROMPT " + request.instruction, request.screenshots[-1:]


def test_fakes_satisfy_the_judge_protocol() -> None:
    assert isinstance(CountingJudge(), Judge)
    assert isinstance(CachedJudge(CountingJudge(), VerdictCache(":memory:")), Judge)


def test_key_is_a_sha256_that_covers_every_input(noise: Image3) -> None:
    a = noise(0, 4, 6)
    key = verdict_key("j", "p", [a])
    assert len(key) == 64 and int(key, 16) >= 0
    assert verdict_key("j", "p", [a.copy()]) == key  # content, not identity
    same_bytes_other_shape = a.reshape(6, 4, 3)
    flipped = a.copy()
    flipped[0, 0, 0] ^= 1
    others = [
        verdict_key("j2", "p", [a]),
        verdict_key("j", "p ", [a]),
        verdict_key("j", "p", [flipped]),
        verdict_key("j", "p", [same_bytes_other_shape]),
        verdict_key("j", "p", [a, a]),
        verdict_key("j", "p", []),
        verdict_key("jp", "", [a]),  # no ambiguity between fields
    ]
    assert len({key, *others}) == len(others) + 1
    b = noise(1, 4, 6)
    assert verdict_key("j", "p", [a, b]) != verdict_key("j", "p", [b, a])


def test_put_then_get_counts_hits_and_misses(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path / "sub" / "verdicts.sqlite")
    v = Verdict(True, 0.75, "YES", "j")
    assert cache.put_many({"k1": v, "k2": Verdict(False, None, "no", "j")}) == 2
    got = cache.get_many(["k1", "k2", "k3", "k1"])
    assert set(got) == {"k1", "k2"}
    assert got["k1"] == Verdict(True, 0.75, "YES", "j", cached=True)
    assert got["k2"].p_success is None and not got["k2"].success
    assert (cache.hits, cache.misses) == (2, 1)  # distinct keys
    assert cache.get("k3") is None
    assert cache.stats() == {
        "judge/cache_hits": 2.0,
        "judge/cache_misses": 2.0,
        "judge/cache_hit_rate": 0.5,
    }
    assert len(cache) == 2
    cache.close()


def test_verdicts_with_errors_are_not_stored() -> None:
    cache = VerdictCache(":memory:")
    stored = cache.put_many({"bad": Verdict(False, None, "", "j", error="timeout")})
    assert stored == 0 and len(cache) == 0


def test_cache_survives_reopening_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with VerdictCache(path) as cache:
        cache.put_many({"k": Verdict(True, 0.6, "Yes", "j")})
    with VerdictCache(path) as again:
        assert again.get("k") == Verdict(True, 0.6, "Yes", "j", cached=True)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_closed_cache_refuses_use() -> None:
    cache = VerdictCache(":memory:")
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(RuntimeError, match="is closed"):
        cache.get_many(["k"])


def test_many_keys_in_one_call(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path / "v.sqlite")
    items = {f"k{i}": Verdict(i % 2 == 0, i / 2000, str(i), "j") for i in range(1200)}
    assert cache.put_many(items) == 1200
    got = cache.get_many([*items, "nope"])
    assert len(got) == 1200 and got["k1199"].raw == "1199"


def test_concurrent_threads_and_two_handles_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    caches = [VerdictCache(path), VerdictCache(path)]
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            cache = caches[t % 2]
            for i in range(25):
                key = f"t{t}-{i}"
                cache.put_many({key: Verdict(True, 0.5, key, "j")})
                assert cache.get(key) is not None
        except BaseException as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(caches[0]) == 8 * 25
    assert caches[1].get("t7-24") == Verdict(True, 0.5, "t7-24", "j", cached=True)
    for cache in caches:
        cache.close()


def test_cached_judge_only_sends_misses(noise: Image3, tmp_path: Path) -> None:
    inner = CountingJudge()
    judge = CachedJudge(inner, VerdictCache(tmp_path / "v.sqlite"))
    shot = noise(0)
    first = judge.judge([JudgeRequest("ok 1", (shot,)), JudgeRequest("bad 2", (shot,))])
    assert inner.calls == [2]
    assert [v.cached for v in first] == [False, False]
    second = judge.judge(
        [
            JudgeRequest("bad 2", (shot,)),
            JudgeRequest("ok 3", (shot,)),
            JudgeRequest("ok 1", (shot,)),
        ]
    )
    assert inner.calls == [2, 1] and inner.seen[-1] == "ok 3"
    assert [v.cached for v in second] == [True, False, True]
    assert [v.success for v in second] == [False, True, True]
    assert second[0].p_success == pytest.approx(0.2)
    assert judge.judge_id == inner.judge_id
    assert (judge.cache.hits, judge.cache.misses) == (2, 3)


def test_cached_judge_judges_duplicates_once(noise: Image3) -> None:
    inner = CountingJudge()
    judge = CachedJudge(inner, VerdictCache(":memory:"))
    request = JudgeRequest("ok", (noise(0),))
    verdicts = judge.judge([request, JudgeRequest("ok", (noise(0),)), request])
    assert inner.calls == [1]
    assert len(verdicts) == 3 and all(v.success for v in verdicts)


def test_errors_are_returned_but_asked_again(noise: Image3) -> None:
    inner = CountingJudge(fail="flaky")
    judge = CachedJudge(inner, VerdictCache(":memory:"))
    requests = [JudgeRequest("flaky ok", (noise(0),)), JudgeRequest("ok", (noise(0),))]
    first = judge.judge(requests)
    assert first[0].error == "timeout" and first[1].ok
    judge.judge(requests)
    assert inner.calls == [2, 1] and inner.seen[-1] == "flaky ok"


def test_cache_hits_the_survivor_of_a_reopened_file(noise: Image3, tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    CachedJudge(CountingJudge(), VerdictCache(path)).judge([JudgeRequest("ok", (noise(0),))])
    inner = CountingJudge()
    verdict = CachedJudge(inner, VerdictCache(path)).judge([JudgeRequest("ok", (noise(0),))])
    assert inner.calls == [] and verdict[0].cached and verdict[0].success


def test_another_judge_id_prompt_or_image_is_a_miss(noise: Image3) -> None:
    cache = VerdictCache(":memory:")
    CachedJudge(CountingJudge("a"), cache, close_cache=False).judge(
        [JudgeRequest("ok", (noise(0),))]
    )
    other_id = CountingJudge("b")
    CachedJudge(other_id, cache, close_cache=False).judge([JudgeRequest("ok", (noise(0),))])
    same = CountingJudge("a")
    wrapped = CachedJudge(same, cache, close_cache=False)
    wrapped.judge([JudgeRequest("ok", (noise(0),))])
    wrapped.judge([JudgeRequest("ok!", (noise(0),))])  # another prompt
    wrapped.judge([JudgeRequest("ok", (noise(1),))])  # another image
    assert other_id.calls == [1]
    assert same.calls == [1, 1]


def test_prompt_parts_decide_the_key(noise: Image3) -> None:
    inner = PromptingJudge()
    judge = CachedJudge(inner, VerdictCache(":memory:"))
    final = noise(9)
    judge.judge([JudgeRequest("ok", (noise(1), final))])
    # Same prompt and same last screenshot: the judge would see the same thing.
    again = judge.judge([JudgeRequest("ok", (noise(2), final))])
    assert inner.calls == [1] and again[0].cached
    assert judge.key(JudgeRequest("ok", (final,))) == verdict_key(
        "counting:v1", "PROMPT ok", [final]
    )


def test_inner_judge_breaking_the_contract_is_an_error(noise: Image3) -> None:
    class Short(CountingJudge):
        def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
            return super().judge(requests)[:-1]

    with pytest.raises(JudgeError, match="returned 1 verdicts for 2 requests"):
        CachedJudge(Short(), VerdictCache(":memory:")).judge(
            [JudgeRequest("a", (noise(0),)), JudgeRequest("b", (noise(0),))]
        )


def test_close_closes_inner_and_cache_unless_told() -> None:
    inner, cache = CountingJudge(), VerdictCache(":memory:")
    CachedJudge(inner, cache, close_cache=False).close()
    assert inner.closed and len(cache) == 0
    CachedJudge(CountingJudge(), cache).close()
    with pytest.raises(RuntimeError, match="closed"):
        len(cache)


def _verdict() -> Verdict:
    return Verdict(success=True, p_success=0.9, raw="yes", judge_id="j")


def test_a_file_that_is_not_sqlite_is_a_judge_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"not a database at all " * 200)
    with pytest.raises(JudgeError, match=r"verdict cache .*cache\.sqlite.* is not a usable sqlite"):
        VerdictCache(path)


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE verdicts (a INTEGER, b TEXT)",  # a table of that name, other columns
        "CREATE TABLE users (name TEXT)",  # somebody else's database
    ],
)
def test_a_foreign_sqlite_file_is_refused_and_left_alone(tmp_path: Path, schema: str) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(schema)
    with pytest.raises(JudgeError, match=r"other\.sqlite.* is not a verdict cache"):
        VerdictCache(path)
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == [schema.split()[2]]  # nothing was added to it


def test_a_cache_corrupted_after_opening_is_a_judge_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = VerdictCache(path)
    cache.put_many({"k": _verdict()})
    cache._connection().execute("DROP TABLE verdicts")  # what another process could do
    with pytest.raises(JudgeError, match=r"verdict cache .*cache\.sqlite.*: .*no such table"):
        cache.get_many(["k"])
    with pytest.raises(JudgeError, match=r"verdict cache .*cache\.sqlite"):
        cache.put_many({"k": _verdict()})
    with pytest.raises(JudgeError, match=r"verdict cache .*cache\.sqlite"):
        len(cache)
    cache.close()
