"""The package's layout (docs: DESIGN.md "Layout"): one home per benchmark, no import circle
between cua_rl's top-level packages."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cua_rl"

#: Benchmark -> its one folder: no file or folder named after it lives elsewhere under cua_rl.
HOMES = {
    "x11": "envs/backends/x11",
    "miniwob": "envs/backends/miniwob",
}


def misplaced(name: str, home: str, package: Path = PACKAGE) -> list[str]:
    """Paths under ``package`` whose own name mentions ``name`` but that are outside ``home``
    (caches and compiled files left out)."""
    folder = package / home
    return sorted(str(p.relative_to(package.parent)) for p in package.rglob("*")
                  if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
                  and name in p.name.lower() and p != folder
                  and folder not in p.parents)  # fmt: skip


@pytest.mark.parametrize(("name", "home"), sorted(HOMES.items()))
def test_a_benchmark_lives_in_its_folder(name: str, home: str) -> None:
    assert (PACKAGE / home / "spec.py").is_file()
    assert misplaced(name, home) == []


def test_the_local_desktop_is_not_a_package_of_its_own() -> None:
    assert not (PACKAGE / "desktop").exists()  # it is the x11 backend: envs/backends/x11/


def test_misplaced_finds_a_module_outside_its_home(tmp_path: Path) -> None:
    package = tmp_path / "cua_rl"
    for name in ("envs/backends/miniwob/dom.py", "calibration/miniwob_set.py", "tasks/web.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    assert misplaced("miniwob", "envs/backends/miniwob", package) == [
        "cua_rl/calibration/miniwob_set.py"]


#: The VM benchmarks -> their folder. What two or more of them share lives in envs/backends/vm/,
#: the fakes shipped with the package (FakeOSWorldServer, ...) in testing/.
VM_HOMES = {
    "osworld": "envs/backends/osworld",
    "waa": "envs/backends/waa",
    "macosworld": "envs/backends/macosworld",
}
VM_SHARED = ("envs/backends/vm", "testing")
#: Files named after a VM benchmark that belong to another folder, and why.
NAMED_AFTER_BUT_ELSEWHERE = {
    "cua_rl/envs/backends/x11/server_waa.py": "the x11 desktop server's WAA mode (x11 code)",
}
#: Modules of the VM protocols (file name prefix -> the one folder allowed to hold them).
PROTOCOL_HOMES = {"vnc": "envs/backends/macosworld", "ssh": "envs/backends/macosworld",
                  "vm_": "envs/backends/vm"}  # fmt: skip


@pytest.mark.parametrize(("name", "home"), sorted(VM_HOMES.items()))
def test_a_vm_benchmark_lives_in_its_folder(name: str, home: str) -> None:
    for role in ("spec.py", "settings.py", "tasks.py"):
        assert (PACKAGE / home / role).is_file()
    # macosworld's folder is named after osworld too, and is not OSWorld's
    homes = [f"cua_rl/{h}" for n, h in VM_HOMES.items() if name in n and n != name]
    outside = [p for p in misplaced(name, home)
               if not any(p.startswith(f"cua_rl/{shared}/") for shared in VM_SHARED)
               and not any(p == h or p.startswith(f"{h}/") for h in homes)
               and p not in NAMED_AFTER_BUT_ELSEWHERE]  # fmt: skip
    assert outside == []


def test_vm_protocol_modules_live_with_their_backend() -> None:
    found = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                   for prefix, home in PROTOCOL_HOMES.items()
                   if p.name.startswith(prefix) and PACKAGE / home not in p.parents)  # fmt: skip
    assert found == []
    assert (PACKAGE / "envs/backends/macosworld/vnc.py").is_file()
    assert (PACKAGE / "envs/backends/vm/client.py").is_file()


def test_no_repo_root_folder_shadows_a_package_name() -> None:
    # the OSWorld task sets are package data, the evaluator's pins sit beside its worker
    assert not (ROOT / "tasks").exists() and not (ROOT / "osworld_eval").exists()
    assert not (PACKAGE / "osworld_eval").exists()
    sets = PACKAGE / "envs/backends/osworld/task_sets"
    assert (sets / "local/solutions.yaml").is_file() and (sets / "probe/files").is_dir()
    assert (PACKAGE / "envs/backends/osworld/evaluation/requirements.txt").is_file()


# -- the import graph between top-level packages ------------------------------------------------


def module_name(path: Path, root: Path = ROOT) -> str:
    """``cua_rl.envs.cua_env`` of ``cua_rl/envs/cua_env.py`` (a package's ``__init__``: the
    package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in the file names (function
    bodies and ``TYPE_CHECKING`` blocks included; relative imports resolved)."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # ``from cua_rl import core`` imports the module cua_rl.core
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def top_level(module: str) -> str | None:
    """``envs`` of ``cua_rl.envs.cua_env``; None outside cua_rl and for the root package itself
    (its ``__init__`` only re-exports ``core`` and ``errors`` and registers the env ids)."""
    parts = module.split(".")
    if parts[0] != "cua_rl" or len(parts) < 2:
        return None
    name = parts[1]
    exists = (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()
    return name if exists else None


def import_graph() -> dict[str, dict[str, set[str]]]:
    """Top-level package -> package it imports -> the modules that import it (self-edges left
    out)."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        source = top_level(module_name(path))
        if source is None:
            continue
        for module in imported_modules(path):
            target = top_level(module)
            if target is not None and target != source:
                graph[source][target].add(module_name(path))
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(component: list[str], graph: dict[str, dict[str, set[str]]]) -> str:
    """The edges inside a cycle, each with up to two modules that make it."""
    edges = []
    for a in component:
        for b in component:
            if b in graph.get(a, {}):
                who = sorted(graph[a][b])
                edges.append(f"{a} -> {b} ({', '.join(who[:2])}{', ...' if len(who) > 2 else ''})")
    return f"[{' <-> '.join(component)}]: " + "; ".join(edges)


def test_cycles_finds_a_circle_and_names_its_edges() -> None:
    graph = {"a": {"b": {"cua_rl.a.x"}}, "b": {"c": {"cua_rl.b.y"}}, "c": {"a": {"cua_rl.c.z"}},
             "d": {"a": {"cua_rl.d"}}}  # fmt: skip
    assert cycles(graph) == [["a", "b", "c"]]
    assert describe(["a", "b", "c"], graph) == ("[a <-> b <-> c]: a -> b (cua_rl.a.x); "
                                                "b -> c (cua_rl.b.y); c -> a (cua_rl.c.z)")


def test_imported_modules_reads_function_level_and_relative_imports(tmp_path: Path) -> None:
    assert top_level("cua_rl.envs.backends.x11.spec") == "envs"
    assert top_level("cua_rl") is None and top_level("numpy") is None
    module = tmp_path / "cua_rl" / "envs" / "backends" / "x11" / "spec.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\nfrom . import backend\n"
                      "from ..osworld.spec import TaskFileSpec\n"
                      "if TYPE_CHECKING:\n    from cua_rl.envs.config import EnvConfig\n"
                      "def make():\n    import cua_rl.judges\n")  # fmt: skip
    assert imported_modules(module, tmp_path) == {
        "typing", "typing.TYPE_CHECKING", "cua_rl.envs.backends.x11",
        "cua_rl.envs.backends.x11.backend", "cua_rl.envs.backends.osworld.spec",
        "cua_rl.envs.backends.osworld.spec.TaskFileSpec", "cua_rl.envs.config",
        "cua_rl.envs.config.EnvConfig", "cua_rl.judges"}  # fmt: skip


def test_no_import_circle_between_top_level_packages() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "import circles between packages:\n" + "\n".join(
        describe(c, graph) for c in found)  # fmt: skip


# -- private names stay in their package ------------------------------------------------------


def private_imports(package: Path = PACKAGE) -> list[str]:
    """``source.name <- importer`` for each private name (``_x``, not dunder) imported from a
    module of another package: not the importer's own package, an enclosing or an enclosed one.
    Private modules at the top (``cua_rl._io``) are the library's shared internals: allowed."""
    found = []
    for path in sorted(package.rglob("*.py")):
        me = module_name(path, package.parent)
        here = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                    "cua_rl") or node.level:  # fmt: skip
                continue
            there = node.module.rpartition(".")[0] if node.module.count(".") > 1 else \
                node.module
            related = here == there or here.startswith(f"{there}.") or \
                there.startswith(f"{here}.")
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not related:
                    found.append(f"{node.module}.{alias.name} <- {me}")
    return found


def test_no_private_name_is_imported_across_packages() -> None:
    assert private_imports() == []


def test_private_imports_finds_one(tmp_path: Path) -> None:
    package = tmp_path / "cua_rl"
    (package / "a").mkdir(parents=True)
    (package / "b").mkdir()
    (package / "a" / "m.py").write_text("from cua_rl.b.n import _hidden, shown\n")
    (package / "a" / "ok.py").write_text("from cua_rl.a.m import _own\nfrom cua_rl._io import x\n")
    assert private_imports(package) == ["cua_rl.b.n._hidden <- cua_rl.a.m"]
