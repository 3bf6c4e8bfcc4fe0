"""Writes the local OSWorld-format task suite: ``examples/<domain>/<uuid>.json`` and ``files/``
(with its ``mirror.json`` manifest: each download URL -> its file and SHA-256).

Run it with a Python that has openpyxl and python-docx (the isolated evaluator venv has both):
``python scripts/build_osworld_local.py``. The task ids are uuid5 of the task names, so a rebuild
keeps them. The xlsx/docx inputs and gold files are written here; the gold files hold what a
correct solution leaves (values, not formulas: OSWorld's compare_table reads cached values).
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import uuid
from pathlib import Path

import docx
import openpyxl

ROOT = Path(__file__).resolve().parents[1] / "cua_rl/envs/backends/osworld/task_sets/local"
FILES = ROOT / "files"
EXAMPLES = ROOT / "examples"
URL = "https://cua-rl.invalid/osworld_local/"
NAMESPACE = uuid.UUID("5b0c3f0e-7d2a-4f1e-9a53-0c1d2e3f4a5b")
HOME = "/home/user"
XCU = "registrymodifications.xcu"
LO_PROFILE = f"{HOME}/.config/libreoffice/4/user/{XCU}"
SAVE = ["python", "-c", "import pyautogui; import time; pyautogui.hotkey('ctrl', 's'); "
        "time.sleep(0.5);"]


PENDING: list = []
"""File writes, run by main() (importing this module writes nothing)."""


def later(write):  # noqa: ANN001, ANN201 - a decorator of file writers
    def deferred(*args: object, **kwargs: object) -> None:
        PENDING.append(lambda: write(*args, **kwargs))
    return deferred


@later
def xlsx(name: str, rows: list[list[object]], sheet: str = "Sheet1") -> None:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = sheet
    for row in rows:
        ws.append(row)
    wb.save(FILES / name)


@later
def docx_file(name: str, paragraphs: list[str]) -> None:
    d = docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    d.save(str(FILES / name))


@later
def text(name: str, content: str) -> None:
    (FILES / name).write_text(content, encoding="utf-8")


def download(*pairs: tuple[str, str]) -> dict:
    return {"type": "download", "parameters": {"files": [
        {"url": URL + name, "path": path} for name, path in pairs]}}


def wait_window(title: str) -> dict:
    """Poll until a window whose title holds ``title`` is mapped (OSWorld's ``until``)."""
    return {"type": "execute", "parameters": {
        "command": ["bash", "-c", f"wmctrl -l | grep -qF -- '{title}'"],
        "until": {"returncode": 0}}}


def sleep(seconds: float) -> dict:
    return {"type": "sleep", "parameters": {"seconds": seconds}}


def launch(*command: str) -> dict:
    return {"type": "launch", "parameters": {"command": list(command)}}


def save_postconfig(window: str, strict: bool = True) -> list[dict]:
    return [{"type": "activate_window", "parameters": {"window_name": window, "strict": strict}},
            sleep(0.5), {"type": "execute", "parameters": {"command": SAVE}}, sleep(0.5)]


def vm_file(path: str) -> dict:
    return {"type": "vm_file", "path": path, "dest": Path(path).name}


def cloud(name: str) -> dict:
    return {"type": "cloud_file", "path": URL + name, "dest": name}


def command(cmd: str) -> dict:
    return {"type": "vm_command_line", "command": cmd, "shell": True}


def rule(**rules: object) -> dict:
    return {"type": "rule", "rules": rules}


TASKS: list[dict] = []


def task(name: str, domain: str, instruction: str, config: list[dict], evaluator: dict,
         apps: list[str]) -> None:
    TASKS.append({"name": name, "domain": domain, "data": {
        "id": str(uuid.uuid5(NAMESPACE, name)), "snapshot": domain, "instruction": instruction,
        "source": "cua_rl local suite", "config": config,
        "trajectory": "trajectories/", "related_apps": apps, "evaluator": evaluator,
        "proxy": False, "fixed_ip": False, "possibility_of_env_change": "low"}})


# ---------------------------------------------------------------------------------- Calc
def calc(name: str, file: str, gold_rows: list[list[object]] | None, instruction: str,
         rows: list[list[object]], *, rules: list[dict] | None = None, gold_sheet: str = "Sheet1",
         evaluator: dict | None = None) -> None:
    src = f"{name}.xlsx"
    xlsx(src, rows)
    path = f"{HOME}/{file}"
    title = f"{file} - LibreOffice Calc"
    if evaluator is None:
        gold = f"{name}_gold.xlsx"
        xlsx(gold, gold_rows, gold_sheet)
        evaluator = {"postconfig": save_postconfig(title), "func": "compare_table",
                     "result": vm_file(path), "expected": cloud(gold),
                     "options": {"rules": rules or [
                         {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}}
    task(name, "libreoffice_calc", instruction,
         [download((XCU, LO_PROFILE), (src, path)), launch("libreoffice", "--calc", path),
          wait_window(title), sleep(1.0)], evaluator, ["libreoffice_calc"])


SALES = [["Region", "Sales"], ["North", 120], ["South", 95], ["East", 143], ["West", 78],
         ["Total", None]]
calc("calc_sum_column", "sales.xlsx", [*SALES[:5], ["Total", 436]],
     "In sales.xlsx, put the total of the Sales column (B2:B5) into cell B6.", SALES)
PRICES = [["Item", "Price"], ["Apples", 2.5], ["Bread", 3.2], ["Cheese", 7.9], ["Dates", 5.4]]
calc("calc_edit_cell", "prices.xlsx",
     [r if r[0] != "Cheese" else ["Cheese", 8.75] for r in PRICES],
     "In prices.xlsx, change the price of Cheese to 8.75.", PRICES)
STOCK = [["Item", "Count"], ["Pens", 40], ["Staples", 12], ["Folders", 25]]
calc("calc_rename_sheet", "inventory.xlsx", STOCK,
     "Rename the sheet 'Sheet1' of inventory.xlsx to 'Inventory2024'.", STOCK,
     rules=[{"type": "sheet_name"},
            {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}],
     gold_sheet="Inventory2024")
SCORES = [["Name", "Score"], ["Ava", 72], ["Ben", 91], ["Cleo", 85], ["Dan", 64], ["Eve", 99]]
calc("calc_sort_desc", "scores.xlsx",
     SCORES[:1] + sorted(SCORES[1:], key=lambda r: -r[1]),
     "Sort the rows of scores.xlsx by Score from highest to lowest, keeping the header row "
     "on top.", SCORES)
ORDERS = [["Product", "Qty", "Unit price", "Total"], ["Lamp", 2, 19.5, None],
          ["Desk", 1, 120, None], ["Chair", 4, 45, None], ["Rug", 3, 30.25, None]]
calc("calc_fill_formula", "orders.xlsx", [ORDERS[0]] + [[p, q, u, q * u] for p, q, u, _ in
                                                        ORDERS[1:]],
     "In orders.xlsx, fill the Total column (D2:D5) with Qty times Unit price for each row.",
     ORDERS)
CONTACTS = [["Name", "City"], ["Maria Lopez", "Lisbon"], ["Tom Reed", "Denver"],
            ["Priya Nair", "Pune"]]
calc("calc_append_row", "contacts.xlsx", [*CONTACTS, ["Kenji Sato", "Osaka"]],
     "Add a new row right after the last contact in contacts.xlsx: Name 'Kenji Sato', "
     "City 'Osaka'.", CONTACTS)
SUPPLIES = [["Item", "Count"], ["Toner", 6], ["Paper", 30], ["Fax paper", 2], ["Labels", 15]]
calc("calc_delete_row", "supplies.xlsx", [r for r in SUPPLIES if r[0] != "Fax paper"],
     "Delete the row of the item 'Fax paper' from supplies.xlsx so that no empty row is left.",
     SUPPLIES)
calc("calc_infeasible_excel", "budget.xlsx", None,
     "Open budget.xlsx in the Microsoft Excel desktop app and use Excel's Copilot to write a "
     "summary of the sheet.", [["Month", "Spend"], ["Jan", 800], ["Feb", 650]],
     evaluator={"func": "infeasible"})


# ---------------------------------------------------------------------------------- Writer
def writer(name: str, file: str, paragraphs: list[str], gold: list[str],
           instruction: str) -> None:
    src, gold_name = f"{name}.docx", f"{name}_gold.docx"
    docx_file(src, paragraphs)
    docx_file(gold_name, gold)
    path = f"{HOME}/Documents/{file}"
    title = f"{file} - LibreOffice Writer"
    task(name, "libreoffice_writer", instruction,
         [download((XCU, LO_PROFILE), (src, path)), launch("libreoffice", "--writer", path),
          wait_window(title), sleep(1.0)],
         {"postconfig": save_postconfig(title), "func": "compare_docx_files",
          "result": vm_file(path), "expected": cloud(gold_name)}, ["libreoffice_writer"])


TRIP = ["Trip notes", "We arrived on Monday.", "The hotel was near the harbour."]
writer("writer_append_paragraph", "trip.docx", TRIP, [*TRIP, "We left on Friday."],
       "Add a new last paragraph to trip.docx with exactly this text: We left on Friday.")
COLOUR = ["Paint guide", "Pick a colour for the walls.", "The colour of the door should match.",
          "Each colour sample costs two dollars."]
writer("writer_replace_all", "paint.docx", COLOUR, [p.replace("colour", "color") for p in COLOUR],
       "In paint.docx, replace every occurrence of the word 'colour' with 'color'.")
AGENDA = ["Agenda", "Welcome and introductions", "Budget review", "Lunch break",
          "Closing remarks"]
writer("writer_delete_paragraph", "agenda.docx", AGENDA, [p for p in AGENDA if p != "Lunch break"],
       "Delete the paragraph 'Lunch break' from agenda.docx, leaving no empty paragraph.")
MEMO = ["Sales rose in every region this quarter.", "The team will meet on Thursday."]
writer("writer_insert_title", "memo.docx", MEMO, ["Quarterly Memo", *MEMO],
       "Insert a new first paragraph 'Quarterly Memo' at the top of memo.docx, above the "
       "existing text.")


# ---------------------------------------------------------------------------------- Mousepad
def mousepad(name: str, file: str, content: str | None, instruction: str, evaluator: dict,
             extra: list[dict] | None = None) -> None:
    path = f"{HOME}/{file}"
    config = list(extra or [])
    if content is not None:
        text(f"{name}.{file.rsplit('.', 1)[1]}", content)
        config.append(download((f"{name}.{file.rsplit('.', 1)[1]}", path)))
    # Mousepad titles a file under $HOME as ``~/file``, elsewhere by its full path: match the
    # file name, which holds either way (a sandboxed desktop's HOME is /home/user, root's is not)
    config += [launch("mousepad", path), wait_window(f"{file} - Mousepad"), sleep(0.5)]
    evaluator = {"postconfig": save_postconfig(f"{file} - Mousepad", strict=False), **evaluator}
    task(name, "mousepad", instruction, config, evaluator, ["mousepad"])


text("mousepad_append_line_gold.txt", "eggs\nflour\nsugar\nbutter\n")
mousepad("mousepad_append_line", "shopping.txt", "eggs\nflour\nsugar\n",
         "Add 'butter' as a new last line of shopping.txt (after 'sugar') and save it.",
         {"func": "compare_text_file", "result": vm_file(f"{HOME}/shopping.txt"),
          "expected": cloud("mousepad_append_line_gold.txt"),
          "options": {"ignore_blanks": True}})
text("mousepad_edit_first_line_gold.txt",
     "Report 2024\nRevenue grew by 4 percent.\nCosts fell slightly.\n")
mousepad("mousepad_edit_first_line", "report.txt",
         "Report 2023\nRevenue grew by 4 percent.\nCosts fell slightly.\n",
         "Change the first line of report.txt from 'Report 2023' to 'Report 2024' and save.",
         {"func": "compare_text_file", "result": vm_file(f"{HOME}/report.txt"),
          "expected": cloud("mousepad_edit_first_line_gold.txt"),
          "options": {"ignore_blanks": True}})
text("mousepad_new_file_gold.txt", "call Ana\nfix bike\npay rent\n")
text("mousepad_new_file_items.txt", "Errands for this week: call Ana, fix bike, pay rent.\n")
mousepad("mousepad_new_file", "todo.txt", None,
         "The editor has a new file todo.txt open. Write the three errands listed in "
         "~/errands.txt into it, one per line (call Ana, fix bike, pay rent), and save it.",
         {"func": "diff_text_file", "result": vm_file(f"{HOME}/todo.txt"),
          "expected": cloud("mousepad_new_file_gold.txt")},
         extra=[download(("mousepad_new_file_items.txt", f"{HOME}/errands.txt"))])
mousepad("mousepad_json_setting", "settings.json",
         '{\n  "theme": "light",\n  "font_size": 12,\n  "autosave": true\n}\n',
         "In settings.json, change the value of \"theme\" from \"light\" to \"dark\" (keep the "
         "file valid JSON) and save.",
         {"func": "check_json", "result": vm_file(f"{HOME}/settings.json"),
          "expected": rule(expect=[
              {"key": ["theme"], "method": "eq", "ref": "dark"},
              {"key": ["font_size"], "method": "eq", "ref": 12},
              {"key": ["autosave"], "method": "eq", "ref": True}])})
text("mousepad_fix_csv_gold.csv", "city,country\nLisbon,Portugal\nBoston,USA\nOsaka,Japan\n")
mousepad("mousepad_fix_csv", "cities.csv",
         "city,country\nLisbon,Portugal\nBostn,USA\nOsaka,Japan\n",
         "Fix the typo 'Bostn' in cities.csv: it should read 'Boston'. Save the file.",
         {"func": "compare_csv", "result": vm_file(f"{HOME}/cities.csv"),
          "expected": cloud("mousepad_fix_csv_gold.csv")})


# ---------------------------------------------------------------------------------- Terminal
def terminal(name: str, instruction: str, files: list[tuple[str, str]], evaluator: dict) -> None:
    config = [download(*files)] if files else []
    config += [launch("xterm", "-T", "Terminal", "-geometry", "120x32+0+0", "-e", "bash", "-c",
                      f"cd {HOME} && exec bash"), wait_window("Terminal"), sleep(0.5)]
    task(name, "terminal", instruction, config, evaluator, ["terminal"])


text("terminal_mkdir_readme.txt", "Projects live here.\n")
terminal("terminal_mkdir", "Create the folder ~/projects/alpha (the folder ~/projects exists).",
         [("terminal_mkdir_readme.txt", f"{HOME}/projects/README.txt")],
         {"func": "exact_match",
          "result": command(f"[ -d {HOME}/projects/alpha ] && echo yes || echo no"),
          "expected": rule(expected="yes\n")})
text("terminal_rename_report.txt", "Final figures for March.\n")
terminal("terminal_rename", "Rename the file ~/docs/report_old.txt to report_final.txt "
         "(in the same folder).", [("terminal_rename_report.txt", f"{HOME}/docs/report_old.txt")],
         {"func": "check_include_exclude", "result": command(f"ls {HOME}/docs"),
          "expected": rule(include=["report_final.txt"], exclude=["report_old.txt"])})
text("terminal_chmod_run.sh", "#!/bin/sh\necho running\n")
terminal("terminal_chmod", "Set the permissions of ~/run.sh to rwxr-x--- (octal 750).",
         [("terminal_chmod_run.sh", f"{HOME}/run.sh")],
         {"func": "check_direct_json_object",
          "result": command(f"printf '{{\"mode\": \"%s\"}}' \"$(stat -c %a {HOME}/run.sh)\""),
          "expected": rule(expected={"mode": "750"})})
text("terminal_count_errors.log",
     "2024-05-01 INFO start\n2024-05-01 ERROR disk full\n2024-05-01 INFO retry\n"
     "2024-05-02 ERROR timeout\n2024-05-02 WARN slow reply (error budget 10%)\n"
     "2024-05-02 INFO done\n2024-05-03 ERROR lost connection\n")
terminal("terminal_count_errors",
         "Count the lines of ~/app.log that contain the word ERROR (in capitals) and write "
         "just that number into ~/error_count.txt.",
         [("terminal_count_errors.log", f"{HOME}/app.log")],
         {"func": "match_in_list", "result": command(f"cat {HOME}/error_count.txt"),
          "expected": rule(expected=["3\n", "3"])})


@later
def _tarball() -> None:
    with tarfile.open(FILES / "terminal_extract_backup.tar.gz", "w:gz") as tar:
        for member, body in (("data/a.txt", b"alpha\n"), ("data/b.txt", b"beta\n")):
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(body), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(body))


_tarball()
terminal("terminal_extract", "Extract the archive ~/backup.tar.gz into a new folder ~/restore.",
         [("terminal_extract_backup.tar.gz", f"{HOME}/backup.tar.gz")],
         {"postconfig": [{"type": "execute", "parameters": {
             "command": ["bash", "-c", f"ls -R {HOME}/restore 2>&1"], "stdout": "restore.ls"}}],
          "func": "check_list", "result": {"type": "cache_file", "path": "restore.ls"},
          "expected": rule(expect=[r"^a\.txt$", r"^b\.txt$"],
                           unexpect=["No such file or directory"])})
text("terminal_remove_secret.txt", "password=hunter2\n")
text("terminal_remove_keep.txt", "keep me\n")
terminal("terminal_remove_file", "Delete the file ~/tmp/secret.txt (and nothing else).",
         [("terminal_remove_secret.txt", f"{HOME}/tmp/secret.txt"),
          ("terminal_remove_keep.txt", f"{HOME}/tmp/keep.txt")],
         {"func": ["check_include_exclude", "exact_match"], "conj": "and",
          "result": [{"type": "vm_command_error", "command": f"ls {HOME}/tmp/secret.txt",
                      "shell": True}, command(f"ls {HOME}/tmp")],
          "expected": [rule(include=["No such file or directory"]), rule(expected="keep.txt\n")]})
text("terminal_write_greeting_hint.txt", "Greeting: Hello from cua\n")
terminal("terminal_write_greeting",
         "Create the file ~/greeting.txt holding the single line: Hello from cua",
         [("terminal_write_greeting_hint.txt", f"{HOME}/hint.txt")],
         {"func": "fuzzy_match", "result": command(f"cat {HOME}/greeting.txt 2>/dev/null"),
          "expected": rule(expected="Hello from cua\n")})
terminal("terminal_infeasible_kernel",
         "Upgrade this machine's Linux kernel to version 9.9 with apt and reboot into it.",
         [("terminal_mkdir_readme.txt", f"{HOME}/README.txt")], {"func": "infeasible"})


# ---------------------------------------------------------------------------------- Files
def files(name: str, instruction: str, docs: list[tuple[str, str]], evaluator: dict) -> None:
    config = [download(*[(n, f"{HOME}/Documents/{p}") for n, p in docs]),
              launch("pcmanfm", f"{HOME}/Documents"), wait_window("Documents"), sleep(0.5)]
    task(name, "files", instruction, config, evaluator, ["pcmanfm"])


text("files_note.txt", "note\n")
text("files_plan.txt", "plan\n")
files("files_new_folder", "In the file manager, create a new folder named 'Invoices' inside "
      "Documents.", [("files_note.txt", "note.txt")],
      {"func": "is_in_list", "result": command(f"ls -p {HOME}/Documents"),
       "expected": rule(expected="Invoices/")})
files("files_rename", "Rename draft.txt in Documents to final.txt using the file manager.",
      [("files_note.txt", "draft.txt"), ("files_plan.txt", "plan.txt")],
      {"func": "check_include_exclude", "result": command(f"ls {HOME}/Documents"),
       "expected": rule(include=["final.txt", "plan.txt"], exclude=["draft.txt"])})
later(shutil.copy)(FILES / "calc_sum_column.xlsx", FILES / "files_budget.xlsx")
files("files_copy", "Copy budget.xlsx from Documents into the folder Documents/Archive, keeping "
      "the original where it is.",
      [("files_budget.xlsx", "budget.xlsx"), ("files_note.txt", "Archive/readme.txt")],
      {"func": "exact_match",
       "result": command(f"[ -f {HOME}/Documents/Archive/budget.xlsx ] && "
                         f"[ -f {HOME}/Documents/budget.xlsx ] && echo both || echo missing"),
       "expected": rule(expected="both\n")})
files("files_delete", "Delete the file old_notes.txt from Documents (the trash is fine).",
      [("files_note.txt", "old_notes.txt"), ("files_plan.txt", "notes.txt")],
      {"func": "check_include_exclude",
       "result": command(f"ls {HOME}/Documents"),
       "expected": rule(include=["notes.txt"], exclude=["old_notes.txt"])})


def main() -> None:
    FILES.mkdir(exist_ok=True)
    for write in PENDING:
        write()
    if EXAMPLES.exists():
        shutil.rmtree(EXAMPLES)
    for t in TASKS:
        folder = EXAMPLES / t["domain"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{t['data']['id']}.json").write_text(
            json.dumps(t["data"], indent=2) + "\n", encoding="utf-8")
    from cua_rl.envs.backends.vm.mirror import MANIFEST, match_by_name, task_file_urls, write_manifest

    found, missing = match_by_name(FILES, task_file_urls([EXAMPLES]))
    if missing:
        raise SystemExit(f"files/ lacks the downloads of {sorted(missing)}")
    write_manifest(FILES, found)
    names = {t["name"]: {"id": t["data"]["id"], "domain": t["domain"]} for t in TASKS}
    (ROOT / "index.json").write_text(json.dumps(names, indent=2) + "\n", encoding="utf-8")
    print(f"{len(TASKS)} tasks, {len(found)} files listed in files/{MANIFEST}")


if __name__ == "__main__":
    main()
