#!/usr/bin/env python
"""Write a mirror folder's ``mirror.json`` (URL -> file, SHA-256) for the tasks that use it.

    .venv/bin/python scripts/build_mirror.py MIRROR TASKS [TASKS ...] [--map urls.json]

``MIRROR`` holds the downloaded files; ``TASKS`` are task folders or files (OSWorld or WAA
format). Every URL the tasks fetch (``download`` steps, ``cloud_file`` getters) is listed:

* from ``--map`` (a JSON object ``{url: file relative to MIRROR}``), for the URLs whose file
  name does not identify them (Google Drive's ``uc?id=...``, one file name shared by two URLs);
* from the entries of an existing ``mirror.json`` (kept, re-hashed);
* otherwise by the URL's file name, where exactly one of the URLs has it.

The URLs left unmatched are printed (their tasks will be refused, naming the URL); the exit
status is 1 when there are any. See ``cua_rl.envs.backends.vm.mirror`` and docs/osworld.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cua_rl.errors import CuaRLError
from cua_rl.envs.backends.vm.mirror import MANIFEST, Mirror, match_by_name, task_file_urls, write_manifest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mirror", type=Path, help="the mirror folder")
    parser.add_argument("tasks", nargs="+", type=Path, help="task folders or files")
    parser.add_argument("--map", type=Path, help="JSON {url: file} for URLs a name cannot tell")
    args = parser.parse_args(argv)
    try:
        urls = task_file_urls(args.tasks)
        kept = Mirror.open(args.mirror).entries
        files = {url: entry.file for url, entry in kept.items() if url in urls}
        if args.map is not None:
            given = json.loads(args.map.read_text(encoding="utf-8"))
            if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
                print(f"{args.map}: must be a JSON object {{url: file}}", file=sys.stderr)
                return 2
            files.update(given)
        found, missing = match_by_name(args.mirror, [u for u in urls if u not in files])
        files.update(found)
        path = write_manifest(args.mirror, files)
    except (CuaRLError, OSError, ValueError) as error:
        print(f"build_mirror: {error}", file=sys.stderr)
        return 2
    print(f"{path}: {len(files)} URL(s) of {len(urls)} listed")
    for url, why in sorted(missing.items()):
        print(f"  not listed: {url}: {why}")
    if missing:
        print(f"{len(missing)} URL(s) have no file: add them with --map, or their tasks are "
              f"refused (the {MANIFEST} lists only what it names)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
