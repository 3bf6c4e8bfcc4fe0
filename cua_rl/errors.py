"""The cua_rl error hierarchy.

Every error the library raises on purpose derives from :class:`CuaRLError`, so callers can catch the
whole family at once. A message states what was received and what is allowed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = [
    "ActionError",
    "ActionParseError",
    "BackendError",
    "CalibrationError",
    "ConfigError",
    "CuaRLError",
    "DependencyNotInstalled",
    "DiskFullError",
    "FrameFormatError",
    "GenerationError",
    "JudgeError",
    "JudgeUnavailable",
    "TaskSpecError",
    "TraceFormatError",
]


class CuaRLError(Exception):
    """Base class of every error cua_rl raises on purpose."""


class BackendError(CuaRLError):
    """The desktop is gone or broken (connection lost, VM died, simulator crashed).

    CUAEnv truncates the episode and records it in ``info["episode_end"].env_error``; such an
    episode never gets a reward and never reaches a PPO update.
    """


class ActionError(CuaRLError):
    """The desktop rejected an action (click outside the screen, unknown key, ...).

    CUAEnv reports it in ``info["action_error"]`` and the episode goes on.
    """


class ActionParseError(ActionError, ValueError):
    """A text action could not be parsed into a typed action."""


class TaskSpecError(CuaRLError, ValueError):
    """A task specification is malformed (unknown family, missing or invalid field)."""


class GenerationError(CuaRLError):
    """A served policy could not generate (server unreachable, error status, malformed answer).

    Raised by :class:`~cua_rl.policies.vlm.served.ServedGenerator`; the message names the
    server's URL and what was wrong. Generation has no "unscorable" fallback: a rollout step
    without an answer cannot be recorded, so the error stops the work that needed it.
    """


class JudgeError(CuaRLError):
    """A judge could not produce a verdict (timeout, malformed answer, server error)."""


class JudgeUnavailable(JudgeError):
    """The judge cannot answer at all (a served model that is gone or refuses every request).

    Unlike a failed verdict (one episode unscorable), this stops the work that needs the judge:
    reward sources let it through, so training and calibration end with one clear error.
    """


class CalibrationError(CuaRLError, ValueError):
    """Calibration data or estimates are unusable (for example D = 1 - e+ - e- <= 0)."""


class ConfigError(CuaRLError, ValueError):
    """A configuration file or object is invalid (unknown key, wrong type, out of range).

    Attributes:
        problems: Each problem's message where several were found at once (the config builders
            report every problem of a file together); else the message alone.
    """

    def __init__(self, message: str = "", problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems) or (message,)


class TraceFormatError(CuaRLError, ValueError):
    """A trace file is malformed."""


class FrameFormatError(CuaRLError, ValueError):
    """A packed screenshot (:class:`cua_rl.frames.PackedFrame`) is corrupt and does not unpack."""


class DependencyNotInstalled(CuaRLError, ImportError):
    """An optional dependency is missing; the message names the extra that provides it."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package!r} is not installed; install it with `pip install 'cua-rl[{extra}]'`"
        )
        self.package = package
        self.extra = extra


#: The errno values of a full disk (no space, over the quota).
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(CuaRLError, OSError):
    """The disk (or the user's quota) filled up while writing ``path``.

    An ``OSError`` too (errno ``ENOSPC`` or ``EDQUOT``), so code that handles any failed write
    still does. The target was left as it was and the temporary removed.
    """

    def __init__(self, path: str | os.PathLike[str], cause: OSError) -> None:
        code = cause.errno if cause.errno in DISK_FULL_ERRNOS else errno.ENOSPC
        reason = "over the disk quota" if code == errno.EDQUOT else "no space left"
        super().__init__(code, f"cannot write {str(path)!r}: disk full ({reason}); the previous "
                               f"version, if any, is intact: free space and run again")  # fmt: skip
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.strerror)
