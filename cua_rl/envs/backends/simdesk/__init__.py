"""SimDesk: an embedded, deterministic, Pillow-rendered desktop for demos, tests and fast RL.

Public API::

    from cua_rl.envs.backends.simdesk import (
        SimDeskBackend, SimDeskConfig, SimDeskExpert, SimDeskTasks, make_task, run_expert,
        FAMILIES, APPS,
    )
    backend = SimDeskBackend(SimDeskConfig(width=640, height=400, popup_rate=0.1))
    task = make_task("editor_find", seed=3)          # id "simdesk/editor_find/3"
    actions, observations, success = run_expert(backend, task)

Same config + same task (its seed) + same actions give byte-identical screenshots and a11y text.

Module map: ``config`` (SimDeskConfig), ``render`` (themes, metrics, cached text), ``widgets`` /
``textwidgets`` / ``menus`` (widgets), ``windows`` (Window, WindowManager), ``desktop`` (state,
time, loading screens, popups), ``input`` (action dispatch), ``compositor`` (dirty-rect
rendering), ``fs`` (virtual filesystem), ``apps`` (App, AppSpec), ``family`` (TaskFamily),
``registry`` (APPS, FAMILIES), ``tasks`` (make_task, SimDeskTasks), ``expert`` (Ops,
SimDeskExpert, run_expert), ``backend`` (SimDeskBackend); apps: ``editor`` (+ ``editor_tasks``),
``files`` (+ ``files_tasks``), ``settings`` (+ ``settings_tasks``), ``webform`` (the Browser, +
``webform_tasks``); shell families: ``system_tasks``. 17 task families in all.

Engine hooks apps may use: ``desk.tickers`` (callables run once at the end of every step, e.g.
the Settings app's keep/revert countdown) and ``App.url`` (the Browser's address, reported in
``Observation.url`` while its window is focused).

Extension points. The engine (everything above except the app and family modules) is not edited
to add an app.

1. **An app** -- one module, e.g. ``files.py``:

   * subclass :class:`~.apps.App`; in ``__init__(self, desk, ...)`` build a
     :class:`~.windows.Window` of size ``desk.place(m.tx(w), m.tx(h))`` (``m = desk.m``; use
     ``m.tx`` for text-bearing sizes, ``m.px`` for the rest, ``m.title_h``, ``m.row_h``,
     ``m.field_h``, ``m.button_h``, ``m.line_h``, ``m.pad``), ``window.add(...)`` widgets from
     ``widgets`` / ``textwidgets`` / ``menus`` (Button, Label, TextField, TextArea, Checkbox
     (``toggle=True`` for a switch), Dropdown, ListView, ResultsPanel, MenuBar), set
     ``self.window = window``, ``window.on_close = self.on_closed``, optionally
     ``window.on_key_hook`` (app shortcuts: ``(key, mods) -> bool``), ``window.default_button``
     (Enter) and ``window.on_cancel`` (Escape / close button of a dialog), then
     ``desk.open_window(window)``;
   * modal dialogs: ``Window(title, desk.place(w, h, center=True), m.title_h, kind="dialog",
     modal_parent=self.window, app=self)``; keep a reference on the app (``None`` again from
     ``dialog.on_close``) so checkers and plans can read it;
   * slow operations (launch, open, save, apply) go through ``desk.busy(window, "Label...",
     then)``: it runs ``then`` now or after a seeded loading screen (``loading_prob``);
   * read and write files through ``desk.fs`` (:class:`~.fs.VirtualFS`, home ``fs.HOME``);
     product bugs are ``name in desk.bugs`` (add new names to ``config.KNOWN_BUGS``);
   * drag and drop (file manager): a drag that starts on a widget (not a title bar) calls
     ``widget.on_drag(x0, y0, x1, y1, ctx)`` in window coordinates (the end point may lie
     outside the window; add ``window.x/y`` for screen coordinates and use
     ``desk.wm.top_at`` to find a drop target in another window); ``ctx.clipboard`` holds
     text for cut/copy/paste;
   * every change of widget state must call ``widget.invalidate()`` (the provided setters do)
     or the window will not be repainted; ``tests/simdesk`` compares incremental and full
     renders, run them on the new app;
   * declare ``APP = AppSpec("files", "Files", (r, g, b), "Fi", launch)`` where
     ``launch(desk) -> App`` creates the instance (it appears as a desktop icon).

2. **Task families** -- in the app's module or a ``<app>_tasks.py`` next to it, build
   :class:`~.family.TaskFamily` objects: ``name``, ``description``, ``app``, ``params``
   (name -> type, validated), ``sample_params(rng) -> dict`` (``family.pick`` draws one
   element), ASCII ``templates`` (``str.format`` over params), ``setup(desk, params)`` (runs
   without loading screens; use ``family.populate_home`` for the standard files; store anything
   the checker needs in ``desk.state``; ``desk.state["initial_fs"]`` is a snapshot taken after
   set-up), ``check(desk, params) -> bool`` on internal state (never pixels), ``plan``,
   ``min_steps`` (Done excluded), optional ``vocabulary_fn`` (default: nothing to type) and
   ``validate(params)`` raising ``TaskSpecError`` naming the field (``family.param_error``
   words it). The module exports ``APPS: tuple[AppSpec, ...]`` and
   ``FAMILIES: tuple[TaskFamily, ...]``; add the module to ``registry.MODULES`` (one line).

3. **An expert plan** -- ``plan(ops, params) -> Action | None``: return the next action toward
   the goal as read from the live desktop (``ops.desk``: ``desk.apps_of(FilesApp)``, the
   app's widgets and dialogs), or ``None`` when the goal is *visibly* reached (so that an
   injected bug that only looks like success makes the expert declare Done and fail the
   checker). Build actions with :class:`~.expert.Ops` (``click_widget``, ``click_rect``,
   ``click_close``, ``key``, ``type_into``, ``fill``, ``menu``, ``launch``, ``app_or_launch``,
   ``focus_window``): they dismiss covering popups, raise covered windows and close blocking
   dialogs first. Keep the
   plan a function of the screen state (no memory), so that it re-plans after mistakes.
   :class:`~.expert.SimDeskExpert` adds loading waits, hesitation, mistakes, giving up and a
   stuck detector (the same action four times in a row -> ``Fail``).
"""

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import KNOWN_BUGS, SimDeskConfig
from cua_rl.envs.backends.simdesk.expert import Ops, SimDeskExpert, run_expert
from cua_rl.envs.backends.simdesk.family import TaskFamily
from cua_rl.envs.backends.simdesk.registry import APPS, FAMILIES, get_family
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks, make_task

__all__ = [
    "APPS",
    "FAMILIES",
    "KNOWN_BUGS",
    "App",
    "AppSpec",
    "Ops",
    "SimDeskBackend",
    "SimDeskConfig",
    "SimDeskExpert",
    "SimDeskTasks",
    "TaskFamily",
    "get_family",
    "make_task",
    "run_expert",
]
