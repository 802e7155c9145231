"""Model and dataset cards: README.md files with YAML front matter, rendered from `cards/`.

Templates are Jinja2 files in the repository's ``cards/`` directory (``<name>.md.j2``). A card is
rendered from a plain dict context; front matter follows Hugging Face conventions (license,
tags, task_categories, size_categories, and for datasets the ``configs:`` block that lets
``load_dataset(repo_or_dir, "case-3")`` work without a loading script).
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2

from cbench.errors import BuildError

CARDS_DIR = Path(__file__).resolve().parents[2] / "cards"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(CARDS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson"] = lambda v: json.dumps(v, sort_keys=True)
    env.filters["fmt"] = lambda v, spec=".4g": format(v, spec) if isinstance(v, (int, float)) else str(v)
    return env


def render_card(template: str, context: dict) -> str:
    """Render ``cards/<template>.md.j2`` with ``context``; a missing variable is a BuildError."""
    try:
        return _env().get_template(f"{template}.md.j2").render(**context)
    except jinja2.TemplateNotFound:
        raise BuildError(f"no card template {template!r} in {CARDS_DIR}") from None
    except jinja2.UndefinedError as exc:
        raise BuildError(f"card template {template!r} needs a value it was not given: {exc}") from None


def size_category(n_rows: int) -> str:
    """Hugging Face ``size_categories`` bucket for ``n_rows``."""
    for limit, name in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]:
        if n_rows < limit:
            return name
    return "n>10M"
