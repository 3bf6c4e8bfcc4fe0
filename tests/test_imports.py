"""Light imports: ``import cua_rl`` (and the env module) load no heavy or optional package.

Each check runs in a fresh interpreter, since this test session has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))
"""

HEAVY = ("scipy", "sqlite3", "cua_rl.calibration", "cua_rl.validator")
OPTIONAL = ("torch", "transformers", "ray")


def _loaded(module: str, names: tuple[str, ...]) -> list[str]:
    code = _PROBE.format(module=module, names=names)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def test_import_cua_rl_is_light() -> None:
    assert _loaded("cua_rl", HEAVY + OPTIONAL) == []


def test_import_cua_env_is_light() -> None:
    assert _loaded("cua_rl.envs.cua_env", HEAVY) == []


@pytest.mark.parametrize("package", ["cua_rl.judges", "cua_rl.judges.base", "cua_rl.calibration",
                                     "cua_rl.validator", "cua_rl.actions"])
def test_packages_import_no_heavy_module_until_a_name_is_used(package: str) -> None:
    own = () if package.startswith(("cua_rl.calibration", "cua_rl.validator")) else HEAVY[2:]
    assert _loaded(package, ("scipy", "sqlite3", "skimage", "networkx", *own, *OPTIONAL)) == []


def test_lazy_names_resolve_and_unknown_names_raise() -> None:
    import cua_rl.calibration as calibration
    import cua_rl.judges as judges
    import cua_rl.validator as validator

    for package in (calibration, judges, validator):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            package.nope  # noqa: B018
    from cua_rl.datasets import build_simdesk_labelled

    assert calibration.build_simdesk_labelled is build_simdesk_labelled


def test_the_env_does_not_load_the_osworld_task_loader() -> None:
    import subprocess
    import sys

    code = ("import sys, cua_rl.envs.cua_env; "
            "print(sorted(m for m in sys.modules if 'osworld' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
