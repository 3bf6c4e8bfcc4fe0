"""Local copies of the files tasks download: the mirror (no network on a training host).

A mirror folder holds the files and ``mirror.json``, its manifest: every URL a task downloads
(``download`` steps, ``cloud_file`` getters) mapped to a file of the folder and that file's
SHA-256::

    {"https://huggingface.co/.../Student_Level_Fill_Blank.xlsx":
         {"file": "libreoffice_calc/Student_Level_Fill_Blank.xlsx", "sha256": "9f2c..."},
     "https://drive.google.com/uc?id=1AbC&export=download":
         {"file": "drive/1AbC.docx", "sha256": "04be..."}}

So two URLs never share a file by accident (Google Drive's ``uc?id=...`` links all end in
``uc``; OSWorld has six different ``thunderbird-profile.tar.gz``), a file is always read from
inside the folder (names are confined after symlink resolution, :func:`cua_rl._paths.confine`)
and a copy whose content changed is refused (its SHA-256 differs from the manifest's).
:func:`write_manifest` writes one (``scripts/build_mirror.py`` builds it from task files).

A folder without ``mirror.json`` is read by the URL's file name (``.../a%20b.xlsx`` ->
``<folder>/a b.xlsx``), with no checksum, and only where that is unambiguous: a URL with a query
(``uc?id=...``) or without a file name, a name that unquotes to a separator, NUL or dot segment,
and a name that two different URLs share (among the URLs :meth:`Mirror.claim` was given: every
task being checked) are refused. A ``{url: path}`` mapping (written in code, trusted) is used
as given.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from cua_rl._io import atomic_write_text
from cua_rl._json import loads
from cua_rl._paths import confine, relative_name
from cua_rl.errors import ConfigError, TaskSpecError

__all__ = ["MANIFEST", "Mirror", "MirrorEntry", "match_by_name", "sha256_of", "task_file_urls",
           "write_manifest"]

MANIFEST = "mirror.json"
"""The manifest's file name in a mirror folder."""
_SHA = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20

PathArg = str | PathLike[str]


@dataclass(frozen=True)
class MirrorEntry:
    """One URL of a mirror.

    Attributes:
        file: The file: relative to the folder (a manifest), or as given (a mapping).
        sha256: Its expected SHA-256 (lowercase hex), or None (a mapping).
    """

    file: str
    sha256: str | None = None


