"""An on-disk verdict cache (sqlite) and the ``CachedJudge`` wrapper that uses it.

A verdict is keyed by a sha256 content hash of the judge id, the prompt text and every screenshot
the judge sees (shape, dtype and bytes). The same episode judged twice by the same judge costs one
model call; a different judge id, prompt or image is a different key. Verdicts with ``error`` are
never cached, so a timeout is retried the next time.

The cache is safe to share between threads (one connection behind a lock) and between processes
(sqlite WAL mode, atomic ``INSERT OR REPLACE`` transactions, a busy timeout).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from cua_rl.core import Verdict
from cua_rl.errors import JudgeError
from cua_rl.judges.base import Judge, JudgeRequest, check_judge

__all__ = ["CachedJudge", "PromptedJudge", "VerdictCache", "verdict_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    judge_id TEXT NOT NULL,
    success INTEGER NOT NULL,
    p_success REAL,
    raw TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_COLUMNS = ("key", "judge_id", "success", "p_success", "raw", "created")
_CHUNK = 500  # keys per SELECT (below sqlite's host-parameter limit)


def verdict_key(judge_id: str, prompt: str, screenshots: Sequence[np.ndarray]) -> str:
    """The cache key: sha256 (hex) of the judge id, the prompt text and each image.

    Every field is length-prefixed, and each image contributes its shape, dtype and bytes, so
    two different inputs cannot produce the same byte stream.

    Args:
        judge_id: Id of the judge configuration.
        prompt: The prompt text the judge sends.
        screenshots: The images the judge sees, in order.

    Returns:
        64 hex characters.
    """
    digest = hashlib.sha256()

    def field(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)

    field(judge_id.encode("utf-8"))
    field(prompt.encode("utf-8"))
    digest.update(len(screenshots).to_bytes(8, "little"))
    for shot in screenshots:
        array = np.ascontiguousarray(shot)
        field(f"{array.shape}|{array.dtype.str}".encode("ascii"))
        field(array.tobytes())
    return digest.hexdigest()


@runtime_checkable
class PromptedJudge(Protocol):
    """A judge that can say exactly what it sends for a request (for the cache key)."""

    judge_id: str

    def prompt_parts(self, request: JudgeRequest) -> tuple[str, tuple[np.ndarray, ...]]:
        """The prompt text and the screenshots the judge sends for ``request``."""
        ...


class VerdictCache:
    """Verdicts on disk in sqlite, keyed by :func:`verdict_key`.

    Args:
        path: The sqlite file (created with its parent folder if missing); ``":memory:"`` for a
            private in-memory cache.

    Attributes:
        hits: Keys found by :meth:`get_many` since construction.
        misses: Keys not found by :meth:`get_many` since construction.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self.path, timeout=30.0, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise JudgeError(f"verdict cache {self.path!r} cannot be opened: {exc}") from None
        try:
            self._check_schema(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JudgeError(
                f"verdict cache {self.path!r} is not a usable sqlite database ({exc}); delete "
                f"it or pass another --cache file"
            ) from None
        except JudgeError:
            conn.close()
            raise
        self._conn = conn
        self.hits = 0
        self.misses = 0

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Refuse a database that holds other tables, or a ``verdicts`` table of other columns.

        A foreign file is left as it is (no table is added to it).
        """
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            return
        columns = [row[1] for row in conn.execute("PRAGMA table_info(verdicts)")]
        if columns != list(_COLUMNS):
            found = f"columns {columns}" if columns else f"tables {sorted(tables)[:10]}"
            raise JudgeError(
                f"verdict cache {self.path!r} is not a verdict cache: it has {found}, expected "
                f"one table 'verdicts' with columns {list(_COLUMNS)}; pass another --cache file"
            )

    @contextmanager
    def _guard(self, action: str) -> Iterator[sqlite3.Connection]:
        """The open connection; a sqlite error while ``action`` becomes a JudgeError."""
        try:
            yield self._connection()
        except sqlite3.Error as exc:
            raise JudgeError(f"verdict cache {self.path!r}: {action} failed: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"VerdictCache({self.path!r}) is closed")
        return self._conn

    def get_many(self, keys: Iterable[str]) -> dict[str, Verdict]:
        """The cached verdicts among ``keys`` (missing keys are absent from the result).

        Counts one hit or one miss per distinct key. Returned verdicts have ``cached=True``.
        """
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Verdict] = {}
        with self._lock, self._guard("reading verdicts") as conn:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT key, judge_id, success, p_success, raw FROM verdicts "
                    f"WHERE key IN ({marks})",
                    chunk,
                ).fetchall()
                for key, judge_id, success, p_success, raw in rows:
                    found[key] = Verdict(
                        success=bool(success),
                        p_success=p_success,
                        raw=raw,
                        judge_id=judge_id,
                        cached=True,
                    )
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    def get(self, key: str) -> Verdict | None:
        """One cached verdict, or None."""
        return self.get_many([key]).get(key)

    def put_many(self, items: Mapping[str, Verdict]) -> int:
        """Store verdicts by key in one transaction; verdicts with ``error`` are skipped.

        Returns:
            How many verdicts were stored.
        """
        rows = [
            (key, v.judge_id, int(v.success), v.p_success, v.raw, time.time())
            for key, v in items.items()
            if v.error is None
        ]
        if not rows:
            return 0
        with self._lock, self._guard("storing verdicts") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return len(rows)

    def __len__(self) -> int:
        with self._lock, self._guard("counting verdicts") as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()
        return int(count)

    def stats(self) -> dict[str, float]:
        """Counters for the logger: ``judge/cache_hits``, ``judge/cache_misses``, hit rate."""
        total = self.hits + self.misses
        return {
            "judge/cache_hits": float(self.hits),
            "judge/cache_misses": float(self.misses),
            "judge/cache_hit_rate": self.hits / total if total else 0.0,
        }

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> VerdictCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VerdictCache({self.path!r}, hits={self.hits}, misses={self.misses})"


class CachedJudge:
    """Wrap a judge with a :class:`VerdictCache`: only cache misses reach the inner judge.

    Hits come back with ``cached=True``; identical requests within one batch are judged once.
    Verdicts with ``error`` are returned but not stored.

    The key uses the inner judge's ``prompt_parts(request)`` when it has one (both model judges
    do); otherwise the instruction and every screenshot of the request, which is right only for a
    judge whose verdict depends on nothing else.

    Args:
        judge: The judge to wrap.
        cache: The cache (may be shared by several judges: the judge id is part of the key).
        close_cache: Whether :meth:`close` also closes ``cache``.
    """

    def __init__(self, judge: Judge, cache: VerdictCache, *, close_cache: bool = True) -> None:
        self.inner = judge
        self.cache = cache
        self.judge_id = judge.judge_id
        self._close_cache = close_cache

    def key(self, request: JudgeRequest) -> str:
        """The cache key of one request under the inner judge."""
        if isinstance(self.inner, PromptedJudge):
            prompt, shots = self.inner.prompt_parts(request)
        else:
            prompt, shots = request.instruction, request.screenshots
        return verdict_key(self.judge_id, prompt, shots)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order; misses go to the inner judge in one batch."""
        keys = [self.key(r) for r in requests]
        cached = self.cache.get_many(keys)
        todo: dict[str, JudgeRequest] = {}
        for key, request in zip(keys, requests, strict=True):
            if key not in cached:
                todo.setdefault(key, request)
        fresh: dict[str, Verdict] = {}
        if todo:
            verdicts = self.inner.judge(list(todo.values()))
            if len(verdicts) != len(todo):  # the Judge contract: one verdict per request
                raise JudgeError(
                    f"inner judge returned {len(verdicts)} verdicts for {len(todo)} requests"
                )
            fresh = dict(zip(todo, verdicts, strict=True))
            self.cache.put_many(fresh)
        return [cached[key] if key in cached else fresh[key] for key in keys]

    def check(self) -> None:
        """Check the inner judge (:func:`~cua_rl.judges.base.check_judge`).

        Raises:
            JudgeError: The inner judge cannot answer.
        """
        check_judge(self.inner)

    def close(self) -> None:
        """Close the inner judge, and the cache unless ``close_cache=False``."""
        self.inner.close()
        if self._close_cache:
            self.cache.close()
