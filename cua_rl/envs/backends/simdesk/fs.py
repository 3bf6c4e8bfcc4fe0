"""The virtual filesystem apps and checkers read and write, and seeded text generation."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["HOME", "WORDS", "VirtualFS", "generate_text"]

HOME = "/home/user"
"""The user's home folder; the editor's Open and Save As dialogs list it."""

WORDS: tuple[str, ...] = (
    "apple", "river", "garden", "window", "pencil", "orange", "market", "silver", "rocket",
    "meadow", "castle", "planet", "tomato", "violin", "copper", "falcon", "ladder", "winter",
    "summer", "basket", "candle", "forest", "harbor", "island", "jacket", "kettle", "lemon",
    "mirror", "needle", "oyster", "parrot", "quartz", "saddle", "tunnel", "velvet", "walnut",
    "yogurt", "zebra", "anchor", "bridge", "cactus", "dolphin", "engine", "feather", "guitar",
    "hammer", "igloo", "jungle", "koala", "lantern", "magnet", "nectar", "orchid", "pepper",
)
"""Words for generated documents and task parameters; none is a substring of another."""


class VirtualFS:
    """Folders mapping file names to text; paths are ``<folder>/<name>``."""

    def __init__(self) -> None:
        self.folders: dict[str, dict[str, str]] = {HOME: {}, f"{HOME}/Documents": {}}

    @staticmethod
    def split(path: str) -> tuple[str, str]:
        """(folder, name) of ``path``."""
        folder, _, name = path.rpartition("/")
        return folder, name

    def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        folder, name = self.split(path)
        return name in self.folders.get(folder, {})

    def read(self, path: str) -> str:
        """The text of the file at ``path``; FileNotFoundError if absent."""
        folder, name = self.split(path)
        try:
            return self.folders[folder][name]
        except KeyError:
            raise FileNotFoundError(f"no file {path!r} in the SimDesk filesystem") from None

    def write(self, path: str, text: str) -> None:
        """Create or overwrite the file at ``path`` (its folder must exist)."""
        folder, name = self.split(path)
        if folder not in self.folders:
            raise FileNotFoundError(f"no folder {folder!r} in the SimDesk filesystem")
        if not name or "/" in name:
            raise ValueError(f"invalid file name {name!r}")
        self.folders[folder][name] = text

    def delete(self, path: str) -> None:
        """Remove the file at ``path``."""
        folder, name = self.split(path)
        self.read(path)
        del self.folders[folder][name]

    def rename(self, src: str, dst: str) -> None:
        """Move or rename a file."""
        text = self.read(src)
        self.write(dst, text)
        self.delete(src)

    def listdir(self, folder: str = HOME) -> list[str]:
        """Sorted file names of ``folder``."""
        return sorted(self.folders.get(folder, {}))

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A deep copy of every folder and file."""
        return {f: dict(files) for f, files in self.folders.items()}

    def load(self, data: Mapping[str, Mapping[str, str]]) -> None:
        """Replace the whole content with ``data``."""
        self.folders = {f: dict(files) for f, files in data.items()}


def generate_text(
    rng: np.random.Generator, n_lines: int, include: Mapping[str, int] | None = None,
    exclude: tuple[str, ...] = (),
) -> str:
    """Seeded text of ``n_lines`` short lines in which each word of ``include`` appears exactly
    the given number of times and no word of ``exclude`` appears."""
    include = dict(include or {})
    pool = [w for w in WORDS if w not in include and w not in exclude]
    lines: list[list[str]] = []
    for _ in range(n_lines):
        n = int(rng.integers(4, 8))
        lines.append([pool[int(i)] for i in rng.integers(0, len(pool), size=n)])
    for word, count in include.items():
        for _ in range(count):
            line = lines[int(rng.integers(0, n_lines))]
            line.insert(int(rng.integers(1, len(line) + 1)), word)  # never capitalised
    return "\n".join(" ".join(line).capitalize() + "." for line in lines) + "\n"
