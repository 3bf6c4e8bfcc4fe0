"""What of a WAA task runs here, and what is refused with a precise reason.

Every set-up step type (:data:`STEPS`) and every evaluator getter type WAA's task files use
(:data:`GETTERS`: those of the example files plus OSWorld's that the same client runs) is either
**run** (the entry says through which endpoint) or **refused** (the entry says why). A type in
neither table is refused as unknown. Metrics are OSWorld's ``desktop-env`` functions run by
:class:`~cua_rl.envs.backends.osworld.evaluation.MetricRunner` (WAA's metric modules are a 2024 fork
of the same package); a metric that venv lacks is refused by the runner's own check.

:func:`plan_waa` plans one task (OSWorld's
:func:`~cua_rl.envs.backends.osworld.setup_plan.plan_setup`: downloads from a local mirror,
placeholders substituted, host paths confined) and adds these refusals, so a task that cannot run
here is refused before its episode (``TaskSpecError``), never skipped or scored 0. It also refuses a
relative guest path in a step (:func:`guest_paths`): WAA's server would resolve it against its own
working directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from os import PathLike
from typing import Any

from cua_rl.envs.backends.osworld.setup_plan import Refusal, SetupPlan, plan_setup
from cua_rl.envs.backends.waa.browser import BROWSER_GETTERS
from cua_rl.envs.backends.waa.tasks import WAATask
from cua_rl.errors import TaskSpecError

__all__ = ["GETTERS", "STEPS", "Support", "guest_paths", "plan_waa", "support_of_getter",
           "support_of_step", "unsupported"]


@dataclass(frozen=True)
class Support:
    """Whether a step or getter type runs here.

    Attributes:
        runs: True when cua_rl runs it.
        how: Through which endpoint it runs, or why it is refused.
    """

    runs: bool
    how: str


_CDP = ("drives or reads the browser through its remote-debugging port (CDP on guest port "
        "9222) or its window; cua_rl does not drive CDP on a WAA VM")
_HISTORY = ("writes rows into the browser's History database in the VM; not implemented for "
            "WAA in cua_rl")
_ACCOUNT = "needs a real Google account (OAuth); not available"
_NOT_PORTED = ("WAA computes it with its own Windows-side code ({what}); not re-implemented "
               "in cua_rl")

STEPS: Mapping[str, Support] = {
    "download": Support(True, "the file's local copy (env.backend_kwargs.mirror) uploaded "
                        "with /setup/upload (the host has no network); refused without one"),
    "upload_file": Support(True, "/setup/upload"),
    "open": Support(True, "/setup/open_file"),
    "launch": Support(True, "/setup/launch"),
    "execute": Support(True, "/execute"),
    "command": Support(True, "/execute"),
    "execute_with_verification": Support(True, "/setup/execute_with_verification"),
    "sleep": Support(True, "a sleep on the host"),
    "activate_window": Support(True, "/setup/activate_window"),
    "close_window": Support(True, "/setup/close_window"),
    "change_wallpaper": Support(True, "/setup/change_wallpaper"),
    "create_folder": Support(True, "/setup/create_folder {path} (WAA)"),
    "recycle_file": Support(True, "/setup/recycle {path} (WAA)"),
    "close_all": Support(True, "/setup/close_all (WAA)"),
    "chrome_open_tabs": Support(False, _CDP),
    "chrome_close_tabs": Support(False, _CDP),
    "update_browse_history": Support(False, _HISTORY),
    "edge_open_tabs": Support(False, _CDP),
    "update_browse_history_edge": Support(False, _HISTORY),
    "googledrive": Support(False, _ACCOUNT),
    "login": Support(False, _ACCOUNT),
}
"""Set-up step type -> support (every type :data:`~cua_rl.envs.backends.waa.tasks.WAA_STEP_TYPES`
allows)."""

_RUN = {
    # OSWorld's getters (cua_rl.envs.backends.osworld.evaluation.getters) over the same client
    "rule": "the rules as given (host)",
    "vm_file": "/file (form file_path) into the task cache",
    "cloud_file": "the local mirror copy (host has no network); refused without one",
    "cache_file": "a file of the task cache",
    "vm_command_line": "/execute output",
    "vm_command_error": "/execute stderr",
    "vm_terminal_output": "/terminal",
    "list_directory": "/list_directory",
    "vm_screen_size": "/screen_size",
    "vm_window_size": "/window_size",
    "accessibility_tree": "/accessibility?backend=<a11y_backend>",
    # WAA's own getters (cua_rl.envs.backends.waa.evaluation)
    "vm_folder_exists_in_documents": "/documents_path, then /folder_exists {folder_name, path}",
    "vm_file_exists_in_desktop": "/desktop_path, then /file_exists {file_name, path}",
    "vm_file_exists_in_vm_folder": "/file_exists {file_name, path: folder_name}",
    "is_details_view": "/is_details_view {path: folder_path}",
    "is_directory_read_only_for_user": "/is_directory_read_only_for_user {directory, user}",
    "are_files_sorted_by_modified_time": "/are_files_sorted_by_modified_time {directory}",
    "are_all_images_tagged": "/are_all_images_tagged {directory, tag}",
    "check_if_timer_started": "/check_if_timer_started {hours, minutes, seconds}",
    "check_if_world_clock_exists": "/check_if_world_clock_exists {city, country}",
    "is_file_saved_desktop": "/desktop_path, then /file: 'true' iff textcontent is in the file",
    "is_file_desktop": "/desktop_path, then /file: 'true' iff the file exists",
    "all_png_file_names": "/list_directory and /file: the file's lines equal the folder's "
                          "*.png names",
    "is_files_moved_downloads": "/list_directory of Downloads and OldDownloads",
    "vm_active_window_title": "/execute of a fixed pyautogui.getActiveWindowTitle() probe",
    # Chrome's and Edge's profile files under the VM's LOCALAPPDATA
    # (cua_rl.envs.backends.waa.browser)
    **dict.fromkeys(BROWSER_GETTERS, "/file of the profile's file under LOCALAPPDATA (asked with "
                    "/execute), read on the host"),
}
_REFUSE = {
    **dict.fromkeys((
        "active_tab_info", "open_tabs_info", "active_url_from_accessTree", "active_tab_html_parse",
        "page_info", "url_dashPart", "pdf_from_url", "info_from_website",
        "number_of_search_results", "youtube_captions_enabled", "active_tab_contains_text",
        "google_maps_state", "live_caption_enabled", "live_caption_languages",
        "active_tab_url_parse", "gotoRecreationPage_and_get_html_content",
        "active_tab_info_simple", "chrome_page_zoom_from_access_tree", "edge_home_page",
        "validate_pwa_installed", "url_shortcuts_on_desktop", "edge_immersive_reader_state",
        "edge_default_download_folder",
    ), _CDP),
    "default_search_engine": "WAA's copy looks Chrome's engine up by GUID first (a Windows fix "
                             "not in OSWorld's getter); not re-implemented in cua_rl",
    **dict.fromkeys((
        "default_browser", "active_hours_of_user_to_not_interrupt_for_windows_updates",
        "desktop_background", "mono_audio_enabled", "visual_audio_alerts",
        "notification_duration", "caption_style_names", "selected_caption_style_name",
    ), _NOT_PORTED.format(what="a Windows settings/registry query")),
    **dict.fromkeys((
        "content_from_vm_file", "desktop_file_content", "sticky_notes_content",
        "zipped_folder_in_desktop", "is_all_docx_in_archive", "is_file_hidden",
        "vm_library_folders", "vlc_playing_info", "default_video_player", "vscode_config",
        "gimp_config_file", "audio_in_slide", "background_image_in_slide",
        "conference_city_in_order", "thunderbird_calendar_events", "rule_relativeTime",
        "time_diff_range", "replay", "vm_wallpaper",
    ), _NOT_PORTED.format(what="a getter of WAA's desktop_env")),
    "googledrive_file": _ACCOUNT,
    "vlc_config": _NOT_PORTED.format(what="VLC's vlcrc at a Windows profile path"),
    "system_timezone": _NOT_PORTED.format(what="a Windows settings/registry query"),
    "system_notifications": _NOT_PORTED.format(what="a Windows settings/registry query"),
    "storage_sense_run_frequency": _NOT_PORTED.format(what="a Windows settings/registry query"),
    "night_light_state": _NOT_PORTED.format(what="a Windows settings/registry query"),
    "shortcuts_on_desktop": _NOT_PORTED.format(what="a scan of Windows .lnk shortcuts"),
    "image_dimension_matches_input": _NOT_PORTED.format(what="image analysis of a saved PNG"),
    "is_red_circle_present_on_canvas": _NOT_PORTED.format(what="image analysis of a saved PNG"),
}
GETTERS: Mapping[str, Support] = {
    **{k: Support(True, v) for k, v in _RUN.items()},
    **{k: Support(False, v) for k, v in _REFUSE.items()},
}
"""Getter type -> support."""


def support_of_step(kind: str) -> Support:
    """The support of a set-up step type (an unknown one is refused)."""
    return STEPS.get(kind, Support(False, f"unknown step type {kind!r}"))


def support_of_getter(kind: str) -> Support:
    """The support of a getter type (an unknown one is refused)."""
    return GETTERS.get(kind, Support(False, f"unknown getter type {kind!r} (not among WAA's "
                                            f"known getters; not implemented)"))


def unsupported(task: WAATask) -> tuple[Refusal, ...]:
    """Every step and getter of ``task`` that cannot run here, with the reason (mirror copies
    are not checked here; :func:`plan_waa` does)."""
    out = []
    for phase, steps in (("config", task.config), ("postconfig", task.evaluator.postconfig)):
        for i, step in enumerate(steps):
            support = support_of_step(step.type)
            if not support.runs:
                out.append(Refusal(f"{phase}[{i}]", step.type, support.how))
    for side, i, getter in task.evaluator.getters():
        support = support_of_getter(str(getter["type"]))
        if not support.runs:
            out.append(Refusal(f"evaluator.{side}[{i}]", str(getter["type"]), support.how))
    return tuple(out)


#: An absolute guest path: ``C:\...`` / ``C:/...``, ``\\server\...``, ``/...``, ``~...``.
_ABSOLUTE_GUEST = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|/|~)")
#: Step type -> its guest path fields (``files`` items' ``path`` for file lists).
_PATH_FIELDS = {"download": "files", "upload_file": "files", "open": "path",
                "create_folder": "path", "recycle_file": "path", "change_wallpaper": "path"}


def _paths_of(kind: str, params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    key = _PATH_FIELDS.get(kind)
    if key == "files":
        for i, item in enumerate(params.get("files") or ()):
            if isinstance(item, Mapping):
                yield f"files[{i}].path", item.get("path")
    elif key is not None:
        yield key, params.get(key)


def guest_paths(task: WAATask) -> tuple[Refusal, ...]:
    """A refusal for each relative guest path of a step (``Documents\\x.txt``): WAA's server
    resolves one against its working directory, never where the task means."""
    out = []
    for phase, steps in (("config", task.config), ("postconfig", task.evaluator.postconfig)):
        for i, step in enumerate(steps):
            for field, value in _paths_of(step.type, step.parameters):
                if isinstance(value, str) and not _ABSOLUTE_GUEST.match(value):
                    out.append(Refusal(f"{phase}[{i}]", step.type, f"{field}: {value!r:.200} is "
                                       "relative; allowed: an absolute guest path such as "
                                       "C:\\Users\\Docker\\Documents\\x.txt"))
    return tuple(out)


def plan_waa(task: WAATask, *, mirror: Mapping[str, Any] | str | PathLike[str] | None = None,
             placeholders: Mapping[str, object] | None = None,
             dry_run: bool = False) -> SetupPlan:  # fmt: skip
    """Plan a WAA task's set-up and postconfig for this machine.

    Args:
        task: The task.
        mirror: Local copies of downloads (see
            :func:`~cua_rl.envs.backends.osworld.setup_plan.load_mirror`).
        placeholders: ``SCREEN_WIDTH``/``SCREEN_HEIGHT``/... values.
        dry_run: List what cannot run in :attr:`SetupPlan.refused` instead of raising.

    Raises:
        TaskSpecError: (without ``dry_run``) naming the task, each step or getter that cannot run
            and why.
    """
    plan = plan_setup(task, mirror=mirror, placeholders=placeholders,  # type: ignore[arg-type]
                      browser=True, dry_run=True)  # fmt: skip
    refused = list(plan.refused)
    for extra in (*unsupported(task), *guest_paths(task)):
        if (extra.where, extra.type) not in {(r.where, r.type) for r in refused}:
            refused.append(extra)
    if refused and not dry_run:
        first, more = refused[0], len(refused) - 1
        also = f" (and {more} more: {'; '.join(map(str, refused[1:4]))})" if more else ""
        raise TaskSpecError(f"task {task.id!r} ({task.domain or 'no domain'}) cannot run here: "
                            f"{first}{also}")
    runnable = {r.where for r in refused}
    return replace(plan, refused=tuple(refused),
                   config=tuple(s for s in plan.config if f"config[{s.index}]" not in runnable),
                   postconfig=tuple(s for s in plan.postconfig
                                    if f"postconfig[{s.index}]" not in runnable))  # fmt: skip
