"""References generated from the code, so that they cannot fall behind it.

Three directives, each read from the one place the code declares the thing it documents:

- ``refine-traits``: every trait of :class:`nbrefine.engine.config.Refine`, with its type, its
  default, its ``help=`` and the ``nbrefine fix`` flag that sets it
  (:data:`nbrefine.headless.settings.TRAIT_FLAGS`);
- ``nbrefine-cli``: every command of the ``nbrefine`` console script, from
  :func:`nbrefine.cli.main.build_parser` (usage, and every argument group with its options);
- ``refine-magic``: the ``%%refine`` cell options (the parser of the magic,
  ``RefineMagics.refine.parser``, which :func:`nbrefine.ipython.options.refine_arguments` builds from
  its magic arguments) and the ``%refine`` line commands (:data:`nbrefine.ipython.options.LINE_COMMANDS`).

Every trait and every option gets an anchor (:func:`trait_id`, :func:`option_id`), which
``tests/project/test_docs.py`` looks for in the built pages.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

__all__ = ["cell_parser", "cli_parsers", "option_id", "setup", "trait_id"]

Cell: TypeAlias = str | nodes.Node | Sequence[nodes.Node]


def trait_id(name: str) -> str:
    """The anchor of the ``Refine`` trait ``name``."""
    return str(nodes.make_id(f"refine-{name}"))


def option_id(command: str, option: str) -> str:
    """The anchor of ``option`` (``--max-attempts``, or a positional's name) of ``command``."""
    return str(nodes.make_id(f"{command}-{option}"))


def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """``nbrefine`` and each of its commands, by the name typed (``nbrefine``, ``nbrefine fix``…)."""
    from nbrefine.cli.main import build_parser

    root = build_parser()
    found = {"nbrefine": root}
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, parser in action.choices.items():
                found[f"nbrefine {name}"] = parser
    return found


def cell_parser() -> argparse.ArgumentParser:
    """The parser of the ``%%refine`` cell options: the one the magic itself parses with."""
    from nbrefine.ipython.magics import RefineMagics

    parser: argparse.ArgumentParser = getattr(RefineMagics.refine, "parser")  # noqa: B009  (set by IPython)
    return parser


# -- docutils building blocks ------------------------------------------------------------------


def _cell(content: Cell) -> nodes.entry:
    entry = nodes.entry()
    if isinstance(content, str):
        entry += nodes.paragraph(text=content)
    elif isinstance(content, nodes.Node):
        entry += content if isinstance(content, nodes.Body) else nodes.paragraph("", "", content)
    else:
        entry += nodes.paragraph("", "", *content)
    return entry


def _table(headers: Sequence[str], rows: Iterable[Sequence[Cell]], widths: Sequence[int]) -> nodes.table:
    table = nodes.table(classes=["nbrefine-reference"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for header in headers:
        row += _cell(header)
    head += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for content in cells:
            row += _cell(content)
        body += row
    return table


def _anchored_literal(text: str, ids: Sequence[str]) -> list[nodes.Node]:
    """``text`` as code, preceded by an inline target for each of ``ids``."""
    return [*(nodes.inline("", "", ids=[i]) for i in ids), nodes.literal(text=text)]


def _plain(text: str) -> str:
    return " ".join(str(text).split())


# -- the Refine traits ---------------------------------------------------------------------------


def _trait_type(trait: Any) -> str:
    from traitlets import Enum

    if isinstance(trait, Enum):
        kind = "one of " + ", ".join(repr(v) for v in trait.values or ())
    else:
        kind = type(trait).__name__
    return kind + (" or None" if trait.allow_none else "")


def _trait_default(cls: Any, name: str, trait: Any) -> str:
    if name in getattr(cls, "_trait_default_generators", {}):
        return "computed: see its meaning"
    return str(trait.default_value_repr())


class RefineTraits(SphinxDirective):
    """``.. refine-traits::``: the table of every ``Refine`` trait."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nbrefine.engine.config import Refine
        from nbrefine.headless.settings import TRAIT_FLAGS

        flags = {entry.trait: entry.flag for entry in TRAIT_FLAGS}
        traits = Refine.class_own_traits(config=True)
        rows = []
        for name in sorted(traits):
            trait = traits[name]
            rows.append(
                [
                    _anchored_literal(f"Refine.{name}", [trait_id(name)]),
                    _trait_type(trait),
                    [nodes.literal(text=_trait_default(Refine, name, trait))],
                    _plain(trait.help),
                    [nodes.literal(text=flags[name])] if name in flags else "",
                ]
            )
        self.env.note_dependency(Refine.__module__.replace(".", "/") + ".py")
        return [_table(["trait", "type", "default", "meaning", "nbrefine fix"], rows, [18, 14, 12, 46, 10])]


# -- argparse parsers ------------------------------------------------------------------------------


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._format_action_invocation(action)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    formatter = parser._get_formatter()
    return _plain(formatter._expand_help(action))


def _option_names(action: argparse.Action) -> list[str]:
    return list(action.option_strings) or [str(action.dest)]


def parser_options(parser: argparse.ArgumentParser) -> list[tuple[str, list[argparse.Action]]]:
    """The documented arguments of ``parser``, by group (title, actions), help and subcommands left out."""
    groups = []
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help is not argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        ]
        if actions:
            groups.append((str(group.title or "options"), actions))
    return groups


def _parser_nodes(command: str, parser: argparse.ArgumentParser) -> list[nodes.Node]:
    out: list[nodes.Node] = []
    usage = parser.format_usage().strip()
    if usage.startswith("usage: "):
        usage = usage[len("usage: ") :]
    block = nodes.literal_block(usage, usage)
    block["language"] = "text"
    out.append(block)
    if parser.description:
        out.append(nodes.paragraph(text=_plain(parser.description)))
    for title, actions in parser_options(parser):
        out.append(nodes.rubric(text=title[:1].upper() + title[1:]))
        rows = [
            [
                _anchored_literal(_invocation(parser, a), [option_id(command, n) for n in _option_names(a)]),
                _help(parser, a),
            ]
            for a in actions
        ]
        out.append(_table(["argument", "meaning"], rows, [30, 70]))
    if parser.epilog and command != "refine":
        out.append(nodes.paragraph(text=_plain(parser.epilog)))
    return out


class NbrefineCli(SphinxDirective):
    """``.. nbrefine-cli::``: every command of ``nbrefine``, a section each."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        out: list[nodes.Node] = []
        for command, parser in cli_parsers().items():
            section = nodes.section(ids=[nodes.make_id(f"command-{command}")])
            section += nodes.title(text=command)
            section += _parser_nodes(command.replace(" ", "-"), parser)
            out.append(section)
        return out


class RefineMagic(SphinxDirective):
    """``.. refine-magic::``: the ``%%refine`` cell options and the ``%refine`` line commands."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nbrefine.ipython.options import LINE_COMMANDS

        out = _parser_nodes("refine", cell_parser())
        out.append(nodes.rubric(text="Line commands"))
        rows = [
            [_anchored_literal(f"%refine {what}", [nodes.make_id(f"refine-line-{what.split()[0]}")]), does]
            for what, does in LINE_COMMANDS
        ]
        out.append(_table(["command", "what it does"], rows, [40, 60]))
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("refine-traits", RefineTraits)
    app.add_directive("nbrefine-cli", NbrefineCli)
    app.add_directive("refine-magic", RefineMagic)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
