"""The web-form app: a browser window (Back, Reload, address bar) showing ``forms.local``.

Pages: ``/`` (home: links), ``/signup`` (full name, email, age, a country dropdown, plan radio
buttons, newsletter and terms checkboxes, Submit), ``/thanks`` (``Thank you, <name>!`` and a
summary), ``/search?q=<words>`` (a search box and result links), ``/item/<slug>``; anything else
is ``Page not found``. Tab walks the toolbar and the page; Enter in a form field submits, in the
address bar navigates; Ctrl+L focuses the address bar, F5 / Ctrl+R reload, Alt+Left goes back.
Page loads and submissions go through ``desk.busy``. Submit validates (:func:`validate_signup`):
red messages under invalid fields and a ``Please fix N errors`` banner, or the submission is
appended to ``desk.state["submissions"]`` (:meth:`SignupForm.record`) and the thanks page opens.
The catalog is ``desk.state["catalog"]`` if set, else :data:`CATALOG`. Bugs: ``button_disabled``
(Submit stays disabled), ``save_fails`` (thanks page, nothing recorded), ``validation_wrong`` (a
dot before the ``@`` is rejected), ``search_empty``. :attr:`BrowserApp.url` is the
``Observation.url`` while the window has the focus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.render import Color, Painter, Rect
from cua_rl.envs.backends.simdesk.textwidgets import TextField
from cua_rl.envs.backends.simdesk.widgets import Button, Checkbox, Dropdown, Label, Widget
from cua_rl.envs.backends.simdesk.windows import Window

__all__ = [
    "APP", "CATALOG", "COUNTRIES", "HOME_URL", "PLANS", "SEARCH_URL", "SIGNUP_URL", "THANKS_URL",
    "BrowserApp", "Link", "Radio", "SearchPage", "SignupForm", "Text", "email_valid", "item_url",
    "normalize_url", "search_catalog", "search_url", "validate_signup",
]

SITE = "http://forms.local"
HOME_URL = f"{SITE}/"
SIGNUP_URL = f"{SITE}/signup"
THANKS_URL = f"{SITE}/thanks"
SEARCH_URL = f"{SITE}/search"
COUNTRIES: tuple[str, ...] = ("Canada", "France", "Germany", "India", "Japan", "Kenya",
                              "Mexico", "Spain")
"""The sign-up form's country options (after the ``Select a country`` prompt)."""
COUNTRY_PROMPT = "Select a country"
PLANS: tuple[str, ...] = ("Free", "Pro", "Team")
"""The sign-up form's plan radio buttons; ``Free`` is checked by default."""
AGE_RANGE = (18, 99)
CATALOG: tuple[str, ...] = ("Copper kettle", "Silver lantern", "Wooden ladder", "Red guitar",
                            "Velvet jacket", "Garden basket", "Brass lantern", "Small kettle")
"""The default search catalog when a task sets none."""
ERROR: Color = (200, 30, 30)
_BANNER_BG: Color = (253, 228, 228)
_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_FIELDS = (("name", "Full name"), ("email", "Email"), ("age", "Age"))


# -- pure helpers ----------------------------------------------------------------------------
def email_valid(email: str, bugs: frozenset[str] = frozenset()) -> bool:
    """Whether ``email`` looks like ``local@domain.tld``; the ``validation_wrong`` bug also
    rejects a dot in the local part.

    >>> email_valid("ana.silva@example.com"), email_valid("ana.silva@example")
    (True, False)
    """
    if "validation_wrong" in bugs and "." in email.partition("@")[0]:
        return False
    return bool(_EMAIL.match(email))


def validate_signup(values: Mapping[str, Any], bugs: frozenset[str] = frozenset()
                    ) -> dict[str, str]:
    """Error messages of the sign-up form by field (empty when the form is valid).

    Args:
        values: ``name``, ``email``, ``age`` (texts), ``country`` ('' when not chosen),
            ``terms`` (bool), as returned by :meth:`SignupForm.values`.
        bugs: Injected bugs (``validation_wrong``).
    """
    errors: dict[str, str] = {}
    if not values["name"].strip():
        errors["name"] = "Please enter your full name"
    email = values["email"].strip()
    if not email:
        errors["email"] = "Please enter your email address"
    elif not email_valid(email, bugs):
        errors["email"] = "Enter a valid email like name@example.com"
    age = values["age"].strip()
    lo, hi = AGE_RANGE
    if not age:
        errors["age"] = "Please enter your age"
    elif not age.isdigit() or not lo <= int(age) <= hi:
        errors["age"] = f"Age must be a whole number from {lo} to {hi}"
    if not values["country"]:
        errors["country"] = "Please select a country"
    if not values["terms"]:
        errors["terms"] = "You must agree to the terms to continue"
    return errors


