"""The web-form app (browser on forms.local) and its task families, through real actions."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from PIL import Image

from cua_rl.actions import Click, Done, Fail, Hotkey, Type
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.simdesk import (
    FAMILIES,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskExpert,
    make_task,
    run_expert,
    webform,
)
from cua_rl.envs.backends.simdesk.render import intersect
from cua_rl.envs.backends.simdesk.webform import (
    CATALOG,
    HOME_URL,
    SEARCH_URL,
    SIGNUP_URL,
    THANKS_URL,
    BrowserApp,
    SignupForm,
    item_url,
    normalize_url,
    search_catalog,
    validate_signup,
)
from cua_rl.envs.backends.simdesk.webform_tasks import expected_submission
from cua_rl.errors import TaskSpecError

from .helpers import (
    CLEAN,
    NOISY,
    assert_expert_succeeds,
    assert_incremental_equals_full,
    assert_preview,
    assert_replay_identical,
    bugged,
    launch,
)

OURS = ("webform_fill", "webform_fix_errors", "webform_search")


def _launch(b: SimDeskBackend) -> BrowserApp:
    """Reset to a webform_fill task and double-click the Browser icon."""
    b.reset(make_task("webform_fill", 0))
    obs = launch(b, "browser")
    assert b.desk is not None
    assert obs.url == HOME_URL and obs.title == "Forms Portal - Browser"
    (app,) = b.desk.apps_of(BrowserApp)
    return app


def _click(b: SimDeskBackend, app: BrowserApp, widget: object) -> str:
    obs = b.step(Click(*app.main.center_of(widget.rect)))  # type: ignore[attr-defined]
    return obs.a11y or ""


def _signup(b: SimDeskBackend) -> tuple[BrowserApp, SignupForm]:
    app = _launch(b)
    link = next(lk for lk in app.links if lk.name == "Create an account")
    _click(b, app, link)
    assert app.form is not None and b.observe().url == SIGNUP_URL
    return app, app.form


def test_links_url_reported_only_when_focused():
    b = SimDeskBackend(CLEAN)
    app = _launch(b)
    a11y = b.observe().a11y or ""
    assert 'link "Create an account"' in a11y
    assert 'textfield "Address" value="http://forms.local/"' in a11y
    assert 'document "Forms Portal"' in a11y and 'button "Back" [disabled]' in a11y
    _click(b, app, app.links[1])
    assert (app.page, app.url, b.observe().title) == ("search", SEARCH_URL, "Search - Browser")
    obs = b.step(Click(b.config.width - 5, 5))  # the wallpaper takes the focus
    assert obs.title == "Desktop" and obs.url is None
    obs = b.step(Click(app.main.x + 5, app.main.y + 5))
    assert obs.url == SEARCH_URL
    b.reset(make_task("editor_type", 0))
    assert b.observe().url is None


def test_typing_tab_order_dropdown_radio_checkbox():
    b = SimDeskBackend(CLEAN)
    app, form = _signup(b)
    win = app.main
    assert win.focus is form.fields["name"]  # the page focuses its first field
    b.step(Type("Ana Silva\tana.silva@example.com\t34\t"))
    assert [form.fields[k].text for k in ("name", "email", "age")] == [
        "Ana Silva", "ana.silva@example.com", "34"]
    assert win.focus is form.country
    obs = b.step(Hotkey(("down",)))
    assert form.country.selected == "Canada"
    assert 'combobox "Country" value="Canada"' in (obs.a11y or "")
    _click(b, app, form.country)
    assert form.country.open
    b.step(Click(*win.center_of(form.country.item_rect(5))))
    assert form.country.selected == "Japan" and not form.country.open
    a11y = _click(b, app, form.plans[2])
    assert form.plan == "Team" and 'radio "Team" [focused,checked]' in a11y
    assert 'radio "Free" @' in a11y  # unchecked now
    b.step(Hotkey(("tab",)))  # Team -> newsletter checkbox
    b.step(Hotkey(("space",)))
    assert form.newsletter.checked and win.focus is form.newsletter
    a11y = _click(b, app, form.terms)
    assert form.terms.checked and 'checkbox "I agree to the terms" [focused,checked]' in a11y
    order = [w.name for w in win.focusables()]
    assert order[:3] == ["Back", "Reload", "Address"] and order[-1] == "Submit"
    assert order.index("Full name") < order.index("Email") < order.index("Age") < order.index(
        "Country") < order.index("Free") < order.index("I agree to the terms")


def test_submit_errors_then_fix_then_enter_submits():
    b = SimDeskBackend(CLEAN)
    app, form = _signup(b)
    a11y = _click(b, app, form.submit)
    assert 'alert "Error summary" value="Please fix 5 errors"' in a11y
    assert {k for k, e in form.errors.items() if e.visible} == {"name", "email", "age",
                                                                  "country", "terms"}
    assert app.main.focus is form.fields["name"] and b.desk is not None
    b.step(Type("Ana Silva\tana.silva@example\t12"))
    a11y = _click(b, app, form.submit)
    assert 'value="Please fix 4 errors"' in a11y and not form.errors["name"].visible
    assert 'alert "Email error" value="Enter a valid email like name@example.com"' in a11y
    assert form.errors["age"].text == "Age must be a whole number from 18 to 99"
    assert app.main.focus is form.fields["email"] and b.desk.state["submissions"] == []
    b.step(Hotkey(("end",)))
    b.step(Type(".com\t"))
    b.step(Hotkey(("ctrl", "a")))
    b.step(Type("34\t"))
    b.step(Hotkey(("down",)))  # Canada
    _click(b, app, form.terms)
    a11y = _click(b, app, form.submit)
    assert 'value="Please fix 1 error"' not in a11y  # no error left: the form was sent
    obs = b.observe()
    assert obs.url == THANKS_URL and obs.title == "Thank you - Browser"
    assert 'heading "Thank you, Ana Silva!"' in (obs.a11y or "")
    assert 'label "Country" value="Country: Canada"' in (obs.a11y or "")
    assert b.desk.state["submissions"] == [{
        "form": "signup", "name": "Ana Silva", "email": "ana.silva@example.com", "age": 34,
        "country": "Canada", "plan": "Free", "newsletter": False}]
    # Back: the form page again, empty; Enter in a field submits (the default button)
    obs = b.step(Hotkey(("alt", "left")))
    assert obs.url == SIGNUP_URL and app.form is not None and app.form.fields["name"].text == ""
    b.step(Type("Bo Berg\tbo@mail.net\t50\t"))
    b.step(Hotkey(("down",)))
    _click(b, app, app.form.terms)
    _click(b, app, app.form.fields["age"])
    obs = b.step(Hotkey(("enter",)))
    assert obs.url == THANKS_URL and len(b.desk.state["submissions"]) == 2


def test_address_bar_reload_and_missing_pages():
    b = SimDeskBackend(CLEAN)
    app = _launch(b)
    b.step(Hotkey(("ctrl", "l")))
    assert app.main.focus is app.address and app.address.all_selected()
    obs = b.step(Type("forms.local/search?q=lantern\n"))
    assert obs.url == f"{SEARCH_URL}?q=lantern" and app.search is not None
    assert [lk.name for lk in app.search.results] == ["Silver lantern", "Brass lantern"]
    assert '"2 results for \\"lantern\\""' in (obs.a11y or "")
    a11y = _click(b, app, app.search.results[1])
    assert app.url == item_url("Brass lantern") == "http://forms.local/item/brass-lantern"
    assert 'heading "Brass lantern"' in a11y and app.page == "item"
    b.step(Hotkey(("ctrl", "l")))
    obs = b.step(Type("http://forms.local/nowhere\n"))
    assert obs.title == "Page not found - Browser" and app.page == "missing"
    b.step(Hotkey(("ctrl", "l")))
    obs = b.step(Type("example.org\n"))
    assert obs.title == "This site can't be reached - Browser" and obs.url == "http://example.org/"
    _click(b, app, app.back)
    assert app.page == "missing" and b.step(Hotkey(("f5",))).url == "http://forms.local/nowhere"
    # the search box: type a query, press Enter
    b.step(Hotkey(("ctrl", "l")))
    b.step(Type(SEARCH_URL + "\n"))
    assert app.search is not None and app.main.focus is app.search.field
    obs = b.step(Type("kettle\n"))
    assert obs.url == f"{SEARCH_URL}?q=kettle" and len(app.search.results) == 2


def test_pure_helpers_match_hand_computed_values():
    assert doctest.testmod(webform).failed == 0
    ok = {"name": "A B", "email": "a.b@c.io", "age": "18", "country": "Spain", "terms": True}
    assert validate_signup(ok) == {}
    assert set(validate_signup({**ok, "age": "100"})) == {"age"}
    assert set(validate_signup({**ok, "age": "3x", "email": "a@b"})) == {"age", "email"}
    assert validate_signup(ok, frozenset({"validation_wrong"})) == {
        "email": "Enter a valid email like name@example.com"}
    assert validate_signup({**ok, "email": "ab@c.io"}, frozenset({"validation_wrong"})) == {}
    assert normalize_url(" HTTP://Forms.Local ") == "http://forms.local/"
    assert search_catalog(CATALOG, "LANTERN") == ["Silver lantern", "Brass lantern"]
    assert search_catalog(CATALOG, "") == [] and search_catalog(CATALOG, "kettle small") == [
        "Small kettle"]


@pytest.mark.parametrize("cfg", [CLEAN, NOISY], ids=["clean", "noisy"])
@pytest.mark.parametrize("family", ["webform_fill", "webform_fix_errors"])
def test_expert_submits_exactly_the_expected_record(family: str, cfg: SimDeskConfig):
    def submitted(b: SimDeskBackend, task: Task, obs: list[Observation]) -> None:
        assert b.desk is not None and obs[-1].url == THANKS_URL
        assert b.desk.state["submissions"] == [expected_submission(task.config["params"])]

    assert_expert_succeeds(cfg, family, then=submitted)


def test_min_steps_is_reached_by_the_clean_expert():
    b = SimDeskBackend(CLEAN)
    for family in OURS:
        counts = [len(run_expert(b, make_task(family, s))[0]) - 1 for s in range(10)]
        assert min(counts) == FAMILIES[family].min_steps, (family, counts)


def test_checker_wants_exactly_the_one_right_submission():
    b = SimDeskBackend(CLEAN)
    task = make_task("webform_fill", 3)
    assert run_expert(b, task)[2] and b.desk is not None
    subs = b.desk.state["submissions"]
    subs.append(dict(subs[0]))
    assert b.ground_truth(task) == 0.0
    subs[:] = [{**subs[0], "age": subs[0]["age"] + 1}]
    assert b.ground_truth(task) == 0.0
    fix = make_task("webform_fix_errors", 2)
    b.reset(fix)
    assert b.desk is not None and b.desk.state["submissions"] == []
    (app,) = b.desk.apps_of(BrowserApp)
    assert app.form is not None and app.form.banner.visible and b.ground_truth(fix) == 0.0
    assert sum(e.visible for e in app.form.errors.values()) >= 2


@pytest.mark.parametrize(
    ("bug", "family"),
    [("button_disabled", "webform_fill"), ("button_disabled", "webform_fix_errors"),
     ("save_fails", "webform_fill"), ("validation_wrong", "webform_fill"),
     ("validation_wrong", "webform_fix_errors"), ("search_empty", "webform_search")],
)
def test_injected_bug_makes_the_expert_fail(bug: str, family: str):
    b = SimDeskBackend(bugged(bug))
    for seed in range(4):
        actions, obs, ok = run_expert(b, make_task(family, seed))
        assert not ok and isinstance(actions[-1], (Done, Fail)), (bug, family, seed)
        assert b.desk is not None
        if bug == "save_fails":  # looks like success: the expert says Done
            assert isinstance(actions[-1], Done) and obs[-1].url == THANKS_URL
            assert b.desk.state["submissions"] == []
        if bug == "validation_wrong":
            (app,) = b.desk.apps_of(BrowserApp)
            assert app.form is not None and app.form.errors["email"].visible
    assert run_expert(b, make_task("webform_search" if bug != "search_empty" else
                                   "webform_fill", 0))[2]


def test_same_seed_and_actions_give_identical_observations():
    assert_replay_identical(NOISY, make_task("webform_fill", 5), 10, mistakes=0.2,
                            hesitation=0.2, seed=1)


@pytest.mark.parametrize("family", OURS)
def test_incremental_frame_equals_full_render_every_step(family: str):
    for seed in (1, 2):
        assert_incremental_equals_full(SimDeskBackend(NOISY), make_task(family, seed))


@pytest.mark.parametrize("size", [(640, 400), (1280, 720)])
def test_form_fits_inside_the_page(size: tuple[int, int]):
    for seed in range(8):
        b = SimDeskBackend(SimDeskConfig(width=size[0], height=size[1], jitter=20,
                                         theme_jitter=True))
        b.reset(make_task("webform_fix_errors", seed))
        assert b.desk is not None
        (app,) = b.desk.apps_of(BrowserApp)
        for i, w in enumerate(app.main.widgets):
            inside = app.page_rect if i >= 4 else (0, 0, *app.main.size)  # 4: the toolbar
            assert not w.visible or intersect(w.rect, inside) == w.rect, (seed, w.name, w.rect)


@pytest.mark.parametrize(
    ("family", "params", "match"),
    [("webform_fill", {"name": ""}, "param 'name' must be a non-empty"),
     ("webform_fill", {"name": "Ana "}, "without leading or trailing spaces, got 'Ana '"),
     ("webform_fill", {"email": "a@b"}, "param 'email' must be a valid"),
     ("webform_fill", {"age": 17}, "param 'age' must be an int from 18 to 99, got 17"),
     ("webform_fill", {"age": True}, "param 'age' must be an int from 18 to 99, got True"),
     ("webform_fill", {"age": "30"}, "param 'age' must be int, got '30'"),
     ("webform_fill", {"country": "Narnia"}, "param 'country' must be one of"),
     ("webform_fill", {"plan": "Gold"}, "param 'plan' must be one of"),
     ("webform_fill", {"newsletter": "maybe"}, "param 'newsletter' must be one of"),
     ("webform_fix_errors", {"bad_email": "ok.ok@example.com"}, "param 'bad_email' must be an"),
     ("webform_fix_errors", {"bad_age": "99"}, "param 'bad_age' must be str"),
     ("webform_fix_errors", {"bad_age": " 40"}, "the form rejects .*, got ' 40'"),
     ("webform_search", {"query": "two words"}, "param 'query' must be one lower-case"),
     ("webform_search", {"nth": "fourth"}, "param 'nth' must be one of"),
     ("webform_search", {"nth": None}, "param 'nth' must be str, got None")],
)
def test_bad_params_raise_task_spec_error_naming_the_field(family: str, params: dict[str, object],
                                                           match: str):
    good = make_task(family, 0).config["params"]
    with pytest.raises(TaskSpecError, match=match):
        make_task(family, 0, params={**good, **params})
    with pytest.raises(TaskSpecError, match=r"missing param 'query'"):
        make_task("webform_search", 0, params={"nth": "first"})


def test_preview_png_mid_task(tmp_path: Path):
    for size in ((1280, 720), (640, 400)):
        b = SimDeskBackend(SimDeskConfig(width=size[0], height=size[1]))
        task = make_task("webform_fix_errors", 1)
        obs = b.reset(task)
        expert = SimDeskExpert(b, task)
        for _ in range(2):
            obs = b.step(expert.next_action())
        name = "" if size == (1280, 720) else "_640"
        Image.fromarray(obs.screenshot).save(f"/tmp/webform_app_preview{name}.png")
        assert_preview(obs.screenshot, tmp_path / "preview.png", size)
        assert obs.url == SIGNUP_URL
        # the red error text and banner are on screen
        red = (obs.screenshot[..., 0] > 150) & (obs.screenshot[..., 1] < 80)
        assert red.sum() > 100
