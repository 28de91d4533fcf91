"""The SyntaxError / IndentationError / TabError fixer: the common slips CPython names precisely.

``else if``, a missing ``:`` or comma, an unclosed or mismatched bracket or string, ``print x``,
``=`` for ``==``, mixed tabs, an unexpected or missing indentation. A candidate is kept only
when it compiles, or fails on a later line than before.

May import: the standard library, the shared modules of this package (``source``, ``magic_lines``,
``failure_site``), never another fixer; never the sandbox, the engine, IPython or the CLI (the offline tier
only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import io
import itertools
import keyword
import re
import tokenize

from .failure_site import _FailureSite
from .magic_lines import _mask_line
from .source import Fix, _comment_start, _indent_of, _indent_unit, _NoFix, _Source

_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_COMPOUND = re.compile(r"^\s*(if|elif|else|for|while|def|class|with|try|except|finally|async|match|case)\b")


def _compile_error(code: str) -> SyntaxError | None:
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as err:
        return err
    except (ValueError, MemoryError, RecursionError):
        return SyntaxError("unparsable")
    return None


def _fix_syntax(state: _FailureSite) -> tuple[list[Fix], str]:
    src = state.src
    err = _compile_error(src.masked)
    if err is None or err.lineno is None:
        raise _NoFix("")
    msg = err.msg or ""
    lineno = err.lineno
    line = src.line(lineno)
    offset = (err.offset or 1) - 1  # 0-based character column (CPython gives characters here)
    candidates: list[tuple[list[tuple[int, int, str]], str]] = []
    base = src.starts[lineno - 1] if 0 < lineno <= len(src.lines) else 0
    if re.match(r"^\s*else\s+if\b", line):
        match = re.match(r"^(\s*)else\s+if\b", line)
        assert match is not None
        candidates.append(
            ([(base + len(match.group(1)), base + match.end(), "elif")], "Python spells it `elif`.")
        )
    elif msg == "expected ':'":
        end = src.line_end(lineno)
        candidates.append(([(end, end, ":")], "The statement header is missing its `:`."))
    elif re.match(r"'[(\[{]' was never closed", msg):
        candidates += _close_bracket(src, lineno, offset)
    elif re.match(r"unmatched '[)\]}]'", msg):
        if line[offset : offset + 1] in ")]}":
            candidates.append(
                ([(base + offset, base + offset + 1, "")], f"Removed an unmatched `{line[offset]}`.")
            )
    elif match := re.match(r"closing parenthesis '(.)' does not match opening parenthesis '(.)'", msg):
        closer, opener = match.groups()
        if line[offset : offset + 1] == closer:
            right = _CLOSERS[opener]
            at = base + offset
            candidates.append(
                ([(at, at + 1, right)], f"`{opener}` is closed with `{right}`, not `{closer}`.")
            )
            candidates.append(([(at, at, right)], f"The `{opener}` was never closed: added `{right}`."))
    elif msg.startswith("Missing parentheses in call to 'print'"):
        candidates += _print_call(src, lineno)
    elif msg.startswith("invalid syntax. Maybe you meant '==' or ':=' instead of '='?") or re.match(
        r"cannot assign to .* here\. Maybe you meant '==' instead of '='\?", msg
    ):
        candidates += _equals(src, err)
    elif msg.startswith("invalid syntax. Perhaps you forgot a comma?"):
        code = _with_commas(src, err)
        if code is not None:
            fix = Fix(code, "Items were missing the comma between them.", frozenset({lineno}))
            return ([fix] if _syntax_progress(code, err) else []), ""
    elif msg.startswith("unterminated string literal"):
        quote = line[offset : offset + 1]
        prefix_free = re.match(r"[rRbBuUfF]{0,2}(['\"])", line[offset:])
        if prefix_free:
            quote = prefix_free.group(1)
        if quote in ("'", '"'):
            end = base + len(line.rstrip())
            candidates.append(([(end, end, quote)], f"The string was not closed: added the closing {quote}."))
    elif (
        msg in ("inconsistent use of tabs and spaces in indentation",)
        or state.failure.error_type == "TabError"
    ):
        candidates += _expand_tabs(src)
    elif msg == "unexpected indent":
        candidates += _unexpected_indent(src, lineno)
    elif msg.startswith("expected an indented block"):
        candidates += _indent_block(src, lineno)
    elif msg == "unindent does not match any outer indentation level":
        candidates += _unindent(src, lineno)
    fixes = []
    for edits, why in candidates:
        try:
            fix = src.fix(edits, why)
        except _NoFix:
            continue
        if _syntax_progress(fix.code, err):
            fixes.append(fix)
    return fixes, ""


def _syntax_progress(code: str, before: SyntaxError) -> bool:
    """Whether ``code`` compiles, or fails only on a later line than ``before`` did."""
    after = _compile_error("\n".join(_mask_line(line) for line in code.split("\n")))
    if after is None:
        return True
    return (after.lineno or 0) > (before.lineno or 0)


def _close_bracket(src: _Source, lineno: int, offset: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    base_indent = len(_indent_of(src.line(lineno)))
    last = lineno
    for following in range(lineno + 1, len(src.lines) + 1):
        text = src.line(following)
        if not text.strip() or len(_indent_of(text)) <= base_indent:
            break
        last = following
    start = src.starts[lineno - 1] + offset
    end = src.line_end(last)
    stack: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code[start:end]).readline):
            if token.type == tokenize.OP and token.string in _CLOSERS:
                stack.append(token.string)
            elif token.type == tokenize.OP and token.string in ")]}" and stack:
                stack.pop()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    if not stack:
        return []
    closers = "".join(_CLOSERS[o] for o in reversed(stack))
    position = end
    code_part = src.code[src.starts[last - 1] : end]
    if code_part.rstrip().endswith(":") and _COMPOUND.match(src.line(lineno)):
        position = src.starts[last - 1] + len(code_part.rstrip()) - 1
    return [([(position, position, closers)], f"Closed the bracket that was never closed with `{closers}`.")]


def _print_call(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    line = src.line(lineno)
    match = re.match(r"^(\s*)print\b\s*(.*)$", line[: _comment_start(line)].rstrip())
    if not match:
        return []
    args = match.group(2)
    if not args or args.startswith("("):
        return []
    new_args = args
    if args.startswith(">>"):
        target, _, rest = args[2:].partition(",")
        new_args = f"{rest.strip()}, file={target.strip()}"
    elif args.endswith(","):
        new_args = args[:-1].rstrip() + ', end=" "'
    start = src.starts[lineno - 1] + len(match.group(1))
    end = src.starts[lineno - 1] + match.end()
    return [
        ([(start, end, f"print({new_args})")], "Python 3's `print` is a function: added the parentheses.")
    ]


def _tokens_in(src: _Source, err: SyntaxError) -> list[tuple[tokenize.TokenInfo, int]]:
    """The tokens of the error's line range, with their absolute offsets in ``code``."""
    lineno = err.lineno or 1
    end_lineno = err.end_lineno or lineno
    start = src.starts[lineno - 1]
    stop = src.starts[end_lineno - 1] + len(src.line(end_lineno))
    found: list[tuple[tokenize.TokenInfo, int]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code[start:stop]).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
                continue
            row, col = token.start
            found.append((token, src.starts[lineno - 1 + row - 1] + col))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