def normalize_url(text: str) -> str:
    """An address-bar entry as a full URL: scheme added, host lower-cased, no trailing slash.

    >>> normalize_url("Forms.local/signup/"), normalize_url("forms.local")
    ('http://forms.local/signup', 'http://forms.local/')
    """
    s = text.strip()
    if "://" not in s:
        s = "http://" + s
    scheme, _, rest = s.partition("://")
    host, slash, path = rest.partition("/")
    path = ("/" + path).rstrip("/") if slash else ""
    return f"{scheme.lower()}://{host.lower()}{path or '/'}"


def item_url(name: str) -> str:
    """The URL of a catalog item's page (``Copper kettle``: ``.../item/copper-kettle``)."""
    return f"{SITE}/item/{'-'.join(name.lower().split())}"


def search_url(query: str) -> str:
    """The URL of the results page for ``query``."""
    return f"{SEARCH_URL}?q={'+'.join(query.split())}"


def search_catalog(catalog: Sequence[str], query: str) -> list[str]:
    """Catalog items with every word of ``query`` as a word of their name, in catalog order.

    >>> search_catalog(["Copper kettle", "Red guitar", "Small kettle"], "Kettle")
    ['Copper kettle', 'Small kettle']
    """
    words = query.lower().split()
    return [c for c in catalog if words and all(w in c.lower().split() for w in words)]


# -- widgets ---------------------------------------------------------------------------------
class Text(Label):
    """Page text: ``body``, ``muted``, ``heading`` (large), ``error`` (small red) or
    ``banner`` (red text in a tinted box)."""

    def __init__(self, rect: Rect, text: str, style: str = "body", name: str | None = None):
        super().__init__(rect, text, muted=style == "muted", name=name)
        self.style = style
        self.role = {"heading": "heading", "error": "alert", "banner": "alert"}.get(style, "label")

    def draw(self, p: Painter) -> None:
        x, y, w, h = self.rect
        if self.style == "heading":
            p.text(x, y, self.text, p.theme.text, h - p.m.pad, max_w=w)  # see _text
        elif self.style == "error":  # a lighter red on dark themes
            red = ERROR if sum(p.theme.field_bg) > 300 else (255, 120, 120)
            p.text(x, y, self.text, red, p.m.small, max_w=w)
        elif self.style == "banner":
            p.rect(self.rect, _BANNER_BG, ERROR)
            p.text_in(self.rect, self.text, ERROR, align="left")
        else:
            super().draw(p)


class Link(Button):
    """A hyperlink: underlined accent-coloured text; a click or Enter follows it."""

    role = "link"

    def draw(self, p: Painter) -> None:
        x, y, w, h = self.rect
        tw = min(w, p.width(self.name))
        ty = y + (h - p.m.font) // 2 - 1
        p.text(x, ty, self.name, p.theme.accent, max_w=w)
        p.rect((x, ty + p.m.font + 2, tw, 1), p.theme.accent)
        if self.focused:
            p.rect(self.rect, None, p.theme.border)


