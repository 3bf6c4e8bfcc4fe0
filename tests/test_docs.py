"""The README and the documentation site (docs/, mkdocs.yml) are true as written.

Four checks:

1. **The site builds strictly**: ``mkdocs build --strict`` into a temporary folder; a broken link
   or anchor, a page missing from the navigation, an API reference (``::: module``) that does not
   resolve or a docstring griffe cannot read fails, with mkdocs' own message.
2. **The code runs**: every ``python`` block and every command of a ``bash`` block of the README
   and of the site's pages (in navigation order, README first, the API pages left out) runs in
   order, in one temporary folder holding copies of ``configs/``, ``data/calibration/`` and
   ``scripts/``, so later blocks use what earlier ones wrote (traces, a calibration, a trained
   run). ``cua-rl`` and ``.venv/bin/...`` run with this interpreter. Only sizes change
   (:data:`SMALLER`). A block whose first line is :data:`SKIP_MARK` (a GPU, model weights, a VM,
   a server that runs until stopped) and the ``make`` commands (the whole set-up) are skipped;
   other languages (``yaml``, ``sh``, untagged) are shown, not run. Everything else must exit 0
   (``validate`` may exit 1: it does when a test trace fails).
3. **Every number names its source** (a stale-claim check, not language understanding). A
   *paragraph* is a run of non-blank lines outside code blocks; each table row and each list
   item is a paragraph of its own, and a table row may take its source from the paragraph just
   before the table (its caption). A paragraph *states a measurement* when, with its inline code
   spans removed (a setting or a bound is written as code, ``10 s`` in backticks), it holds a
   number with a unit of time, size, rate or percent (``5.1 ms``,
   ``300 MB``, ``2.4 steps/s``, ``90%``, ``4.9x``), a ratio (``9/9``, ``53 of 81``), an
   estimate with its interval (``0.67 [0.60, 0.73]``) or a before → after pair
   (``0.07 → 0.50``). Such a paragraph must name where the number comes from
   (:data:`SOURCE`): a results file (``benchmarks/results/x.md``, or ``results/x.md`` on the
   site), a command in backticks (``cua-rl ...``, ``make ...``, ``scripts/...``,
   ``benchmarks/...``, ``python ...``), a test file (``tests/...py``), a link to a section of a
   page (``page.md#section``, where the command is), an upstream page (``http(s)://...``), or
   say ``not measured`` (arithmetic such as a model's bytes); or be followed directly by a code
   block (the command that counts it).
4. **Named things exist**: every repository path in backticks or in a shell block
   (``cua_rl/...``, ``tests/...``, ``benchmarks/...``, ``configs/...``, ``scripts/...``,
   ``docs/...``) exists, every ``from cua_rl... import`` of a python block names a module,
   every dotted ``cua_rl.`` name in backticks is a module that exists followed by at most an
   attribute its source names or a ``Class.member``, every relative link of the README
   resolves, and every result file is linked from ``docs/studies.md``. This catches pages left
   behind when modules move.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_MARK = "# not run by tests/test_docs.py"
#: Size substitutions, applied to shell commands and python blocks: (regex, replacement).
SMALLER: tuple[tuple[str, str], ...] = (
    (r"^(cua-rl train configs/simdesk\.yaml --run-dir \S+)$",
     r"\1 --total-timesteps 512 --no-progress"),
    (r"--episodes 200\b", "--episodes 4"),
    (r"\bepisodes=20\b", "episodes=4"),
    (r"--n-per-family 10\b", "--n-per-family 4"),
)

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.M | re.S)
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
#: What states a measurement (see the module docstring).
CLAIM = re.compile(
    rf"{_NUMBER}\s?(?:%|(?:ms|s|min|minutes|seconds|hours|h|kB|KiB|MB|MiB|GB|GiB"
    rf"|steps/s|episodes/s|calls/s|tokens/s|step/s)(?![\w/]))|{_NUMBER}x(?![\w/])"
    rf"|\b\d+\s?/\s?\d+\b(?!\.\d)|\b\d+ of (?:the )?\d+\b"
    rf"|\b\d\.\d+\s?\[\d|{_NUMBER}\s?(?:→|->)\s?{_NUMBER}"
)
#: What names the source of a measurement (see the module docstring).
SOURCE = re.compile(
    r"benchmarks/results/[\w.-]+\.md|\]\(results/[\w.-]+\.md|\]\((?:[\w/.-]+\.md)?#[\w-]+\)"
    r"|`(?:cua-rl|make|python|\.venv/|scripts/|benchmarks/|torchrun|pytest)[^`]*`"
    r"|tests/[\w/.-]+\.py|https?://|not measured"
)
_PATH = re.compile(r"^(?:cua_rl|tests|benchmarks|configs|scripts|docs)/[\w./-]*$")
_DOTTED = re.compile(r"^cua_rl(?:\.\w+)+$")


def pages() -> list[Path]:
    """The README, then the site's pages in navigation order (API reference pages left out)."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(nav)
    return [ROOT / "README.md", *(DOCS / p for p in found if not p.startswith("api/"))]


