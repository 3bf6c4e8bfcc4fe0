"""MkDocs hook: publish the studies' result files (benchmarks/results/) under ``results/``.

The result files stay where the benchmarks write them (each records the command, commit and seed
that produced it); the site serves them as pages instead of keeping copies in ``docs/``, so a
page links to ``results/<name>.md`` and the strict build fails when that file is gone.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

#: What a result page may show: its text and the figures next to it.
PUBLISHED_SUFFIXES = (".md", ".png")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every ``benchmarks/results/*.md`` and ``*.png`` as ``results/<name>``."""
    results = Path(config.config_file_path).parent / "benchmarks" / "results"
    for path in sorted(results.iterdir()):
        if path.is_file() and path.suffix in PUBLISHED_SUFFIXES:
            files.append(File.generated(config, f"results/{path.name}", abs_src_path=str(path)))
    return files
