"""Topological subsequence matching of a trace against the essential chain.

The essential states form a chain ``e_0 -> e_1 -> ... -> e_{m-1}`` (strict dominators of the
sink). A trace of ``n`` frames passes when the chain occurs in it as an ordered subsequence
(extra frames anywhere are allowed) and its last frame shows a terminal state.

* **Existence.** Greedy leftmost matching (each state takes the first frame after the previous
  match that shows it) finds the chain whenever it occurs: if any embedding exists, the greedy
  one exists and is leftmost (exchange argument). O(n + m) equivalence calls when it succeeds.
* **Coverage when it fails.** Greedy can lose states after one missing state, so the largest
  set of chain states that occurs in order is found with the longest-common-subsequence dynamic
  program over the n x m equivalence matrix, O(n m). Ties keep the earliest matches.

``eq(j, i)`` says whether frame ``i`` shows chain state ``j``; it is called lazily and should be
memoised by the caller (it is the expensive part: tier-1/tier-2 comparisons).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DIVERGENCE_KINDS", "ChainMatch", "explain", "match_chain"]

DIVERGENCE_KINDS: dict[str, str] = {
    "layout": "the same content moved, resized or rearranged (a window move, another layout)",
    "content": "different content (other text or elements), not only another layout",
}
"""What a first divergence looks like, as the window-aware comparison classifies it, and the
words :func:`explain` uses for it."""


@dataclass(frozen=True)
class ChainMatch:
    """Which chain states a trace shows, in order.

    Attributes:
        pairs: (chain index, frame index) of each matched state, in chain order.
        missing: Chain indices that are not matched.
        complete: Every chain state matched in order.
        chain_len: m.
    """

    pairs: tuple[tuple[int, int], ...]
    missing: tuple[int, ...]
    complete: bool
    chain_len: int

    @property
    def coverage(self) -> float:
        """Matched / essential (1.0 for an empty chain)."""
        return len(self.pairs) / self.chain_len if self.chain_len else 1.0

    def first_divergence(self) -> tuple[int, int] | None:
        """(chain index of the first missing state, frame index after which it was expected:
        the frame of the previous matched state, or -1 before the first frame); None when
        complete."""
        if not self.missing:
            return None
        j = self.missing[0]
        before = [i for jj, i in self.pairs if jj < j]
        return j, (before[-1] if before else -1)


def match_chain(n_frames: int, chain_len: int, eq: Callable[[int, int], bool]) -> ChainMatch:
    """Match a chain of ``chain_len`` states against ``n_frames`` frames.

    Args:
        n_frames: Frames in the trace.
        chain_len: States in the chain.
        eq: ``eq(j, i)`` is True when frame ``i`` shows chain state ``j``.

    Returns:
        The greedy leftmost embedding when the whole chain occurs, else a largest in-order
        partial match.

    Example:
        >>> trace = "SAXBT"
        >>> m = match_chain(len(trace), 3, lambda j, i: "SBT"[j] == trace[i])
        >>> m.complete, m.pairs
        (True, ((0, 0), (1, 3), (2, 4)))
        >>> m = match_chain(len(trace), 4, lambda j, i: "SYBT"[j] == trace[i])
        >>> m.complete, m.missing, m.coverage
        (False, (1,), 0.75)
    """
    pos, pairs = 0, []
    for j in range(chain_len):
        i = pos
        while i < n_frames and not eq(j, i):
            i += 1
        if i == n_frames:
            break
        pairs.append((j, i))
        pos = i + 1
    else:
        return ChainMatch(tuple(pairs), (), True, chain_len)
    # Longest in-order partial match: L[j][i] = best over chain[j:] and frames[i:].
    memo: dict[tuple[int, int], bool] = {}

    def same(j: int, i: int) -> bool:
        if (j, i) not in memo:
            memo[(j, i)] = eq(j, i)
        return memo[(j, i)]

    best = [[0] * (n_frames + 1) for _ in range(chain_len + 1)]
    for j in range(chain_len - 1, -1, -1):
        for i in range(n_frames - 1, -1, -1):
            take = 1 + best[j + 1][i + 1] if same(j, i) else 0
            best[j][i] = max(take, best[j + 1][i], best[j][i + 1])
    pairs, j, i = [], 0, 0
    while j < chain_len and i < n_frames:
        if same(j, i) and best[j][i] == 1 + best[j + 1][i + 1]:
            pairs.append((j, i))
            j, i = j + 1, i + 1
        elif best[j][i] == best[j][i + 1]:
            i += 1
        else:
            j += 1
    got = {jj for jj, _ in pairs}
    missing = tuple(jj for jj in range(chain_len) if jj not in got)
    return ChainMatch(tuple(pairs), missing, not missing, chain_len)


def explain(
    match: ChainMatch,
    chain: Sequence[str],
    describe: Callable[[str], str],
    *,
    n_frames: int,
    terminal: str | None,
    unordered_missing: Sequence[str] = (),
    require_unordered: bool = False,
    divergence_kind: str | None = None,
    divergence_note: str | None = None,
) -> str:
    """A sentence a person can read about a validation.

    Args:
        match: The chain match.
        chain: Essential state ids in order.
        describe: State id -> short description (label, evidence).
        n_frames: Frames in the trace.
        terminal: The terminal state the last frame shows, or None.
        unordered_missing: Mandatory-but-unordered states the trace never shows.
        require_unordered: Whether those make the validation fail.
        divergence_kind: What the first divergence looks like, a key of
            :data:`DIVERGENCE_KINDS` (None: not classified, or nothing is missing).
        divergence_note: A sentence on how the frame after the divergence differs from the
            expected state (from the window-aware comparison), appended there instead of the
            generic sentence for ``divergence_kind``.

    Raises:
        ValueError: ``divergence_kind`` is not a key of :data:`DIVERGENCE_KINDS`.

    Example:
        >>> m = match_chain(3, 3, lambda j, i: (j, i) in {(0, 0), (2, 2)})
        >>> explain(m, ["s0", "s1", "s2"], str, n_frames=3, terminal="s2",
        ...         divergence_kind="content")  # doctest: +NORMALIZE_WHITESPACE
        'FAIL: 2 of 3 essential states appear in order (at frames 0, 2). First divergence after
        frame 0 (which shows s0): expected s1, but no later frame shows it. It looks like a
        content change: different content (other text or elements), not only another layout.
        Missing essential states: s1. The last frame (2) shows terminal state s2.'
    """
    if divergence_kind is not None and divergence_kind not in DIVERGENCE_KINDS:
        raise ValueError(f"divergence_kind must be one of {sorted(DIVERGENCE_KINDS)} or None, "
                         f"got {divergence_kind!r:.100}")
    m = len(chain)
    last = n_frames - 1
    ok = match.complete and terminal is not None
    ok = ok and not (require_unordered and unordered_missing)
    head = "PASS" if ok else "FAIL"
    frames = ", ".join(str(i) for _, i in match.pairs)
    parts = [f"{head}: {len(match.pairs)} of {m} essential states appear in order"
             + (f" (at frames {frames})" if frames else "") + "."]
    div = match.first_divergence()
    if div is not None:
        j, after = div
        where = ("at the start" if after < 0
                 else f"after frame {after} (which shows {describe(_at(match, chain, after))})")
        parts.append(f"First divergence {where}: expected {describe(chain[j])}, "
                     f"but no later frame shows it.")
        if divergence_note:
            parts.append(divergence_note)
        elif divergence_kind is not None:
            parts.append(f"It looks like a {divergence_kind} change: "
                         f"{DIVERGENCE_KINDS[divergence_kind]}.")
        names = ", ".join(chain[k] for k in match.missing)
        parts.append(f"Missing essential states: {names}.")
    if terminal is None:
        parts.append(f"The last frame ({last}) shows no terminal state of the reference.")
    else:
        parts.append(f"The last frame ({last}) shows terminal state {terminal}.")
    if unordered_missing:
        names = ", ".join(unordered_missing)
        parts.append(f"Never shown although every training trace shows them (in varying "
                     f"order): {names}" + ("." if require_unordered else " (not required)."))
    return " ".join(parts)


def _at(match: ChainMatch, chain: Sequence[str], frame: int) -> str:
    for j, i in match.pairs:
        if i == frame:
            return chain[j]
    return "?"