def code_blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def shell_commands(code: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments dropped."""
    joined = code.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(shlex.join(words))
    return lines


def smaller(text: str) -> str:
    """``text`` with the :data:`SMALLER` size substitutions applied (line by line)."""
    for pattern, replacement in SMALLER:
        text = re.sub(pattern, replacement, text, flags=re.M)
    return text


def argv_of(command: str) -> list[str]:
    """The argv to run a documented command with this interpreter."""
    words = shlex.split(smaller(command))
    if words[0] in ("cua-rl", ".venv/bin/cua-rl"):
        return [sys.executable, "-m", "cua_rl.cli", *words[1:]]
    if words[0] in ("python", ".venv/bin/python"):
        return [sys.executable, *words[1:]]
    raise AssertionError(f"the docs test does not know how to run {command!r}")


def runnable(lang: str, code: str) -> bool:
    """Whether a block is run: python or bash, not marked, not the ``make`` set-up."""
    if lang not in ("bash", "python") or code.startswith(SKIP_MARK):
        return False
    return not (lang == "bash" and all(c.startswith("make ") for c in shell_commands(code)))


def paragraphs(page: Path) -> list[tuple[int, str, bool]]:
    """(first line number, text, followed by a code block) of every paragraph outside code."""
    code = "\0"  # a code block's lines are replaced by this marker
    text = _FENCE.sub(lambda m: (code + "\n") * m.group(0).count("\n"),
                      page.read_text(encoding="utf-8"))  # fmt: skip
    found: list[tuple[int, list[str], bool]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        starts_item = re.match(r"\s*(?:\||[-*] |\d+\. )", line) is not None
        if line == code:
            last = next((i for i in range(len(found) - 1, -1, -1) if found[i][1]), None)
            if last is not None:
                found[last] = (found[last][0], found[last][1], True)
            found.append((number, [], False))
        elif not line.strip():
            found.append((number, [], False))
        elif starts_item or not found or not found[-1][1]:
            found.append((number, [line], False))
        else:
            found[-1][1].append(line)
    return [(n, "\n".join(lines), before) for n, lines, before in found if lines]


def unsourced_claims(page: Path) -> list[str]:
    """``page:line: claim`` for every measurement whose paragraph names no source."""
    bad = []
    caption = previous = ""
    for number, text, before_code in paragraphs(page):
        if text.lstrip().startswith("|"):
            caption = caption if previous.lstrip().startswith("|") else previous
        else:
            caption = ""
        previous = text
        claims = CLAIM.findall(re.sub(r"`[^`]*`", "", text))
        if claims and not before_code and not SOURCE.search(text) and not SOURCE.search(caption):
            bad.append(f"{page.relative_to(ROOT)}:{number}: {claims[0]!r} in {text[:120]!r}")
    return bad


def stale_names(page: Path) -> list[str]:
    """``page: name`` for every path or ``cua_rl.`` name in backticks, every repository path a
    shell block names and every ``cua_rl`` module a python block imports from (run or not), that
    does not exist."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    named = re.findall(r"`([^`\s]+)`", text)
    for lang, code in code_blocks(page):
        if lang == "bash":
            named += [w for c in shell_commands(code) for w in shlex.split(c) if _PATH.match(w)]
        elif lang == "python":  # the modules of blocks that are not run, too
            imported = re.findall(r"^\s*from (cua_rl(?:\.\w+)*) import", code, flags=re.M)
            named += [f"{m}.__init__" for m in imported]  # the module itself, not an attribute
    bad = []
    for name in named:
        name = name.split("::")[0].rstrip(".,:")
        missing_path = _PATH.match(name) and "*" not in name and not (ROOT / name).exists()
        missing_module = _DOTTED.match(name) and not _module_prefix_exists(name)
        if missing_path or missing_module:
            bad.append(f"{page.relative_to(ROOT)}: {name}")
    return bad


def _module_prefix_exists(name: str) -> bool:
    """Whether ``name`` is a module of the repository followed by an attribute its source names
    (defined or exported there) or a ``Class.member`` (the longest module prefix counts)."""
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py")
        source = module if module.is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            if not rest or rest == ["__init__"]:
                return True
            named = re.search(rf"\b{rest[0]}\b", source.read_text(encoding="utf-8"))
            return bool(named) and (len(rest) == 1 or (len(rest) == 2 and rest[0][:1].isupper()))
    return False


def test_the_pages_and_blocks_are_found() -> None:
    found = pages()
    assert found[0].name == "README.md" and DOCS / "getting-started.md" in found
    assert all(p.is_file() for p in found), [p for p in found if not p.is_file()]
    blocks = [b for p in found for b in code_blocks(p)]
    assert sum(runnable(*b) for b in blocks) >= 10
    assert any("cua-rl evaluate" in code for _, code in blocks)
    assert shell_commands("a \\\n  b  # c\n# d\ne 'f g'\n") == ["a b", "e 'f g'"]
    assert not runnable("bash", "make demo\nmake test\n")
    assert not runnable("python", SKIP_MARK + ": a GPU\nimport torch\n")


def test_the_readme_is_the_short_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make demo" in readme and "make test" in readme
    python = [code for lang, code in code_blocks(ROOT / "README.md") if lang == "python"]
    assert len(python) == 1 and len(python[0].splitlines()) <= 25


def test_the_claim_rule() -> None:
    def claims(text: str) -> list[str]:
        return CLAIM.findall(text)

    assert claims("took 5.1 ms, 300 MB, 2.4 steps/s, 90% and 4.9x")
    assert claims("from 0/9 to 9/9") and claims("53 of the 81") and claims("0.67 [0.60, 0.73]")
    assert claims("0.07 → 0.50")
    assert not claims("a 640x400 desktop seen at 64x40, 8x16 grid, 19 families, 2 steps")
    assert not claims("the 2B model, version 1.0, D̂ = 1 − ê₊ − ê₋, 1/D̂, 2³¹")
    assert SOURCE.search("see [results/sdo.md](results/sdo.md)")
    assert SOURCE.search("run `cua-rl demo --quick`") and not SOURCE.search("run `--quick`")


def test_every_number_names_its_source() -> None:
    bad = [line for page in pages() for line in unsourced_claims(page)]
    assert not bad, "measurements without a results file or command in their paragraph:\n" + (
        "\n".join(bad)
    )


def test_named_paths_and_modules_exist() -> None:
    bad = [line for page in pages() for line in stale_names(page)]
    assert not bad, "names in backticks that do not exist (moved?):\n" + "\n".join(bad)


def test_readme_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not missing, missing


def test_every_result_file_is_linked_from_the_studies_page() -> None:
    studies = (DOCS / "studies.md").read_text(encoding="utf-8")
    results = sorted(p.name for p in (ROOT / "benchmarks" / "results").glob("*.md"))
    assert results
    missing = [name for name in results if f"(results/{name})" not in studies]
    assert not missing, f"docs/studies.md does not link: {missing}"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings_handlers.python", reason="the dev extra (mkdocs)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    assert (tmp_path / "site" / "api" / "calibration" / "index.html").is_file()
    assert (tmp_path / "site" / "results" / "reward_correction" / "index.html").is_file()


@pytest.mark.slow
@pytest.mark.timeout(900)  # a training run and evaluations: minutes on a loaded 2-core machine
def test_the_pages_run_as_written(tmp_path: Path) -> None:
    for name in ("configs", "data/calibration", "scripts"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("data"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    ran = 0
    for page in pages():
        for lang, code in code_blocks(page):
            if not runnable(lang, code):
                continue
            runs = ([[sys.executable, "-c", smaller(code)]] if lang == "python"
                    else [argv_of(c) for c in shell_commands(code) if not c.startswith("make ")])
            for argv in runs:
                done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True,
                                      text=True, timeout=600)  # fmt: skip
                allowed = (0, 1) if argv[1:4] == ["-m", "cua_rl.cli", "validate"] else (0,)
                assert done.returncode in allowed, (
                    f"{page.relative_to(ROOT)}: block failed ({done.returncode}): "
                    f"{shlex.join(argv)[:300]}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
                )
                ran += 1
    assert ran >= 14
    assert (tmp_path / "runs" / "calibration" / "calibration.json").is_file()
    assert list((tmp_path / "runs" / "simdesk" / "checkpoints").glob("ckpt_*.pt"))
    assert (tmp_path / "runs" / "manifest.json").is_file()