def sha256_of(path: PathArg) -> str:
    """The SHA-256 of a file, lowercase hex (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_manifest(folder: Path) -> dict[str, MirrorEntry] | None:
    index = folder / MANIFEST
    if not index.is_file():
        return None
    where = f"{str(index)!r}"
    try:
        text = index.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{where} cannot be read: {error}") from None
    data = loads(text, where, error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be an object {{url: {{file, sha256}}}}, got "
                          f"{type(data).__name__}")  # fmt: skip
    entries = {}
    for url, entry in data.items():
        field = f"{MANIFEST}[{url!r}]"
        if not isinstance(entry, dict) or set(entry) != {"file", "sha256"}:
            raise ConfigError(f"{where}: {field} must be an object {{file, sha256}} (the file in "
                              f"the folder and its SHA-256; scripts/build_mirror.py writes "
                              f"them), got {entry!r:.120}")  # fmt: skip
        relative_name(entry["file"], field=f"{where}: {field}.file", error=ConfigError)
        sha = entry["sha256"]
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise ConfigError(f"{where}: {field}.sha256 must be 64 lowercase hex digits, got "
                              f"{sha!r:.80}")  # fmt: skip
        entries[url] = MirrorEntry(entry["file"], sha)
    return entries


class Mirror(Mapping[str, Path]):
    """The local copies of a mirror folder or mapping (see the module docstring).

    As a mapping it holds the listed URLs (the manifest's, or the given mapping's) and their
    files, unchecked; :meth:`local` is the checked lookup every caller uses.

    Args:
        folder: The mirror folder, or None for a mapping.
        entries: URL -> entry (the manifest's, or the mapping's).
        manifest: Whether ``folder`` has a ``mirror.json`` (then only its URLs are served).
    """

    def __init__(self, folder: Path | None, entries: Mapping[str, MirrorEntry], *,
                 manifest: bool) -> None:  # fmt: skip
        self.folder = folder
        self.entries = dict(entries)
        self.manifest = manifest
        self._claims: dict[str, set[str]] = {}
        self._hashes: dict[tuple[str, int, int, int], str] = {}

    @classmethod
    def open(cls, mirror: Mirror | Mapping[str, PathArg] | PathArg | None) -> Mirror:
        """The mirror of ``mirror``: a :class:`Mirror` as is, a ``{url: path}`` mapping, a
        folder (with or without ``mirror.json``), or None (no copies).

        Raises:
            ConfigError: A missing folder or a malformed ``mirror.json`` (naming the entry).
        """
        if isinstance(mirror, Mirror):
            return mirror
        if mirror is None:
            return cls(None, {}, manifest=False)
        if isinstance(mirror, Mapping):
            return cls(None, {str(u): MirrorEntry(os.fspath(p)) for u, p in mirror.items()},
                       manifest=False)  # fmt: skip
        folder = Path(mirror)
        if not folder.is_dir():
            raise ConfigError(f"mirror {str(folder)!r} is not a folder")
        entries = _read_manifest(folder)
        return cls(folder, entries or {}, manifest=entries is not None)

    def __getitem__(self, url: str) -> Path:
        entry = self.entries[url]
        return Path(entry.file) if self.folder is None else self.folder / entry.file

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def claim(self, urls: Iterable[str]) -> None:
        """Note URLs that will be looked up, so a folder without ``mirror.json`` refuses a file
        name that two of them share whichever is looked up first."""
        for url in urls:
            name = self._name_of(url)
            if name is not None:
                self._claims.setdefault(unquote(name), set()).add(url)

    @staticmethod
    def _name_of(url: str) -> str | None:
        parts = urlsplit(url)
        if parts.query or parts.fragment:
            return None
        return PurePosixPath(parts.path).name or None

    def _sha256(self, path: Path) -> str:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        if key not in self._hashes:
            self._hashes[key] = sha256_of(path)
        return self._hashes[key]

    def sha256(self, url: str) -> str | None:
        """The SHA-256 the manifest gives for ``url``, or None (not listed, or no manifest)."""
        entry = self.entries.get(url)
        return None if entry is None else entry.sha256

    def local(self, url: str) -> Path | None:
        """The checked local copy of ``url``, or None when the mirror has none.

        Raises:
            TaskSpecError: The URL's copy is refused (the message is the reason, without the
                URL): it leaves the folder, its SHA-256 differs from the manifest's, the URL is
                not in a folder's manifest, or (no manifest) its file name is missing, encoded,
                or shared with another URL.
        """
        entry = self.entries.get(url)
        if entry is not None and self.folder is None:
            path = Path(entry.file)
            return path if path.is_file() else None
        if self.folder is None:
            return None
        if entry is not None:
            path = confine(self.folder, entry.file, field=f"{MANIFEST}[{url!r}].file")
            if not path.is_file():
                return None
            actual = self._sha256(path)
            if actual != entry.sha256:
                raise TaskSpecError(f"the mirror's copy {str(path)!r} has sha256 {actual}; "
                                    f"{MANIFEST} says {entry.sha256} (the file changed: "
                                    f"replace it or rebuild {MANIFEST})")  # fmt: skip
            return path
        if self.manifest:
            raise TaskSpecError(f"not listed in {str(self.folder / MANIFEST)!r} (a folder with a "
                                f"manifest serves only the URLs it lists)")  # fmt: skip
        return self._by_name(url)

    def _by_name(self, url: str) -> Path | None:
        assert self.folder is not None
        raw = self._name_of(url)
        if raw is None:
            raise TaskSpecError(f"the URL has no file name of its own (a query, a fragment or "
                                f"no path), so a folder mirror cannot find it: list it in "
                                f"{MANIFEST}")  # fmt: skip
        relative_name(raw, field="the URL's file name", plain=True)
        name = relative_name(unquote(raw), field="the URL's unquoted file name", plain=True)
        self.claim([url])
        sharing = sorted(self._claims.get(name, ()))
        if len(sharing) > 1:
            shown = ", ".join(repr(u) for u in sharing[:3])
            more = f" and {len(sharing) - 3} more" if len(sharing) > 3 else ""
            raise TaskSpecError(f"ambiguous: {len(sharing)} different URLs have the file name "
                                f"{name!r} ({shown}{more}); a folder without {MANIFEST} cannot "
                                f"tell them apart: list each in {MANIFEST}")  # fmt: skip
        path = confine(self.folder, name, field="the URL's file name", plain=True)
        return path if path.is_file() else None


def write_manifest(folder: PathArg, files: Mapping[str, str]) -> Path:
    """Write ``<folder>/mirror.json`` for ``files`` (URL -> file relative to the folder), with
    each file's SHA-256; atomically.

    Returns:
        The manifest's path.

    Raises:
        ConfigError: A file name that leaves the folder, or a file that does not exist.
    """
    root = Path(folder)
    data = {}
    for url in sorted(files):
        name = files[url]
        path = confine(root, name, field=f"{MANIFEST}[{url!r}].file", error=ConfigError)
        if not path.is_file():
            raise ConfigError(f"{MANIFEST}[{url!r}].file: {name!r} is not a file of "
                              f"{str(root)!r}")  # fmt: skip
        data[url] = {"file": name, "sha256": sha256_of(path)}
    target = root / MANIFEST
    atomic_write_text(target, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return target


def _urls_in(data: Any) -> list[str]:
    """The URLs of one task's JSON: its ``download`` steps' and ``cloud_file`` getters'."""
    if not isinstance(data, dict):
        return []
    evaluator = data.get("evaluator") if isinstance(data.get("evaluator"), dict) else {}
    steps = [*(data.get("config") or []), *(evaluator.get("postconfig") or [])]
    urls = []
    for step in steps:
        params = step.get("parameters") if isinstance(step, dict) else None
        if isinstance(params, dict) and step.get("type") == "download":
            urls.extend(f["url"] for f in params.get("files") or []
                        if isinstance(f, dict) and isinstance(f.get("url"), str))
    for side in ("result", "expected"):
        getters = evaluator.get(side)
        for getter in getters if isinstance(getters, list) else [getters]:
            if isinstance(getter, dict) and getter.get("type") == "cloud_file":
                path = getter.get("path")
                urls.extend(u for u in (path if isinstance(path, list) else [path])
                            if isinstance(u, str))
    return urls


