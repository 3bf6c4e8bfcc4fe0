"""Web-form task families: ``webform_fill``, ``webform_fix_errors``, ``webform_search``.

Checkers read ``desk.state["submissions"]`` (exactly the expected record, nothing else) or the
page a browser shows; plans read the live browser (:class:`~.webform.BrowserApp`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.actions import Action, Hotkey
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.family import Params, TaskFamily, param_error, pick
from cua_rl.envs.backends.simdesk.fs import WORDS
from cua_rl.envs.backends.simdesk.webform import (
    AGE_RANGE,
    APP,
    COUNTRIES,
    PLANS,
    SEARCH_URL,
    SIGNUP_URL,
    BrowserApp,
    email_valid,
    item_url,
    search_catalog,
    validate_signup,
)

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["APPS", "FAMILIES", "expected_submission", "signup_plan"]

FIRST_NAMES = ("Alice", "Bruno", "Chen", "Dana", "Elif", "Farah", "Goran", "Hana", "Ivan",
               "Julia", "Kofi", "Lena", "Marco", "Nadia", "Omar", "Priya", "Rosa", "Sven",
               "Tara", "Yuki")
LAST_NAMES = ("Smith", "Garcia", "Novak", "Okafor", "Tanaka", "Silva", "Meyer", "Larsen",
              "Kowalski", "Haddad", "Rossi", "Dubois", "Ahmed", "Berg")
DOMAINS = ("example.com", "mail.net", "post.org", "inbox.io")
ADJECTIVES = ("Red", "Blue", "Green", "Small", "Large", "Classic", "Modern", "Vintage", "Golden",
              "Wooden", "Steel", "Compact")
ORDINALS = ("first", "second", "third")


# -- the sign-up form (webform_fill, webform_fix_errors) -------------------------------------
def _signup_sample(rng: np.random.Generator) -> dict[str, Any]:
    first, last = pick(rng, FIRST_NAMES), pick(rng, LAST_NAMES)
    return {"name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@{pick(rng, DOMAINS)}",
            "age": int(rng.integers(AGE_RANGE[0], 81)), "country": pick(rng, COUNTRIES),
            "plan": pick(rng, PLANS), "newsletter": pick(rng, ("yes", "no"))}


def _signup_validate(family: str, p: Params) -> None:
    name = p["name"]
    if not name.strip() or name != name.strip() or not (name.isascii() and name.isprintable()) \
            or len(name) > 40:
        raise param_error(family, "name", "a non-empty printable ASCII name of at most 40 "
                          "characters without leading or trailing spaces", name)
    if not p["email"].isascii() or not email_valid(p["email"]):
        raise param_error(family, "email", "a valid ASCII email address like name@example.com",
                          p["email"])
    lo, hi = AGE_RANGE
    if isinstance(p["age"], bool) or not lo <= p["age"] <= hi:
        raise param_error(family, "age", f"an int from {lo} to {hi}", p["age"])
    for key, allowed in (("country", COUNTRIES), ("plan", PLANS), ("newsletter", ("yes", "no"))):
        if p[key] not in allowed:
            raise param_error(family, key, f"one of {list(allowed)}", p[key])


def expected_submission(p: Params) -> dict[str, Any]:
    """The record a correct sign-up with parameters ``p`` leaves in ``desk.state``."""
    return {"form": "signup", "name": p["name"], "email": p["email"], "age": p["age"],
            "country": p["country"], "plan": p["plan"], "newsletter": p["newsletter"] == "yes"}


def _signup_check(desk: Desktop, p: Params) -> bool:
    return desk.state.get("submissions") == [expected_submission(p)]


def _goto(ops: Ops, app: BrowserApp, url: str) -> Action:
    """Type ``url`` into the address bar, then press Enter there."""
    return (ops.fill(app.main, (app.address, url))
            or ops.focus_widget(app.main, app.address) or Hotkey(("enter",)))


def signup_plan(ops: Ops, p: Params) -> Action | None:
    """Open the sign-up page, make every field match ``p``, accept the terms, submit; None
    once a thanks page for ``p["name"]`` is shown."""
    for app in ops.desk.apps_of(BrowserApp):
        rec = app.last_submission
        if app.page == "thanks" and rec is not None and rec["name"] == p["name"]:
            return None
    app, act = ops.app_or_launch(BrowserApp)
    if app is None:
        return act
    win, form = app.main, app.form
    if form is None:
        signup = next((lk for lk in app.links if lk.name == "Create an account"), None)
        if signup is not None:
            return ops.click_widget(win, signup)
        return _goto(ops, app, SIGNUP_URL)
    act = ops.fill(win, (form.fields["name"], p["name"]), (form.fields["email"], p["email"]),
                   (form.fields["age"], str(p["age"])))
    if act is not None:
        return act
    dd = form.country
    if dd.selected != p["country"]:
        if dd.open:
            return ops.click_rect(win, dd.item_rect(dd.options.index(p["country"])))
        return ops.click_widget(win, dd)
    for radio in form.plans:
        if radio.name == p["plan"] and not radio.checked:
            return ops.click_widget(win, radio)
    if form.newsletter.checked != (p["newsletter"] == "yes"):
        return ops.click_widget(win, form.newsletter)
    if not form.terms.checked:
        return ops.click_widget(win, form.terms)
    return ops.click_widget(win, form.submit)


def _fill_setup(desk: Desktop, p: Params) -> None:
    desk.state["submissions"] = []


def _signup_vocab(p: Params) -> tuple[str, ...]:
    return (p["name"], p["email"], str(p["age"]))


WEBFORM_FILL = TaskFamily(
    name="webform_fill",
    description="Open the Browser, go to the sign-up form, fill it with given values, submit.",
    app="browser",
    params={"name": str, "email": str, "age": int, "country": str, "plan": str,
            "newsletter": str},
    sample_params=_signup_sample,
    templates=(
        'Open the Browser and sign up on forms.local as "{name}" with email {email}, age {age}, '
        "country {country}, the {plan} plan and newsletter: {newsletter}. Accept the terms and "
        "submit the form.",
        "Use the Browser to create an account at http://forms.local/signup: full name {name}, "
        "email {email}, age {age}, country {country}, plan {plan}, newsletter {newsletter}; "
        "agree to the terms and submit.",
        "Register {name} ({email}, {age} years old, from {country}) on the forms.local sign-up "
        "page with the {plan} plan. Newsletter: {newsletter}. Accept the terms, then submit.",
    ),
    setup=_fill_setup,
    check=_signup_check,
    vocabulary_fn=_signup_vocab,
    plan=signup_plan,
    min_steps=11,
    validate=lambda p: _signup_validate("webform_fill", p),
)


# -- webform_fix_errors ----------------------------------------------------------------------
def _bad_email(rng: np.random.Generator, email: str) -> str:
    local, _, domain = email.partition("@")
    forms = (f"{local}@{domain.rpartition('.')[0]}", f"{local}.{domain}",
             f"{local.replace('.', ' ')}@{domain}", f"{local}@@{domain}")
    return pick(rng, forms)


def _fix_sample(rng: np.random.Generator) -> dict[str, Any]:
    p = _signup_sample(rng)
    p["bad_email"] = _bad_email(rng, p["email"])
    bad_ages = ("12", "7", "150", "240", "abc", "-5")
    p["bad_age"] = pick(rng, bad_ages) if rng.random() < 0.6 else str(p["age"])
    return p


def _fix_validate(p: Params) -> None:
    _signup_validate("webform_fix_errors", p)
    if not p["bad_email"].isascii() or email_valid(p["bad_email"]):
        raise param_error("webform_fix_errors", "bad_email", "an invalid ASCII email address",
                          p["bad_email"])
    bad_age, (lo, hi) = p["bad_age"], AGE_RANGE
    valid = {"name": "x", "email": "x@y.io", "country": "x", "terms": True}
    rejected = "age" in validate_signup({**valid, "age": bad_age})
    if not bad_age.isascii() or not (bad_age == str(p["age"]) or rejected):
        raise param_error("webform_fix_errors", "bad_age",
                          f"str(age) or an ASCII age the form rejects (outside {lo}..{hi})",
                          bad_age)


def _fix_setup(desk: Desktop, p: Params) -> None:
    desk.state["submissions"] = []
    app = BrowserApp(desk, SIGNUP_URL)
    form = app.form
    assert form is not None, "set-up runs without loading screens"
    for key, text in (("name", p["name"]), ("email", p["bad_email"]), ("age", p["bad_age"])):
        form.fields[key].set_text(text)
    form.country.select(form.country.options.index(p["country"]))
    next(r for r in form.plans if r.name == p["plan"]).set_checked(True)
    form.newsletter.set_checked(p["newsletter"] == "yes")
    app.submit()  # rejected: the page opens showing its error messages


WEBFORM_FIX_ERRORS = TaskFamily(
    name="webform_fix_errors",
    description="A sign-up form was rejected (bad email, maybe bad age, terms unchecked); fix "
                "it and submit.",
    app="browser",
    params={**WEBFORM_FILL.params, "bad_email": str, "bad_age": str},
    sample_params=_fix_sample,
    templates=(
        "The sign-up form in the Browser was rejected. Fix it: the email is {email} and the age "
        "is {age}. Accept the terms and submit it again.",
        "Correct the errors on the forms.local sign-up page (email {email}, age {age}), tick "
        "'I agree to the terms' and submit.",
        "Fix the invalid fields of the open sign-up form so that it uses {email} and age {age}, "
        "agree to the terms, then resubmit.",
    ),
    setup=_fix_setup,
    check=_signup_check,
    vocabulary_fn=lambda p: (p["email"], str(p["age"])),
    plan=signup_plan,
    min_steps=4,
    validate=_fix_validate,
)


# -- webform_search --------------------------------------------------------------------------
def _search_sample(rng: np.random.Generator) -> dict[str, Any]:
    return {"query": pick(rng, WORDS), "nth": pick(rng, ORDINALS)}


def _search_validate(p: Params) -> None:
    q = p["query"]
    if not q.isascii() or not q.isalpha() or not q.islower():
        raise param_error("webform_search", "query", "one lower-case ASCII word", q)
    if p["nth"] not in ORDINALS:
        raise param_error("webform_search", "nth", f"one of {list(ORDINALS)}", p["nth"])


def _search_setup(desk: Desktop, p: Params) -> None:
    rng = desk.rng
    hits = int(rng.integers(3, 6))
    adjs = [ADJECTIVES[int(i)] for i in rng.permutation(len(ADJECTIVES))]
    others = [w for w in WORDS if w != p["query"]]
    items = [f"{a} {p['query']}" for a in adjs[:hits]]
    items += [f"{adjs[hits + i % 4]} {pick(rng, others)}" for i in range(8)]
    order = rng.permutation(len(items))
    desk.state["catalog"] = list(dict.fromkeys(items[int(i)] for i in order))


def _search_target(desk: Desktop, p: Params) -> str | None:
    found = search_catalog(desk.state.get("catalog", ()), p["query"])
    n = ORDINALS.index(p["nth"])
    return item_url(found[n]) if n < len(found) else None


def _search_check(desk: Desktop, p: Params) -> bool:
    target = _search_target(desk, p)
    return target is not None and any(
        a.page == "item" and a.url == target for a in desk.apps_of(BrowserApp))


def _search_plan(ops: Ops, p: Params) -> Action | None:
    app, act = ops.app_or_launch(BrowserApp)
    if app is None:
        return act
    win, n = app.main, ORDINALS.index(p["nth"])
    if app.page == "item":
        results = search_catalog(app.catalog, p["query"])
        if n < len(results) and app.url == item_url(results[n]):
            return None
    page = app.search
    if page is None:
        link = next((lk for lk in app.links if lk.name == "Search the catalog"), None)
        return ops.click_widget(win, link) if link is not None else _goto(ops, app, SEARCH_URL)
    if page.query == p["query"]:
        if n >= len(page.results):
            return None  # visibly nothing to open
        return ops.click_widget(win, page.results[n])
    return ops.fill(win, (page.field, p["query"])) or ops.click_widget(win, page.button)


WEBFORM_SEARCH = TaskFamily(
    name="webform_search",
    description="Search the forms.local catalog for a word and open the n-th result.",
    app="browser",
    params={"query": str, "nth": str},
    sample_params=_search_sample,
    templates=(
        "In the Browser, search the forms.local catalog for '{query}' and open the {nth} "
        "result.",
        "Open the Browser, go to the catalog search, look up {query} and click the {nth} "
        "result in the list.",
        "Find items matching '{query}' on forms.local and open the page of the {nth} one.",
    ),
    setup=_search_setup,
    check=_search_check,
    vocabulary_fn=lambda p: (p["query"],),
    plan=_search_plan,
    min_steps=5,
    validate=_search_validate,
)

APPS: tuple[AppSpec, ...] = (APP,)
FAMILIES: tuple[TaskFamily, ...] = (WEBFORM_FILL, WEBFORM_FIX_ERRORS, WEBFORM_SEARCH)