class Radio(Checkbox):
    """A radio button of a group: checking it unchecks the others; a click cannot uncheck it."""

    def __init__(self, rect: Rect, label: str, group: list[Radio], checked: bool = False):
        super().__init__(rect, label, checked)
        self.role, self.group = "radio", group
        group.append(self)

    def set_checked(self, checked: bool) -> None:
        """Check this radio button (and uncheck the rest of the group); False is ignored."""
        for r in self.group if checked else ():
            if r.checked != (r is self):
                r.checked = r is self
                r.invalidate()

    def draw(self, p: Painter) -> None:
        t, (x, y, w, h) = p.theme, self.rect
        d = min(h - 2, p.m.font + 2)
        by = y + (h - d) // 2
        p.draw.ellipse((x, by, x + d - 1, by + d - 1), fill=t.field_bg,
                       outline=t.text if self.focused else t.border)
        if self.checked:
            k = max(2, d // 4)
            p.draw.ellipse((x + k, by + k, x + d - 1 - k, by + d - 1 - k), fill=t.accent)
        tx = x + d + p.m.pad
        p.text(tx, y + (h - p.m.font) // 2 - 1, self.name, t.text, max_w=w - (tx - x))


class _Panel(Widget):
    """A filled, optionally outlined rectangle (toolbar strip, page, side box)."""

    def __init__(self, rect: Rect, name: str, role: str, fill: str, outline: bool = True):
        super().__init__(rect, name)
        self.role, self.fill, self.outline = role, fill, outline

    def draw(self, p: Painter) -> None:
        p.rect(self.rect, getattr(p.theme, self.fill), p.theme.border if self.outline else None)


class _NavButton(Button):
    """A toolbar button drawn as a glyph: a back arrow or a reload circle."""

    def draw(self, p: Painter) -> None:
        t, (x, y, w, h) = p.theme, self.rect
        p.rect(self.rect, t.button_bg, t.text if self.focused else t.border)
        col = t.text if self.enabled else t.muted
        cx, cy, a = x + w // 2, y + h // 2, max(3, h // 4)
        lw = max(1, h // 10)
        if self.name == "Back":
            p.draw.line((cx - a, cy, cx + a, cy), col, lw)
            p.draw.line((cx - a, cy, cx, cy - a), col, lw)
            p.draw.line((cx - a, cy, cx, cy + a), col, lw)
        else:
            p.draw.arc((cx - a, cy - a, cx + a, cy + a), 60, 350, col, lw)
            k = max(2, a // 2)
            p.draw.polygon([(cx + a - k, cy - 1), (cx + a + k, cy - 1), (cx + a, cy + k)], col)


# -- page models -----------------------------------------------------------------------------
@dataclass
class SignupForm:
    """The widgets of the sign-up page (what checkers and expert plans read)."""

    fields: dict[str, TextField]
    country: Dropdown
    plans: list[Radio]
    newsletter: Checkbox
    terms: Checkbox
    submit: Button
    banner: Text
    subtitle: Text
    errors: dict[str, Text]

    @property
    def plan(self) -> str:
        """The checked plan."""
        return next((r.name for r in self.plans if r.checked), "")

    def values(self) -> dict[str, Any]:
        """The form's current values (texts as typed, ``country`` '' when not chosen)."""
        return {
            "name": self.fields["name"].text, "email": self.fields["email"].text,
            "age": self.fields["age"].text,
            "country": self.country.selected if self.country.index > 0 else "",
            "plan": self.plan, "newsletter": self.newsletter.checked, "terms": self.terms.checked,
        }

    def record(self) -> dict[str, Any]:
        """The submission a valid form records: ``form``, ``name``, ``email``, ``age`` (int),
        ``country``, ``plan``, ``newsletter`` (bool)."""
        v = self.values()
        return {"form": "signup", "name": v["name"].strip(), "email": v["email"].strip(),
                "age": int(v["age"]), "country": v["country"], "plan": v["plan"],
                "newsletter": v["newsletter"]}

    def show_errors(self, errors: Mapping[str, str]) -> None:
        """Show ``errors`` under their fields and the banner (hide both when empty)."""
        for key, label in self.errors.items():
            label.set_text(errors.get(key, ""))
            label.set_visible(key in errors)
        n = len(errors)
        self.banner.set_text(f"Please fix {n} error{'' if n == 1 else 's'}")
        self.banner.set_visible(n > 0)
        self.subtitle.set_visible(n == 0)


@dataclass
class SearchPage:
    """The widgets of the search page and the query whose results it shows (None: no search)."""

    field: TextField
    button: Button
    query: str | None
    results: list[Link] = field(default_factory=list)


# -- the app ---------------------------------------------------------------------------------
class BrowserApp(App):
    """A browser window on the ``forms.local`` site.

    Args:
        desk: The desktop.
        url: The page to open (after a seeded loading screen).
    """

    name = "browser"

    def __init__(self, desk: Desktop, url: str = HOME_URL) -> None:
        super().__init__(desk)
        m = desk.m
        win = Window("Browser", desk.place(m.tx(760), m.tx(600)), m.title_h, app=self)
        self.window = win
        W, H = win.size
        self.history: list[str] = []
        self.pos, self.current_url, self.page = -1, "", ""
        self.form: SignupForm | None = None
        self.search: SearchPage | None = None
        self.links: list[Link] = []
        self.last_submission: dict[str, Any] | None = None
        self._y = 0
        bar_h = m.field_h + 2 * m.pad
        win.add(_Panel((1, m.title_h, W - 2, bar_h), "Navigation", "toolbar", "button_bg",
                       outline=False))
        y, b = m.title_h + m.pad, m.field_h
        self.back = win.add(_NavButton((m.pad, y, b + m.pad, b), "Back", self.go_back,
                                       enabled=False))
        self.reload_button = win.add(_NavButton((2 * m.pad + b + m.pad, y, b + m.pad, b),
                                                "Reload", self.reload))
        ax = 3 * m.pad + 2 * (b + m.pad)
        self.address = win.add(TextField((ax, y, W - ax - m.pad, b), "Address", self._measure,
                                         on_submit=self._go_address))
        self.page_rect: Rect = (m.pad, m.title_h + bar_h + m.pad, W - 2 * m.pad,
                                H - m.title_h - bar_h - 2 * m.pad)
        self._chrome = len(win.widgets)
        self._x, self._w = self.page_rect[0] + 2 * m.pad, self.page_rect[2] - 4 * m.pad
        win.on_key_hook = self._shortcut
        win.on_close = self.on_closed
        desk.open_window(win)
        self.navigate(url)

    # -- state -------------------------------------------------------------------------------
    def _measure(self, s: str) -> int:
        return self.desk.textr.width(s, self.desk.m.font)

    @property
    def url(self) -> str | None:
        """The URL of the page shown (None while the first page loads)."""
        return self.current_url or None

    @property
    def catalog(self) -> list[str]:
        """The items the search page searches."""
        return list(self.desk.state.get("catalog", CATALOG))

    # -- navigation --------------------------------------------------------------------------
    def navigate(self, url: str, push: bool = True) -> None:
        """Load ``url`` (normalised) after a possible loading screen."""
        url = normalize_url(url)
        host = url.partition("://")[2].partition("/")[0]
        self.desk.busy(self.main, f"Loading {host}...", lambda: self._show(url, push))

    def go_back(self) -> None:
        """The Back button: the previous page of the history."""
        if self.pos > 0:
            self.pos -= 1
            self.navigate(self.history[self.pos], push=False)

    def reload(self) -> None:
        """The Reload button: load the current page again (a form comes back empty)."""
        if self.current_url:
            self.navigate(self.current_url, push=False)

    def _go_address(self) -> None:
        if self.address.text.strip():
            self.navigate(self.address.text)

    def _shortcut(self, key: str, mods: frozenset[str]) -> bool:
        if key == "l" and "ctrl" in mods:
            self.main.set_focus(self.address)
            self.address.select_all()
        elif key == "f5" or (key == "r" and "ctrl" in mods):
            self.reload()
        elif key == "left" and "alt" in mods:
            self.go_back()
        else:
            return False
        return True

    def _route(self, url: str) -> tuple[str, str]:
        if not url.startswith(SITE + "/"):
            return "unreachable", url
        path, _, query = url[len(SITE):].partition("?")
        if path == "/":
            return "home", ""
        if path == "/signup" or (path == "/thanks" and self.last_submission is not None):
            return path[1:], ""
        if path == "/search":
            q = dict(kv.partition("=")[::2] for kv in query.split("&") if kv).get("q")
            return "search", "" if q is None else "\0" + q.replace("+", " ")
        items = {item_url(c): c for c in self.catalog}
        return ("item", items[url]) if url in items else ("missing", url)

    def _show(self, url: str, push: bool = True) -> None:
        win = self.main
        del win.widgets[self._chrome:]
        win.set_focus(None)
        win.default_button = None
        self.form, self.search, self.links = None, None, []
        self.page, arg = self._route(url)
        self._y = self.page_rect[1] + self.desk.m.pad
        title = {"home": self._home, "signup": self._signup, "thanks": self._thanks,
                 "search": self._search, "item": self._item, "missing": self._missing,
                 "unreachable": self._missing}[self.page](arg)
        win.widgets[self._chrome].name = title  # the page's "document" panel
        if push:
            del self.history[self.pos + 1:]
            self.history.append(url)
            self.pos = len(self.history) - 1
        self.current_url = url
        self.address.set_text(url)
        self.address.hscroll = 0
        self.back.set_enabled(self.pos > 0)
        win.set_title(f"{title} - Browser")
        win.invalidate()

    # -- page building -----------------------------------------------------------------------
    def _text(self, text: str, style: str = "body", *, w: int | None = None,
              name: str | None = None, gap: int = 0) -> Text:
        m = self.desk.m
        h = m.font + max(3, round(m.font * 0.45)) + m.pad if style == "heading" else m.line_h
        t = self.main.add(Text((self._x, self._y, w or self._w, h), text, style, name))
        self._y += h + gap
        return t

    def _link(self, label: str, url: str) -> Link:
        m = self.desk.m
        w = min(self._w, self._measure(label) + 2)
        link = self.main.add(Link((self._x, self._y, w, m.line_h + 2), label,
                                  lambda: self.navigate(url)))
        self.links.append(link)
        self._y += m.line_h + 2 + m.pad // 2
        return link

    def _begin(self, title: str) -> None:
        m = self.desk.m
        self.main.add(_Panel(self.page_rect, title, "document", "field_bg"))
        self._text(title, "heading", gap=m.pad // 2)

    def _home(self, _arg: str) -> str:
        m = self.desk.m
        self._begin("Forms Portal")
        self._text("Welcome! What would you like to do today?", "muted", gap=m.pad)
        self._link("Create an account", SIGNUP_URL)
        self._link("Search the catalog", SEARCH_URL)
        self._y += m.pad
        self._text("News: the catalog now lists over 50 items.", "muted")
        return "Forms Portal"

    def _signup(self, _arg: str) -> str:
        m, win = self.desk.m, self.main
        self._begin("Create your account")
        sub_y = self._y
        subtitle = self._text("Fields marked * are required.", "muted", w=m.tx(330))
        self._y = sub_y
        banner = self._text("", "banner", w=m.tx(330), name="Error summary", gap=m.pad)
        lw = m.tx(96)
        fx = self._x + lw
        fw = min(m.tx(250), self._x + self._w - fx)
        err_h, gap = m.small + 3, max(2, m.pad // 2)
        errors: dict[str, Text] = {}

        def row(key: str, label: str, *widgets: Widget) -> None:
            ly = self._y + (m.field_h - m.font) // 2 - 1
            if label:
                win.add(Text((self._x, ly, lw, m.line_h), label + (" *" if key else ""),
                             name=label))
            for w in widgets:
                win.add(w)
            self._y += m.field_h + 1
            if key:
                errors[key] = win.add(Text((fx, self._y, self._x + self._w - fx, err_h), "",
                                           "error", name=f"{label or 'Terms'} error"))
                self._y += err_h
            self._y += gap

        fields: dict[str, TextField] = {}
        for key, label in _FIELDS:
            fields[key] = TextField((fx, self._y, m.tx(70) if key == "age" else fw, m.field_h),
                                    label, self._measure)
            row(key, label, fields[key])
        country = Dropdown((fx, self._y, min(fw, m.tx(190)), m.field_h), "Country",
                           (COUNTRY_PROMPT, *COUNTRIES))
        row("country", "Country", country)
        group: list[Radio] = []
        rx = fx
        for i, plan in enumerate(PLANS):
            rw = max(m.tx(72), self._measure(plan) + m.field_h + 2 * m.pad)
            Radio((rx, self._y, rw - m.pad, m.field_h), plan, group, i == 0)
            rx += rw
        row("", "Plan", *group)
        newsletter = Checkbox((fx, self._y, fw, m.field_h), "Send me the newsletter")
        row("", "", newsletter)
        terms = Checkbox((fx, self._y, fw, m.field_h), "I agree to the terms *")
        row("terms", "", terms)
        terms.name = "I agree to the terms"
        submit = win.add(Button((fx, self._y, m.tx(110), m.button_h), "Submit", self.submit,
                                primary=True, enabled="button_disabled" not in self.desk.bugs))
        win.default_button = submit
        bx, bw, lines = fx + fw + 2 * m.pad, self._x + self._w - fx - fw - 2 * m.pad, 5
        if bw >= m.tx(150):  # a side box, when there is room
            win.add(_Panel((bx, sub_y, bw, lines * m.line_h + 2 * m.pad), "Why join?",
                           "complementary", "button_bg"))
            win.add(Text((bx + m.pad, sub_y + m.pad, bw - 2 * m.pad, lines * m.line_h),
                         "Why join?\nFree plan, forever\nPro: 10 GB storage\nTeam: shared "
                         "forms\nCancel at any time", "muted", name="Why join?"))
        self.form = SignupForm(fields, country, group, newsletter, terms, submit, banner,
                               subtitle, errors)
        self.form.show_errors({})
        win.set_focus(fields["name"])
        return "Sign up"

    def submit(self) -> None:
        """The Submit button: validate; show errors, or record and open the thanks page."""
        if (form := self.form) is None:
            return
        errors = validate_signup(form.values(), self.desk.bugs)
        form.show_errors(errors)
        if errors:
            first = next(iter(errors))
            self.main.set_focus(form.fields.get(first) or
                                (form.country if first == "country" else form.terms))
            return
        record = form.record()

        def done() -> None:
            if "save_fails" not in self.desk.bugs:
                self.desk.state.setdefault("submissions", []).append(record)
            self.last_submission = record
            self._show(THANKS_URL)

        self.desk.busy(self.main, "Submitting...", done)

    def _thanks(self, _arg: str) -> str:
        m, rec = self.desk.m, self.last_submission
        assert rec is not None, "routed here only after a submission"
        self._begin(f"Thank you, {rec['name']}!")
        self._text("Your account has been created. Summary:", "muted", gap=m.pad // 2)
        for k in ("email", "age", "country", "plan"):
            self._text(f"{k.capitalize()}: {rec[k]}", name=k.capitalize())
        self._text(f"Newsletter: {'yes' if rec['newsletter'] else 'no'}", name="Newsletter",
                   gap=m.pad)
        self._link("Back to the home page", HOME_URL)
        return "Thank you"

    def _search(self, arg: str) -> str:
        m = self.desk.m
        query = arg[1:] if arg else None
        self._begin("Search the catalog")
        fw = min(m.tx(300), self._w - m.tx(100) - m.pad)
        fld = self.main.add(TextField((self._x, self._y, fw, m.field_h), "Search",
                                      self._measure, query or "", on_submit=self._run_search))
        btn = self.main.add(Button((self._x + fw + m.pad, self._y, m.tx(90), m.field_h),
                                   "Search", self._run_search, primary=True))
        self.main.default_button = btn
        self._y += m.field_h + m.pad
        page = SearchPage(fld, btn, query)
        if query is not None:
            found = [] if "search_empty" in self.desk.bugs else search_catalog(self.catalog,
                                                                             query)
            n = len(found)
            self._text(f"{n} result{'' if n == 1 else 's'} for \"{query}\"", "muted",
                       name="Results", gap=m.pad // 2)
            page.results = [self._link(name, item_url(name)) for name in found[:8]]
        self.search = page
        self.main.set_focus(fld)
        return f"{query} - Search" if query else "Search"

    def _run_search(self) -> None:
        if self.search is not None and self.search.field.text.strip():
            self.navigate(search_url(self.search.field.text))

    def _item(self, name: str) -> str:
        m = self.desk.m
        self._begin(name)
        self._text(f"Price: ${5 + sum(map(ord, name)) % 95}.00", name="Price")
        self._text("In stock. Ships within 2 days.", "muted", gap=m.pad)
        self._link("Search again", SEARCH_URL)
        return name

    def _missing(self, url: str) -> str:
        m = self.desk.m
        reach = self.page == "unreachable"
        title = "This site can't be reached" if reach else "Page not found"
        self._begin(title)
        self._text(f"{'No connection to' if reach else 'No page at'} {url}", "muted", gap=m.pad)
        self._link("Go to the home page", HOME_URL)
        return title


APP = AppSpec("browser", "Browser", (40, 150, 200), "Br", BrowserApp)
"""The browser's registry entry (desktop icon ``Browser``)."""
