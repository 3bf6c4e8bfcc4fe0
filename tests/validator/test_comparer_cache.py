"""The process-wide prepared-screenshot cache: bounded in bytes, shared by every comparer."""

from __future__ import annotations

import numpy as np

from cua_rl.validator.comparer import SHARED_FEATURES, FeatureCache, StateComparer
from cua_rl.validator.traces import Frame


def _frame(value: int, size: tuple[int, int] = (64, 96)) -> Frame:
    return Frame(np.full((*size, 3), value, dtype=np.uint8))


def test_cache_stays_within_its_byte_budget_and_evicts_lru() -> None:
    cache = FeatureCache(max_bytes=10**9)
    comparer = StateComparer(cache=cache)
    comparer.features(_frame(0))
    per_frame = cache.nbytes
    assert per_frame > 0 and len(cache) == 1
    cache.max_bytes = 3 * per_frame
    for v in range(1, 10):
        comparer.features(_frame(v))
        assert cache.nbytes <= 3 * per_frame
    assert len(cache) == 3
    keys = [k[0] for k in cache._items]
    assert keys == [_frame(v).digest for v in (7, 8, 9)]  # the most recent three
    comparer.features(_frame(7))  # a hit makes it most recent: 8 is evicted next
    comparer.features(_frame(10))
    assert [k[0] for k in cache._items] == [_frame(v).digest for v in (9, 7, 10)]


def test_comparers_share_the_process_cache() -> None:
    a, b = StateComparer(), StateComparer()
    assert a.cache is b.cache is SHARED_FEATURES
    frame = _frame(123, (40, 40))
    assert a.features(frame) is b.features(frame)  # prepared once for both models
