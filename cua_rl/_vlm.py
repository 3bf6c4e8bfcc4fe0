"""Loading a Qwen2-VL / Qwen2.5-VL checkpoint with transformers: one helper for judge and policy.

torch, transformers and qwen_vl_utils (extra ``vlm``) are imported when a function here is
called, never when this module is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

from cua_rl.errors import ConfigError, CuaRLError, DependencyNotInstalled

__all__ = ["DTYPES", "load_qwen_vl", "require_vlm", "resolve_device"]

#: The accepted ``dtype`` names ("auto": the checkpoint's own).
DTYPES = ("auto", "float32", "bfloat16", "float16")


def require_vlm() -> tuple[Any, Any, Any]:
    """Import torch, transformers and qwen_vl_utils, or raise ``DependencyNotInstalled``.

    Returns:
        The three modules.

    Raises:
        DependencyNotInstalled: Naming the missing package and the extra ``vlm``.
    """
    modules = []
    for name in ("torch", "transformers", "qwen_vl_utils"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            missing = (getattr(exc, "name", None) or name).split(".")[0]
            raise DependencyNotInstalled(missing, "vlm") from exc
    return modules[0], modules[1], modules[2]


def resolve_device(torch: Any, device: str) -> Any:
    """``torch.device`` of ``"cpu"``, ``"cuda[:N]"`` or ``"auto"`` (CUDA when available).

    Raises:
        ConfigError: For any other value.
    """
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"device must be 'cpu', 'cuda[:N]' or 'auto', got {device!r}") from exc


def load_qwen_vl(
    path: str, *, device: Any, dtype: str, what: str, error: type[CuaRLError]
) -> tuple[Any, Any]:
    """Load model and processor with ``from_pretrained(path)`` (the path real weights take).

    Args:
        path: A local folder, or a hub id (resolved from the local cache when offline).
        device: A ``torch.device`` (see :func:`resolve_device`).
        dtype: One of :data:`DTYPES`.
        what: Names the model in the error message (``"judge"``, ``"policy"``).
        error: The error raised when loading fails.

    Returns:
        ``(model, processor)``: an ``AutoModelForImageTextToText`` on ``device`` in eval mode,
        and its ``AutoProcessor``.

    Raises:
        ConfigError: If ``dtype`` is unknown.
        DependencyNotInstalled: If torch, transformers or qwen_vl_utils is missing.
        CuaRLError: ``error``, naming the path, if loading fails.
    """
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    torch, transformers, _ = require_vlm()
    torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
    try:
        model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype)
        processor = transformers.AutoProcessor.from_pretrained(path)
        model.to(device)
    except Exception as exc:  # any loading failure names the path
        raise error(
            f"could not load the {what} model {path!r}: {type(exc).__name__}: {exc}"
        ) from exc
    return model.eval(), processor
