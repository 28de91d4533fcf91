"""Notebook files for a headless run: read and validate one, write one back, merge its outputs.

May import: :mod:`nbrefine._errors`, the standard library and nbformat (imported when first needed:
it takes a second, and a usage error should not wait for it).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import BadInputError

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "coalesce",
    "first_line",
    "nbf",
    "notebook_text",
    "parse_notebook",
    "plain_json",
    "read_notebook",
    "until_first_error",
]


def plain_json(value: Any) -> Any:
    """``value`` as plain lists, dicts and strings. Notebook nodes are dict subclasses, and one
    unpickled where nbformat was not imported imports it there (the batch's client: see
    :func:`nbf`); a kernel call's result comes out of a notebook output, so it is one."""
    return json.loads(json.dumps(value))


def nbf() -> Any:
    """nbformat, imported when needed (nbclient too needs it first). Typed Any: nbformat has no
    annotations."""
    if "jsonschema" not in sys.modules:
        # nbformat imports jsonschema, which imports rfc3987-syntax where it is installed
        # (JupyterLab's jupyter-events asks for it): 38 lark grammars built at import, 0.8 s of
        # CPU in every process that reads a notebook. It checks the "iri" formats, which no
        # notebook schema uses; without it jsonschema leaves them unchecked.
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # "not installed"
    import nbformat

    return nbformat


def read_notebook(path: Path) -> NotebookNode:
    """The notebook at ``path``, validated; :class:`BadInputError` with one line otherwise."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file")
    if not path.is_file():
        raise BadInputError(f"{path}: not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not a notebook (not UTF-8 text)") from None
    except OSError as err:
        raise BadInputError(f"{path}: cannot read it: {err.strerror or err}") from None
    return parse_notebook(text, path)


def parse_notebook(text: str, path: Path) -> NotebookNode:
    """The notebook in ``text`` (read from ``path``), validated; :class:`BadInputError` otherwise."""
    try:
        json.loads(text)
    except ValueError as err:
        raise BadInputError(f"{path}: not a notebook (not valid JSON: {err})") from None
    try:
        notebook: NotebookNode = nbf().reads(text, as_version=4)
        nbf().validate(notebook)
    except Exception as err:  # nbformat raises ValidationError, KeyError, AttributeError, ...
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise BadInputError(f"{path}: not a valid Jupyter notebook: {first}") from None
    return notebook


def notebook_text(notebook: NotebookNode) -> str:
    """The notebook as the text of its file (ending with a newline)."""
    text: str = nbf().writes(notebook)
    return text if text.endswith("\n") else text + "\n"


def coalesce(outputs: Sequence[Any]) -> list[Any]:
    """Merge adjacent stream outputs of the same name (as a notebook front end shows them)."""
    merged: list[Any] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] += output.get("text", "")
        else:
            merged.append(copy.deepcopy(output))
    return merged


def until_first_error(outputs: Sequence[Any]) -> list[Any]:
    """The outputs of the original run in a failed ``%%refine`` cell: up to its traceback."""
    kept: list[Any] = []
    for output in outputs:
        kept.append(output)
        if output.get("output_type") == "error":
            return kept
    return list(outputs)


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, stripped ('' if none): an error's message
    in one line."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