def task_file_urls(sources: Sequence[PathArg]) -> list[str]:
    """Every URL the task files under ``sources`` (folders, searched recursively, or files)
    fetch, sorted and unique. Files that are not task JSON are skipped.

    Raises:
        ConfigError: A source that does not exist.
    """
    urls: set[str] = set()
    for source in sources:
        path = Path(source)
        if not path.exists():
            raise ConfigError(f"task source {str(path)!r} does not exist")
        for file in sorted(path.rglob("*.json")) if path.is_dir() else [path]:
            try:
                data = loads(file.read_text(encoding="utf-8"), f"{str(file)!r}",
                             error=ConfigError)  # fmt: skip
            except (OSError, UnicodeDecodeError, ConfigError):
                continue
            urls.update(_urls_in(data))
    return sorted(urls)


def match_by_name(folder: PathArg, urls: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Match URLs to the files of ``folder`` by the URL's file name, as the fallback would, for
    :func:`write_manifest`: only a name one URL alone has, without query or encoding.

    Returns:
        (URL -> file name for the matched, URL -> why not for the rest).
    """
    root = Path(folder)
    by_name = Mirror(root, {}, manifest=False)
    wanted = list(urls)
    by_name.claim(wanted)
    found, missing = {}, {}
    for url in wanted:
        try:
            path = by_name.local(url)
        except TaskSpecError as error:
            missing[url] = str(error)
            continue
        if path is None:
            missing[url] = f"no file of that name in {str(root)!r}"
        else:
            found[url] = path.relative_to(os.path.realpath(root)).as_posix()
    return found, missing
