"""A batcher: calls a function on items submitted from many threads, in batches, in one thread.

The asynchronous VLM rollouts (:mod:`cua_rl.training.vlm_async`) batch their generation and
their scoring with it: a prompt waits at most a short window for others to join its batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

from cua_rl.errors import ConfigError

__all__ = ["Batcher"]

In = TypeVar("In")
Out = TypeVar("Out")


class Batcher(Generic[In, Out]):
    """Calls ``fn`` on items submitted from many threads, in batches, in one thread.

    The first waiting item opens a window of ``window_s``; items that arrive within it join the
    batch, up to ``max_batch`` (the rest wait for the next one). The batch goes early when
    ``ready(n)`` says that ``n`` waiting items are all there will be.

    Args:
        fn: Items -> one result per item, in order. An exception fails every item of its batch.
        max_batch: Items per call.
        window_s: How long the first item waits for company.
        ready: Called with the number of waiting items; True sends the batch at once.
        name: The thread's name.
    """

    def __init__(
        self,
        fn: Callable[[list[In]], Sequence[Out]],
        *,
        max_batch: int,
        window_s: float,
        ready: Callable[[int], bool] = lambda n: False,
        name: str = "batcher",
    ) -> None:
        if max_batch < 1 or window_s < 0:
            raise ConfigError(f"max_batch must be >= 1 and window_s >= 0, got {max_batch}, "
                              f"{window_s}")  # fmt: skip
        self.fn, self.max_batch, self.window_s, self.ready = fn, max_batch, window_s, ready
        self.batches = 0
        self.busy_s = 0.0
        self._items: list[tuple[In, Future[Out]]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: In) -> Future[Out]:
        """Queue one item; its future gets its result (or its batch's exception)."""
        future: Future[Out] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._items.append((item, future))
            self._cond.notify_all()
        return future

    def wake(self) -> None:
        """Re-check ``ready`` now (something it reads changed)."""
        with self._cond:
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closed:
                    self._cond.wait()
                if not self._items:
                    return
                deadline = time.monotonic() + self.window_s
                while len(self._items) < self.max_batch and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0 or self.ready(len(self._items)):
                        break
                    self._cond.wait(left)
                batch, self._items = self._items[: self.max_batch], self._items[self.max_batch :]
            t0 = time.perf_counter()
            try:
                results = list(self.fn([item for item, _ in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"{len(results)} results for {len(batch)} items")
            except BaseException as error:  # every waiter of the batch gets it
                for _, future in batch:
                    future.set_exception(error)
            else:
                for (_, future), result in zip(batch, results, strict=True):
                    future.set_result(result)
            self.busy_s += time.perf_counter() - t0
            self.batches += 1

    def close(self) -> None:
        """Finish the queued items and end the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
