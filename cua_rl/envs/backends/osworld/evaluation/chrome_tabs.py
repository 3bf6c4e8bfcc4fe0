"""OSWorld's Chrome getters that read the open tabs, over Chrome's debugging port.

Upstream drives the VM's Chrome with Playwright's ``connect_over_cdp``; these read the same
through :meth:`~cua_rl.envs.backends.vm.client.VMServerClient.chrome` (plain CDP, through
``cua-rl desktop-server``'s tunnel on a local desktop), with upstream's config keys and return
shapes:

* ``open_tabs_info``: ``[{"title", "url"}, ...]``, every tab once its page has loaded (upstream
  waits for each page's network to go idle; a page still loading after the client's timeout,
  30 s by default, is listed as ``"Load timeout"``, as upstream); ``[]`` when Chrome does not
  answer (upstream launches a fresh Chrome first, whose only tab is a new one: both score 0
  against a task's tabs);
* ``active_tab_info``: ``{"title", "url", "content"}`` of the tab a user sees (its document is
  ``visible``); None without one. Upstream finds the URL in the accessibility tree's address bar
  and loads it again in a new page; this reads the tab itself, so a page that redirects or
  changes when loaded again is read as the user left it;
* ``active_url_from_accessTree``: that tab's URL as the address bar shows it (without
  ``https://`` / ``http://``) after ``goto_prefix`` (default ``https://``), as upstream builds
  it; None without one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cua_rl.envs.backends.vm.cdp import CDPError

if TYPE_CHECKING:
    from cua_rl.envs.backends.osworld.evaluation.context import GetterContext

__all__ = ["CHROME_TAB_GETTERS"]

logger = logging.getLogger(__name__)

_LOADED = ("new Promise(done => document.readyState === 'complete' ? done(true) : "
           "addEventListener('load', () => done(true), {once: true}))")
_CONTENT = ("(document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '') "
            "+ document.documentElement.outerHTML")


def get_open_tabs_info(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[dict[str, str]]:
    """``[{"title", "url"}]`` of every open tab (see the module docstring)."""
    chrome = ctx.client.chrome()
    try:
        tabs = chrome.tabs()
    except CDPError as error:
        logger.warning("task %s: %s: Chrome does not answer (%s): no tabs", ctx.task_id,
                       ctx.where, error)  # fmt: skip
        return []
    late = set()
    for tab in tabs:
        try:
            chrome.evaluate(tab["id"], _LOADED)
        except CDPError:
            late.add(tab["id"])
    found = {t["id"]: t for t in chrome.tabs()}
    return [{"title": "Load timeout", "url": tab["url"]} if tab["id"] in late else
            {"title": found.get(tab["id"], tab)["title"], "url": found.get(tab["id"], tab)["url"]}
            for tab in tabs if tab["id"] in found or tab["id"] in late]


def _active(ctx: GetterContext) -> tuple[Any, dict[str, Any]] | None:
    chrome = ctx.client.chrome()
    try:
        tab = chrome.active_tab()
    except CDPError as error:
        logger.warning("task %s: %s: Chrome does not answer (%s)", ctx.task_id, ctx.where, error)
        return None
    return None if tab is None else (chrome, tab)


def get_active_tab_info(ctx: GetterContext, cfg: Mapping[str, Any]) -> dict[str, str] | None:
    """``{"title", "url", "content"}`` of the tab a user sees, or None."""
    found = _active(ctx)
    if found is None:
        return None
    chrome, tab = found
    try:
        chrome.evaluate(tab["id"], _LOADED)
        content = chrome.evaluate(tab["id"], _CONTENT)
        title = chrome.evaluate(tab["id"], "document.title")
        url = chrome.evaluate(tab["id"], "location.href")
    except CDPError as error:
        logger.warning("task %s: %s: the active tab could not be read (%s)", ctx.task_id,
                       ctx.where, error)  # fmt: skip
        return None
    return {"title": str(title), "url": str(url), "content": str(content)}


def get_active_url_from_accessTree(ctx: GetterContext,  # noqa: N802 (OSWorld's name)
                                   cfg: Mapping[str, Any]) -> str | None:
    """The active tab's URL as the address bar shows it, after ``goto_prefix``."""
    prefix = cfg.get("goto_prefix", "https://")
    if not isinstance(prefix, str):
        raise ctx.fail(f"getter 'active_url_from_accessTree' needs 'goto_prefix' (str), got "
                       f"{prefix!r:.80}")  # fmt: skip
    found = _active(ctx)
    if found is None:
        return None
    url = str(found[1]["url"])
    for scheme in ("https://", "http://"):
        if url.startswith(scheme):
            url = url[len(scheme):]
            break
    return prefix + url


CHROME_TAB_GETTERS: dict[str, Callable[[GetterContext, Mapping[str, Any]], Any]] = {
    "open_tabs_info": get_open_tabs_info, "active_tab_info": get_active_tab_info,
    "active_url_from_accessTree": get_active_url_from_accessTree,
}
