"""The desktop's window manager: openbox with Debian's configuration plus Ubuntu's terminal key.

OSWorld's desktops are Ubuntu's GNOME, where ``ctrl+alt+t`` opens a terminal; its tasks press it
in set-up and postconfig steps (and agents trained there press it) and then activate a window
named "Terminal". :func:`openbox_command` starts openbox with Debian's ``rc.xml`` and one more
key binding: ``ctrl+alt+t`` starts ``xterm`` titled "Terminal", in HOME, on the
desktop's current session bus (its address is read from :data:`BUS_FILE` in the desktop's
folder: openbox lives across resets, the bus does not), so that ``gsettings`` in it reaches the
same settings as the task's checker.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUS_FILE", "SYSTEM_RC", "openbox_command"]

#: Debian's openbox configuration.
SYSTEM_RC = Path("/etc/xdg/openbox/rc.xml")
#: The file of the desktop's folder that holds the session bus's address.
BUS_FILE = "bus-address"
#: The key binding added to it ({bus}: that file's path); the terminal starts in HOME (openbox's
#: own working folder is gone after a reset: bash said "getcwd: cannot access parent directory").
_TERMINAL_KEY = ('<keybind key="C-A-t"><action name="Execute"><command>sh -c '
                 '\'cd; export DBUS_SESSION_BUS_ADDRESS="$(cat {bus})"; exec xterm -T Terminal\''
                 '</command></action></keybind>')


def openbox_command(folder: Path, system_rc: Path = SYSTEM_RC) -> list[str]:
    """The command that starts openbox with ``system_rc`` plus the terminal key (written to
    ``folder/openbox-rc.xml``); plain ``openbox`` when ``system_rc`` is missing or has no
    ``<keyboard>`` section."""
    try:
        text = system_rc.read_text(encoding="utf-8")
    except OSError:
        text = ""
    if "<keyboard>" not in text:
        return ["openbox", "--sm-disable"]
    rc = folder / "openbox-rc.xml"
    key = _TERMINAL_KEY.format(bus=folder / BUS_FILE)
    rc.write_text(text.replace("<keyboard>", "<keyboard>\n  " + key, 1), encoding="utf-8")
    rc.chmod(0o644)
    return ["openbox", "--sm-disable", "--config-file", str(rc)]
