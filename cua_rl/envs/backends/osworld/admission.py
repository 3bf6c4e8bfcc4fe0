"""Whether an OSWorld task can run here: one answer, given before training and again at reset.

:func:`refusals` lists every reason a task cannot be set up or scored on a backend: its set-up
steps and getters that need what this machine lacks (:func:`~cua_rl.envs.backends.osworld.
setup_plan.plan_setup`: a download with no local copy, a Google account, Chrome's debugging
port, a path that leaves its folder), getters this library does not implement (an OSWorld getter
not implemented here is told apart from a name OSWorld does not have), metrics the isolated
evaluator cannot run, and what the task needs of the desktop that the backend does not declare
(:mod:`cua_rl.envs.capabilities`: an application, the internet, a fixed IP, a proxy). A
backend's ``check_tasks`` calls it for every task before training; the set-up hook calls it
again at each reset, so a reset never refuses a task for a reason ``check_tasks`` did not give.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cua_rl.envs.backends.osworld.setup_plan import (
    COMMAND_STEPS,
    MirrorArg,
    Refusal,
    plan_setup,
)
from cua_rl.envs.backends.osworld.task_format import OSWorldTask
from cua_rl.envs.capabilities import APPS, Capabilities, Needs, missing
from cua_rl.errors import TaskSpecError

__all__ = ["OSWORLD_GETTERS", "WEB_GETTERS", "Admission", "refusals", "task_needs"]

#: The getter types of OSWorld's evaluator (desktop-env's ``evaluators/getters``; ``url_path_parse``
#: is its alias of ``active_tab_url_parse``); a type outside it is a misspelling, not a getter
#: this library lacks.
OSWORLD_GETTERS = frozenset({
    "default_search_engine", "cookie_data", "bookmarks", "open_tabs_info", "pdf_from_url",
    "shortcuts_on_desktop", "history", "page_info", "enabled_experiments", "chrome_language",
    "chrome_font_size", "profile_name", "number_of_search_results", "googledrive_file",
    "active_tab_info", "enable_do_not_track", "enable_enhanced_safety_browsing",
    "enable_safe_browsing", "new_startup_page", "find_unpacked_extension_path",
    "data_delete_automacally", "active_tab_html_parse", "active_tab_url_parse",
    "gotoRecreationPage_and_get_html_content", "url_dashPart", "active_url_from_accessTree",
    "find_installed_extension_name", "info_from_website", "macys_product_url_parse",
    "url_path_parse", "cloud_file", "vm_file", "cache_file", "content_from_vm_file",
    "vm_command_line", "vm_terminal_output", "vm_command_error", "gimp_config_file",
    "audio_in_slide", "background_image_in_slide", "vm_screen_size", "vm_window_size",
    "vm_wallpaper", "list_directory", "rule", "accessibility_tree", "rule_relativeTime",
    "time_diff_range", "replay", "vlc_playing_info", "vlc_config", "default_video_player",
    "vscode_config", "conference_city_in_order", "chrome_appearance_mode_ui", "chrome_color_scheme",
})
#: Getters that open a web site (in the desktop's Chrome): they need the internet.
WEB_GETTERS = frozenset({"info_from_website", "pdf_from_url",
                         "gotoRecreationPage_and_get_html_content"})
_URL = re.compile(r"\b(?:https?|ftp)://([^/\s\"'<>:]+)", re.IGNORECASE)
# installers that fetch from the internet without a URL in the command (wget / curl name theirs)
_FETCHES = re.compile(r"\b(?:pip3?\s+install|apt(?:-get)?\s+install|git\s+clone|npm\s+install|"
                      r"snap\s+install|flatpak\s+install)\b", re.IGNORECASE)
_EXECUTABLES = {exe: app for app, exes in APPS.items() for exe in exes}
_OFFICE_FLAGS = {"--calc": "libreoffice_calc", "--writer": "libreoffice_writer",
                 "--impress": "libreoffice_impress"}


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _web_url(value: Any) -> str | None:
    """The first URL of ``value`` (a step's parameters) on a host other than this machine."""
    for text in _strings(value):
        for match in _URL.finditer(text):
            if not _on_this_machine(match.group(1)):
                return match.group(0)
    return None


def _on_this_machine(host: str) -> bool:
    """A URL's host names the desktop itself: localhost, a loopback or unspecified address."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _programs(command: Any) -> list[str]:
    """Canonical applications a ``launch``/``execute`` command starts (its first word, and
    LibreOffice's ``--calc``/``--writer``/``--impress``)."""
    words = command.split() if isinstance(command, str) else [str(w) for w in command or ()]
    if not words:
        return []
    exe = words[0].rsplit("/", 1)[-1]
    found = [_EXECUTABLES[exe]] if exe in _EXECUTABLES else []
    if exe in ("libreoffice", "soffice"):
        found += [app for flag, app in _OFFICE_FLAGS.items() if flag in words]
    return found


# shell words that are not programs looked up on PATH
_SHELL_WORDS = frozenset({
    "cd", "echo", "export", "if", "then", "else", "elif", "fi", "for", "while", "until", "do",
    "done", "case", "esac", "in", "function", "return", "exit", "set", "unset", "read", "local",
    "source", ".", "eval", "exec", "true", "false", "test", "[", "[[", "]", "]]", "{", "}", "!",
    "time", "printf", "shift", "trap", "wait", "let", "declare", "type", "command", "builtin",
    "alias", "pwd", "umask", "ulimit", "kill", "break", "continue",
})  # fmt: skip
# shell words after which a command starts
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"})
# the interpreters OSWorld's pyautogui set-up clicks run (the server performs those itself)
_SERVED = frozenset({"python", "python3"})
_PROGRAM = re.compile(r"^(?:/[\w.+-]+)*/?[A-Za-z][\w.+-]*$")
# words that start the program after them (their options and numbers skipped)
_WRAPPERS = frozenset({"sudo", "nohup", "env", "timeout", "xargs", "exec", "time", "nice",
                       "command"})


def command_programs(command: Any) -> list[str]:
    """The programs a step's or getter's ``command`` starts: an argument list's first word; in
    a shell string, the first word of each command (after ``;``, ``&&``, ``|``, newlines,
    ``(``, ``$(``, also inside double quotes; quotes respected) and the program after
    ``sudo``/``timeout``/``env``..., shell words and variable assignments left out. A
    heuristic for shell strings: a word that does not look like a program name is skipped."""
    if isinstance(command, list | tuple):
        words = [str(command[0])] if command else []
    elif isinstance(command, str):
        command, inner = _substitutions(command)
        lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: not a command this check can read
            return []
        words, start, wrapped, redirect = [], True, False, False
        for text in inner:
            words += command_programs(text)
        for token in tokens:
            if token and all(c in "<>&" for c in token) and ">" in token or token == "<":
                redirect = True  # the next word is a file (2>/dev/null, < in.txt)
            elif token and all(c in "();&|" for c in token):
                start, wrapped = True, False
            elif redirect or token.isdigit() and not start:
                redirect = False
            elif start or wrapped:
                if "=" in token.split("/")[0] or token.startswith("-") or token.isdigit():
                    continue  # X=1 cmd, sudo -S cmd, timeout 10 cmd
                words.append(token)
                wrapped = token in _WRAPPERS
                start = token in _KEYWORDS
    else:
        return []
    found = [w.rsplit("/", 1)[-1] if w.startswith("/") else w for w in words]
    return [w for w in dict.fromkeys(found) if _PROGRAM.match(w) and w not in _SHELL_WORDS
            and w not in _WRAPPERS]


def _substitutions(command: str) -> tuple[str, list[str]]:
    """``command`` with each outermost ``$(...)`` replaced by a word, and their insides (which
    may hold quotes of their own, as ``"$(echo "$X" | bc)"`` does)."""
    out, inner, i = [], [], 0
    while (start := command.find("$(", i)) >= 0:
        depth, j = 1, start + 2
        while j < len(command) and depth:
            depth += {"(": 1, ")": -1}.get(command[j], 0)
            j += 1
        out.append(command[i:start] + "_subst_")  # not a program name: never looked up
        inner.append(command[start + 2:j - 1])
        i = j
    return "".join(out) + command[i:], inner


def _command_needs(task: OSWorldTask) -> list[tuple[str, str]]:
    out = []
    phases = (("config", task.config), ("evaluator.postconfig", task.evaluator.postconfig))
    for phase, steps in phases:
        for i, step in enumerate(steps):
            if step.type in COMMAND_STEPS | {"launch"}:
                where = f"{phase}[{i}] ({step.type})"
                out += [(p, where) for p in command_programs(step.parameters.get("command"))]
    for side, i, getter in task.evaluator.getters():
        if getter.get("type") in ("vm_command_line", "vm_command_error"):
            where = f"evaluator.{side}[{i}] ({getter['type']})"
            out += [(p, where) for p in command_programs(getter.get("command"))]
    return [(p, where) for p, where in out if p not in _SERVED and p not in _EXECUTABLES]


def task_needs(task: OSWorldTask) -> Needs:
    """What ``task`` needs of the desktop, each with where the task file says so: the
    applications of ``related_apps`` and of ``launch`` steps, the programs its commands start
    (:func:`command_programs`), the internet (a web address in a set-up step that is not a
    mirrored download, a command that installs or fetches, a getter that opens a web site),
    OSWorld's ``proxy`` and ``fixed_ip``."""
    apps = [(name, "related_apps") for name in task.related_apps]
    internet = ""
    for i, step in enumerate(task.config):
        where = f"config[{i}] ({step.type})"
        if step.type == "launch":
            apps += [(app, where) for app in _programs(step.parameters.get("command"))]
        if step.type in ("download", "upload_file") or internet:
            continue  # downloads come from the mirror
        url = _web_url(step.parameters)
        if url:
            internet = f"{where}, {url}"
        elif step.type in COMMAND_STEPS | {"launch"}:
            fetch = _FETCHES.search(" ".join(_strings(step.parameters)))
            if fetch:
                internet = f"{where}, runs {fetch.group(0)!r}"
    if not internet:
        for side, i, getter in task.evaluator.getters():
            if getter.get("type") in WEB_GETTERS:
                internet = f"evaluator.{side}[{i}] ({getter['type']}), opens a web site"
                break
    return Needs.of(apps, internet=internet, proxy="proxy: true" if task.proxy else "",
                    fixed_ip="fixed_ip: true" if task.fixed_ip else "",
                    programs=dict(reversed(_command_needs(task))))


def refusals(task: OSWorldTask, capabilities: Capabilities, *, mirror: MirrorArg = None,
             placeholders: Mapping[str, object] | None = None,
             getters: Iterable[str] | None = None,
             metric_problems: Callable[[Iterable[str]], list[str]] | None = None,
             ) -> list[Refusal]:  # fmt: skip
    """Every reason ``task`` cannot run on desktops with ``capabilities`` (empty: it can).

    Args:
        task: The task.
        capabilities: What the backend's desktops have.
        mirror: Local copies of downloads (see :func:`plan_setup`).
        placeholders: Values of the command steps' placeholders (see :func:`plan_setup`).
        getters: The getter types the scoring implements (None: scoring is not OSWorld's, its
            getters and metrics are not checked).
        metric_problems: Why each of the task's metric functions cannot run (e.g.
            :func:`~cua_rl.envs.backends.osworld.evaluation.scoring.unavailable_metrics` with a
            runner); None: not checked.
    """
    plan = plan_setup(task, mirror=mirror, placeholders=placeholders,
                      browser=capabilities.browser_debugging, dry_run=True)
    out = list(plan.refused)
    said = {r.where for r in out}
    if getters is not None:
        known = frozenset(getters)
        for side, i, getter in task.evaluator.getters():
            where, kind = f"evaluator.{side}[{i}]", str(getter["type"])
            if where in said or kind in known:
                continue
            out.append(Refusal(where, kind, "an OSWorld getter this library does not implement"
                               if kind in OSWORLD_GETTERS else
                               "not a getter of OSWorld's evaluator (a misspelling?)"))
    for side, i, getter in task.evaluator.getters():
        if getter["type"] in capabilities.unanswered:
            out.append(Refusal(f"evaluator.{side}[{i}]", str(getter["type"]),
                               f"{capabilities.where} cannot answer it "
                               f"({capabilities.unanswered[getter['type']]})"))
    if metric_problems is not None:
        out += [Refusal("evaluator.func", "metric", problem)
                for problem in metric_problems(task.evaluator.func)]
    out += [Refusal(where, "needs", why) for where, why in missing(task_needs(task), capabilities)]
    return out


class Admission:
    """:func:`refusals` with one backend's inputs, the same before training and at each reset.

    Args:
        capabilities: What the backend's desktops have.
        mirror: Local copies of downloads.
        placeholders: Values of the command steps' placeholders.
        getters: The getter types the scoring implements (None: not OSWorld's scoring).
        runner: The isolated evaluator whose metrics are probed (``MetricRunner.check``), each
            metric once; None: metrics not checked.
    """

    def __init__(self, capabilities: Capabilities, *, mirror: MirrorArg = None,
                 placeholders: Mapping[str, object] | None = None,
                 getters: Iterable[str] | None = None, runner: Any = None) -> None:
        self.capabilities = capabilities
        self.mirror, self.placeholders, self.runner = mirror, placeholders, runner
        self.getters = None if getters is None else frozenset(getters)
        self._metrics: dict[str, str] = {}  # func -> why it cannot run ("" when it can)

    def _metric_problems(self, funcs: Iterable[str]) -> list[str]:
        from cua_rl.envs.backends.osworld.evaluation.scoring import unavailable_metrics

        out = []
        for func in dict.fromkeys(funcs):
            if func not in self._metrics:
                found = unavailable_metrics(self.runner, [func])
                self._metrics[func] = found[0] if found else ""
            if self._metrics[func]:
                out.append(self._metrics[func])
        return out

    def __call__(self, task: OSWorldTask) -> list[Refusal]:
        """Every reason ``task`` cannot run here (empty: it can)."""
        return refusals(task, self.capabilities, mirror=self.mirror,
                        placeholders=self.placeholders, getters=self.getters,
                        metric_problems=None if self.runner is None else self._metric_problems)

    def refuse(self, task: OSWorldTask) -> None:
        """Raise ``TaskSpecError`` naming the task and every reason it cannot run here."""
        found = self(task)
        if found:
            raise TaskSpecError(f"task {task.id} ({task.domain or 'no domain'}) cannot run here: "
                                f"{'; '.join(map(str, found))}")