def _equals(src: _Source, err: SyntaxError) -> list[tuple[list[tuple[int, int, str]], str]]:
    """``=`` -> ``==`` for the first ``=`` from the error on, at the error's bracket depth."""
    lineno = err.lineno or 1
    low = src.starts[lineno - 1] + (err.offset or 1) - 1
    depth = 0
    level: int | None = None
    for token, position in _tokens_in(src, err):
        if level is None and position >= low:
            level = depth
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == "=" and position >= low and depth == level:
            return [([(position, position + 1, "==")], "A comparison is written `==`; `=` assigns.")]
    return []


def _with_commas(src: _Source, err: SyntaxError) -> str | None:
    """The code with commas between adjacent items, as long as CPython asks for them."""
    code: str | None = None
    for _ in range(20):
        edits = _commas(src, err)
        if not edits:
            return code
        code = src.apply(edits)[0]
        src = _Source(code)
        after = _compile_error(src.masked)
        if after is None or not (after.msg or "").startswith("invalid syntax. Perhaps you forgot a comma?"):
            return code
        err = after
    return code


def _commas(src: _Source, err: SyntaxError) -> list[tuple[int, int, str]]:
    lineno = err.lineno or 1
    low = src.starts[lineno - 1] + (err.offset or 1) - 1
    high = src.starts[(err.end_lineno or lineno) - 1] + (err.end_offset or 0) - 1
    tokens = [(t, p) for t, p in _tokens_in(src, err) if low <= p < high]
    edits = []
    depth = 0
    for (token, position), (following, _) in itertools.pairwise(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        ends_atom = token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING) or token.string in ")]}"
        starts_atom = following.type in (tokenize.NUMBER, tokenize.STRING) or (
            following.type == tokenize.NAME and not keyword.iskeyword(following.string)
        )
        if (
            token.type == tokenize.NAME
            and keyword.iskeyword(token.string)
            and token.string
            not in (
                "True",
                "False",
                "None",
            )
        ):
            ends_atom = False
        if depth == 0 and ends_atom and starts_atom:
            end = position + len(token.string)
            edits.append((end, end, ","))
    return edits


