"""The ``backend_kwargs`` of a ``macosworld`` env: a strict dataclass read through
:mod:`cua_rl._strict` like every other config section (unknown keys, wrong types and bad values
raise ``ConfigError`` naming ``env.backend_kwargs.<key>``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from cua_rl._strict import build_section, check, check_fields
from cua_rl.envs.backends.vm.settings import W, absolute, task_kwargs
from cua_rl.errors import ConfigError, TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig

__all__ = ["EVAL_INIT", "ENV_INIT", "MacOSWorldSettings", "settings"]

#: macOSWorld's ``constants.env_init_command``: click away a kernel-panic report dialog, eject
#: extra disks (their long names change Finder's layout).
ENV_INIT = ("find /Library/Logs/DiagnosticReports -type f -name \"panic*.panic\" -mmin -20 "
            "2>/dev/null | grep -q . && osascript -e 'tell application \"System Events\" to "
            "click at {456,349}' && rm -rf /Library/Logs/DiagnosticReports/*.panic; diskutil "
            "list | grep Creedence | awk '{print $NF}' | xargs -I {} diskutil eject {} "
            "2>/dev/null")  # fmt: skip
#: macOSWorld's ``constants.eval_init_command``: leave full screen before grading.
EVAL_INIT = ("osascript -e 'tell application \"System Events\" to get value of attribute "
             "\"AXFullScreen\" of window 1 of (first application process whose frontmost is "
             "true)' | grep -q true && osascript -e 'tell application \"System Events\" to "
             "keystroke \"f\" using {control down, command down}' ")  # fmt: skip

#: Number fields: (lowest, highest, integer).
_RANGES: dict[str, tuple[float, float, bool]] = {
    "vnc_port": (1, 65535, True), "type_delay_s": (0, 5, False),
    "timeout_s": (0.001, 1e9, False), "command_timeout_s": (0.001, 1e9, False),
    "connect_timeout_s": (0.001, 1e9, False), "revert_timeout_s": (0.001, 1e9, False),
    "ready_timeout_s": (0.001, 1e9, False), "pre_command_tries": (1, 100, True),
    "delay_scale": (0, 100, False), "settle_s": (0, 600, False), "pause_s": (0, 3600, False),
    "safety_grace_s": (0, 600, False),
}  # fmt: skip


def _address(i: int, value: str) -> tuple[str, int]:
    """``(host, ssh_port)`` of a ``hosts`` entry (port 22 when it names none)."""
    where = f"{W}.hosts[{i}]"
    if not value or any(c.isspace() for c in value) or "/" in value:
        raise ConfigError(f"{where}: must be 'host' or 'host:ssh_port', got {value!r}")
    host, sep, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    if not sep:
        return value, 22
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: bad port in {value!r} (host:1..65535)")
    return host, int(port)


@dataclass(frozen=True)
class MacOSWorldSettings:
    """The ``backend_kwargs`` of a ``macosworld`` env (``hosts``, ``ssh_key`` and
    ``known_hosts`` required): one env per Mac."""

    SECTION: ClassVar[str] = W

    #: The Macs, ``host`` or ``host:ssh_port`` each, distinct: env ``i`` drives ``hosts[i]``.
    hosts: tuple[str, ...] = ()
    #: The SSH user (macOSWorld's AWS Macs: ``ec2-user``).
    ssh_user: str = "ec2-user"
    #: The SSH private key file.
    ssh_key: str = ""
    #: A known_hosts file holding the Macs' host keys (unknown or changed keys are refused).
    known_hosts: str = ""
    #: The Mac's VNC port.
    vnc_port: int = 5900
    #: Reach VNC through an SSH tunnel to the Mac's ``localhost:<vnc_port>``.
    vnc_via_ssh: bool = True
    #: Apple's VNC login user (macOSWorld: ``ec2-user``), or None.
    vnc_username: str | None = None
    #: Apple's VNC login password, or None.
    vnc_password: str | None = field(default=None, repr=False)
    #: The VNC encoding asked for (``raw``, ...).
    vnc_encoding: str = "raw"
    #: How typed keys map to key symbols: ``macos`` or ``x11``.
    keymap: str = "macos"
    #: Seconds between two typed characters (macOSWorld's 0.1).
    type_delay_s: float = 0.1
    #: The language of the task instructions (``en``, ``zh``, ...).
    language: str = "en"
    #: The language of the Mac's environment (its snapshot); None: ``language``.
    env_language: str | None = None
    #: Deadline of one VNC call, in seconds.
    timeout_s: float = 30.0
    #: Deadline of one SSH command, in seconds.
    command_timeout_s: float = 120.0
    #: Deadline of an SSH connection, in seconds.
    connect_timeout_s: float = 30.0
    #: A host command (arguments, no shell; ``{index}``, ``{host}`` and ``{snapshot}``
    #: replaced) that reverts Mac ``index`` before every reset but the first; empty: none.
    revert_command: tuple[str, ...] = ()
    #: Deadline of the revert command, in seconds.
    revert_timeout_s: float = 3600.0
    #: How long to wait for SSH after a revert, in seconds.
    ready_timeout_s: float = 600.0
    #: Run before every task's set-up (macOSWorld's: dismiss crash dialogs); "" for none.
    env_init_command: str = ENV_INIT
    #: Run before grading (macOSWorld's: leave full screen); "" for none.
    eval_init_command: str = EVAL_INIT
    #: Tries of a task's ``pre_command`` until it exits 0.
    pre_command_tries: int = 3
    #: Factor on the tasks' own delays (``before_action_delay_seconds``, ...).
    delay_scale: float = 1.0
    #: Seconds after each action before the screenshot (macOSWorld sleeps 5 s).
    settle_s: float = 5.0
    #: The longest ``Wait``, in seconds.
    pause_s: float = 5.0
    #: Run only the grading commands scored 100 (macOSWorld's default).
    binary_grading: bool = True
    #: How long a safety task's dialog may still run after the episode before it is hung up
    #: and counted ``not_handled``, in seconds.
    safety_grace_s: float = 0.0
    #: Task folders (``<category>/<uuid>.json``) or files: a path or a list of them; or
    #: ``env.task_files`` (not both).
    tasks: tuple[str, ...] = ()
    #: Held-out evaluation tasks given explicitly (same forms); empty: a random split.
    eval_tasks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from cua_rl.envs.backends.macosworld.tasks import normalize_language
        from cua_rl.envs.backends.macosworld.vnc import ENCODINGS
        from cua_rl.envs.backends.macosworld.vnc_keys import KEYMAPS

        check_fields(self)
        check(self, "hosts", bool(self.hosts), "the macosworld backend needs a non-empty list of "
              "Macs ('host' or 'host:ssh_port'; one env each)")  # fmt: skip
        addresses = self.addresses
        if len(set(addresses)) != len(addresses):
            raise ConfigError(f"{W}.hosts: a host is listed twice (one env per Mac): "
                              f"{list(self.hosts)!r}")  # fmt: skip
        for key in ("ssh_key", "known_hosts"):
            if not getattr(self, key):
                raise ConfigError(f"{W}.{key}: required (the SSH private key and the known_hosts "
                                  f"file holding the Macs' host keys)")  # fmt: skip
        check(self, "ssh_user", bool(self.ssh_user), "must be a non-empty string")
        check(self, "vnc_username", self.vnc_username != "", "must be a non-empty string")
        for key, (lo, hi, integer) in _RANGES.items():
            check(self, key, lo <= getattr(self, key) <= hi,
                  f"must be {'an integer' if integer else 'a number'} in {lo:g}..{hi:g}")
        check(self, "keymap", self.keymap in KEYMAPS, f"must be one of {KEYMAPS}")
        check(self, "vnc_encoding", self.vnc_encoding in ENCODINGS, f"must be one of {ENCODINGS}")
        for key in ("tasks", "eval_tasks"):
            check(self, key, all(getattr(self, key)), "must be non-empty paths")
        try:
            language = normalize_language(self.language, f"{W}.language")
            env_language = normalize_language(self.env_language or language,
                                              f"{W}.env_language")  # fmt: skip
        except TaskSpecError as error:
            raise ConfigError(str(error)) from None
        object.__setattr__(self, "language", language)
        object.__setattr__(self, "env_language", env_language)

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """``(host, ssh_port)`` of each of ``hosts``."""
        return tuple(_address(i, h) for i, h in enumerate(self.hosts))


def settings(config: EnvConfig) -> MacOSWorldSettings:
    """The checked :class:`MacOSWorldSettings` of a ``macosworld`` env section: tasks from
    ``tasks`` or ``env.task_files``, relative paths resolved against ``env.base_dir``.

    Raises:
        ConfigError: Naming ``env.backend_kwargs.<key>``: unknown keys, wrong types, missing
            ``hosts``/``ssh_key``/``known_hosts``, tasks given twice or not at all.
    """
    kw = task_kwargs(config, "the macosworld backend needs task folders or files "
                             "(tasks/<category>/<uuid>.json)")
    s = build_section(MacOSWorldSettings, kw, W)
    base = config.base_dir
    return dataclasses.replace(
        s, ssh_key=str(absolute(base, s.ssh_key)), known_hosts=str(absolute(base, s.known_hosts)),
        tasks=tuple(str(absolute(base, t)) for t in s.tasks),
        eval_tasks=tuple(str(absolute(base, t)) for t in s.eval_tasks))  # fmt: skip