def _expand_tabs(src: _Source) -> list[tuple[list[tuple[int, int, str]], str]]:
    inside_strings = _string_lines(src)
    candidates = []
    for size in (4, 8):
        edits = []
        for number, line in enumerate(src.lines, start=1):
            indent = _indent_of(line)
            if "\t" in indent and number not in inside_strings:
                start = src.starts[number - 1]
                edits.append((start, start + len(indent), indent.expandtabs(size)))
        if edits:
            why = f"The indentation mixed tabs and spaces: tabs are now {size} spaces."
            candidates.append((edits, why))
    return candidates


def _string_lines(src: _Source) -> set[int]:
    """Lines that start inside a multi-line string literal."""
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                lines.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return lines


def _previous_code_line(src: _Source, lineno: int) -> int | None:
    for number in range(lineno - 1, 0, -1):
        text = src.line(number)
        if text.strip() and not text.strip().startswith("#"):
            return number
    return None


def _unexpected_indent(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    previous = _previous_code_line(src, lineno)
    target = _indent_of(src.line(previous)) if previous is not None else ""
    current = _indent_of(src.line(lineno))
    if len(current) <= len(target):
        return []
    edits = []
    for number in range(lineno, len(src.lines) + 1):
        text = src.line(number)
        if not text.strip():
            continue
        indent = _indent_of(text)
        if len(indent) < len(current):
            break
        start = src.starts[number - 1]
        edits.append((start, start + len(current), target))
    return [(edits, "The line was indented for no reason: aligned it with the line before.")]


def _indent_block(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    header = _previous_code_line(src, lineno)
    if header is None:
        return []
    indent = _indent_of(src.line(header)) + _indent_unit(src)
    text = src.line(lineno)
    start = src.starts[lineno - 1]
    current = _indent_of(text)
    return [([(start, start + len(current), indent)], "The block after the `:` was not indented.")]


def _unindent(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    current = len(_indent_of(src.line(lineno)).expandtabs(8))
    levels: set[int] = set()
    for number in range(1, lineno):
        text = src.line(number)
        if text.strip() and not text.strip().startswith("#"):
            levels.add(len(_indent_of(text).expandtabs(8)))
    distances = sorted((abs(level - current), level) for level in levels)
    if not distances or distances[0][0] > 2 or (len(distances) > 1 and distances[1][0] == distances[0][0]):
        return []
    level = distances[0][1]
    start = src.starts[lineno - 1]
    end = start + len(_indent_of(src.line(lineno)))
    return [
        (
            [(start, end, " " * level)],
            "The line's indentation matched no block: aligned it with the nearest one.",
        )
    ]
