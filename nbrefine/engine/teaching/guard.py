"""The guard: no code in a tutor's reply may solve the cell.

**The guarantee.** In the teaching modes, whatever the model returns, :func:`guard_reply`
trial-runs every piece of code in the reply, with the same runner and checks the repair loop
uses, and withholds each piece that would make the cell pass (its docstring lists exactly
what is tried). Code whose trials all fail is shown: it cannot solve the exercise. The reply is
then rewritten around what was withheld (:mod:`.rewrite`), so that every sentence left reads
whole.

May import: the standard library, :mod:`nbrefine.sandbox` (trial specs and policy), the engine's
loop (the runner protocol, :func:`normalize_code`) and prompt (:class:`RepairTask`), and
:mod:`.rewrite`.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
import time
from dataclasses import dataclass

from ...sandbox import TrialPolicy, TrialSpec
from ..loop import normalize_code
from ..prompt import RepairTask
from ..types import TrialRunner
from .rewrite import Withheld, take_out, withheld_note

#: Trial endings that may not happen again (a fork lost, a machine too busy): such a trial runs
#: once more before its piece of code is withheld to be safe.
_RETRIED = frozenset({"timeout", "sandbox_error"})
_CONSTANT = "it compares literals only (always True or always False), like a literal shown as it is"


@dataclass(frozen=True)
class SnippetCheck:
    """How one piece of code in a reply was judged."""

    kind: str  # "block" (fenced), "inline" (`...`), "bare" (code lines in the prose)
    code: str
    withheld: bool
    reason: str
    trials: int = 0


@dataclass(frozen=True)
class GuardedReply:
    """A reply with every piece of code that would pass the cell taken out, and ``note`` (at the
    end of ``text``) saying so; ``prose`` is the rest."""

    text: str
    withheld: int
    checked: int
    trials: int = 0
    snippets: tuple[SnippetCheck, ...] = ()
    note: str = ""

    @property
    def prose(self) -> str:
        return self.text.removesuffix(self.note).strip()


@dataclass(frozen=True)
class _Snippet:
    kind: str
    start: int
    end: int
    code: str


_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_INLINE = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_CODEISH = re.compile(
    r"[=(\[]|:\s*$|^\s*(def|class|import|from|return|for|while|if|elif|else|with|assert|raise|try|"
    r"except|lambda|print|del|yield|global|nonlocal)\b"
)
_MAX_RUN = 40  # lines of one bare code run
_MAX_LINE_WORDS = 40  # words of one prose line searched for code in it
_RATIO_CHARS = 4000


def _fences(text: str) -> list[_Snippet]:
    """Fenced blocks (``` or ~~~, any info string, also one cut off at the end)."""
    found = []
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
            i += 1
            continue
        fence = match.group(1)
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        end = offsets[j] + len(lines[j]) if j < len(lines) else len(text)
        found.append(_Snippet("block", offsets[i], end, textwrap.dedent("\n".join(lines[i + 1 : j]))))
        i = j + 1
    return found


def parse_cell(code: str) -> ast.Module | None:
    """``code`` parsed, IPython line magics and shell lines read as ``pass``; ``None`` if not Python."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        pass
    blanked = "\n".join(
        re.sub(r"^(\s*)[%!].*$", r"\1pass", line) if line.lstrip()[:1] in ("%", "!") else line
        for line in code.split("\n")
    )
    try:
        return ast.parse(blanked)
    except (SyntaxError, ValueError):
        return None


def _trivial(node: ast.expr) -> bool:
    """A lone name, dotted name or literal (``[1, 2, 3]`` too): it names or shows something,
    it computes nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _constant_comparison(code: str) -> bool:
    """A comparison of literals (``'A' in 'aeiou'``, ``'A'.lower() in 'aeiou'``): it reads no
    name, so it is always True or always False, whatever the cell's data."""
    tree = parse_cell(code)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return False
    value = tree.body[0].value
    truth = isinstance(value, (ast.Compare, ast.BoolOp)) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    )
    return truth and not any(isinstance(node, ast.Name) for node in ast.walk(value))


def _code_like(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr):
            if not _trivial(stmt.value):
                return True
        elif not isinstance(stmt, ast.Pass) and not (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
            return True
    return False


def _looks_like_code(code: str, header: bool = False) -> bool:
    """Whether ``code`` parses as Python that computes something; with ``header``, also a lone
    compound statement header (`if c.lower() in 'aeiou':`: marked as code, not prose ending in ':')."""
    tree = parse_cell(code)
    if tree is None and header and code.strip().endswith(":") and "\n" not in code.strip():
        tree = parse_cell(code.strip() + "\n    pass")
    return tree is not None and bool(tree.body) and _code_like(tree)


def _bare_code(text: str, start: int, end: int) -> list[_Snippet]:
    """Code written into the prose without fences: runs of lines that parse as Python, and the
    longest piece of a prose line that does ("... change it to total = sum(items).")."""
    found: list[_Snippet] = []
    segment = text[start:end]
    lines = segment.split("\n")
    offsets = [start]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    i = 0
    while i < len(lines):
        line = lines[i]
        if "`" in line or not line.strip() or not _CODEISH.search(line):
            i += 1
            continue
        limit = i
        while limit < len(lines) and limit - i < _MAX_RUN and "`" not in lines[limit]:
            limit += 1
        run = None
        for j in range(limit, i, -1):
            chunk = lines[i:j]
            while chunk and not chunk[-1].strip():
                chunk = chunk[:-1]
            if not chunk:
                continue
            code = textwrap.dedent("\n".join(chunk))
            if _looks_like_code(code):
                run = (i + len(chunk), code)
                break
        if run is not None:
            stop, code = run
            found.append(_Snippet("bare", offsets[i], offsets[stop] - 1, code))
            i = stop
            continue
        found.extend(_code_in_line(line, offsets[i]))
        i += 1
    return found


_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z\"'(*_])")


def _code_in_line(line: str, offset: int) -> list[_Snippet]:
    """The longest code in each sentence of a prose line, searched word by word."""
    found = []
    start = 0
    for boundary in [*(m.start() for m in _SENTENCE_END.finditer(line)), len(line)]:
        found.extend(_code_in_sentence(line[start:boundary], offset + start))
        start = boundary
    return found


_QUOTE_PAIRS = {"'": "'", '"': '"', "“": "”", "‘": "’"}


def _quoted_code(sentence: str, begin: int) -> tuple[int, str] | None:
    """(its end, the code) for code in quotes starting at ``begin`` ("... of 'lst = new' ...")."""
    close = _QUOTE_PAIRS.get(sentence[begin])
    if close is None:
        return None
    end = begin + 1
    while True:
        end = sentence.find(close, end)
        if end < 0:
            return None
        if end + 1 >= len(sentence) or not sentence[end + 1].isalnum():
            break
        end += 1
    code = sentence[begin + 1 : end]
    if len(code.strip()) < 3 or code != code.strip() or not _looks_like_code(code, header=True):
        return None
    return end + 1, code


def _code_in_sentence(sentence: str, offset: int) -> list[_Snippet]:
    spans = [m.span() for m in re.finditer(r"\S+", sentence)][:_MAX_LINE_WORDS]
    found = []
    position = 0
    for begin, _ in spans:
        if begin < position:
            continue
        quoted = _quoted_code(sentence, begin)
        if quoted is not None:  # the quotes go with it: the span is the quote
            found.append(_Snippet("bare", offset + begin, offset + quoted[0], quoted[1]))
            position = quoted[0]
            continue
        for _, stop in reversed(spans):
            if stop <= begin:
                break
            piece = sentence[begin:stop].rstrip(".,;!?")
            if len(piece) < 6 or not _CODEISH.search(piece) or not _looks_like_code(piece):
                continue
            first = (parse_cell(piece) or ast.Module(body=[], type_ignores=[])).body[:1]
            if first and isinstance(first[0], ast.Expr) and isinstance(first[0].value, ast.Tuple):
                continue  # "moment, sum(xs)": words and commas, not code
            found.append(_Snippet("bare", offset + begin, offset + begin + len(piece), piece))
            position = begin + len(piece)
            break
    return found


def _find_snippets(text: str) -> list[_Snippet]:
    """Every piece of code in ``text``: fenced blocks, inline spans that compute something, and
    code lines in the prose. Disjoint, in text order."""
    fences = _fences(text)
    found = list(fences)
    bounds = [0, *[p for f in fences for p in (f.start, f.end)], len(text)]
    for start, end in zip(bounds[::2], bounds[1::2], strict=True):
        for match in _INLINE.finditer(text, start, end):
            code = match.group(2).strip()
            if _looks_like_code(code, header=True):
                found.append(_Snippet("inline", match.start(), match.end(), code))
        found.extend(_bare_code(text, start, end))
    return sorted(found, key=lambda s: s.start)


def _ratio(a: str, b: str) -> float:
    a, b = a.strip()[:_RATIO_CHARS], b.strip()[:_RATIO_CHARS]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < 0.3:
        return 0.0
    return matcher.ratio()


def _binding_keys(stmt: ast.stmt) -> set[tuple[str, str]]:
    """What a top-level statement defines: names, or assignment targets such as ``df["x"]``."""
    keys: set[tuple[str, str]] = set()
    targets: list[ast.expr] = []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        keys.add(("name", stmt.name))
    elif isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        keys.update(("name", alias.asname or alias.name.split(".")[0]) for alias in stmt.names)
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            keys.update(("name", n.id) for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(target, ast.Name):
            keys.add(("name", target.id))
        else:
            keys.add(("target", ast.unparse(target)))
    return keys


def _header_end(stmt: ast.stmt) -> int:
    """The last line of ``stmt`` itself (the header line(s) of a compound statement)."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return max(stmt.lineno, body[0].lineno - 1)
    return stmt.end_lineno or stmt.lineno


@dataclass
class _Cell:
    """The failing cell, prepared for building candidates from snippets."""

    code: str
    lines: list[str]
    tree: ast.Module | None
    normal: str
    failing: list[int]  # cell lines where it raised, then the call sites
    broken: set[int]  # lines that raised something other than AssertionError
    checks: tuple[str, ...]
    implicit: tuple[str, ...]  # the cell's own top-level asserts, as checks of whole-cell trials
    keys: set[tuple[str, str]]
    own: list[str]
    statements: list[ast.stmt]
    reads: set[str]  # names the cell reads

    @classmethod
    def of(cls, task: RepairTask) -> _Cell:
        code = task.code
        tree = parse_cell(code)
        failing: list[int] = []
        broken: set[int] = set()
        for failure in task.failures:
            if failure.where == task.label and failure.lineno:
                failing.append(failure.lineno)
                if failure.error_type != "AssertionError":
                    broken.add(failure.lineno)
        for failure in task.failures:
            failing.extend(f.lineno for f in failure.frames if f.in_code and f.label == task.label)
        lines = code.split("\n")
        failing = [n for n in dict.fromkeys(failing) if 1 <= n <= len(lines)]
        implicit: list[str] = []
        keys: set[tuple[str, str]] = set()
        statements: list[ast.stmt] = []
        if tree is not None:
            for stmt in tree.body:
                keys |= _binding_keys(stmt)
                if isinstance(stmt, ast.Assert) and stmt.lineno not in broken:
                    segment = ast.get_source_segment(code, stmt)
                    if segment:
                        implicit.append(segment)
            statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
        return cls(
            code=code,
            lines=code.split("\n"),
            tree=tree,
            normal=normalize_code(code),
            failing=failing,
            broken=broken,
            checks=tuple(task.checks),
            implicit=tuple(implicit),
            keys=keys,
            own=[line.strip() for line in code.split("\n") if line.strip()],
            statements=statements,
            reads={n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if tree is not None
            else set(),
        )

    def is_own(self, code: str) -> bool:
        """Whether ``code`` is lines of the cell itself, as they are (nothing new to see)."""
        lines = [line.strip() for line in code.split("\n") if line.strip()]
        n = len(lines)
        return bool(lines) and any(self.own[i : i + n] == lines for i in range(len(self.own) - n + 1))

    def statement_at(self, lineno: int) -> ast.stmt | None:
        """The innermost statement whose own lines (a compound statement's header) hold ``lineno``."""
        best = None
        for stmt in self.statements:
            holds = stmt.lineno <= lineno <= _header_end(stmt)
            if holds and (best is None or stmt.lineno >= best.lineno):
                best = stmt
        return best

    def replace_lines(self, first: int, last: int, new: str) -> str:
        line = self.lines[first - 1]
        indent = line[: len(line) - len(line.lstrip())]
        body = textwrap.indent(textwrap.dedent(new).strip("\n"), indent)
        return "\n".join([*self.lines[: first - 1], body, *self.lines[last:]])

    def lines_quoting(self, snippet: ast.stmt) -> set[int]:
        """The lines of which an expression snippet is a part as the student wrote it ("sum(xs)
        was 3" quotes the cell). Put back into its own line it only deletes code around it, which
        "passes" a cell that checks nothing without teaching anything: it is tried elsewhere only."""
        if not isinstance(snippet, ast.Expr) or self.tree is None:
            return set()
        quoted = ast.dump(snippet.value)
        return {
            node.lineno
            for node in ast.walk(self.tree)
            if isinstance(node, ast.expr) and ast.dump(node) == quoted
        }

    def protected(self, stmt: ast.stmt) -> bool:
        """An assert that is not broken itself (it ran, or would run, as a check): the check is
        right, the code it checks is not. Snippets never replace it or a part of it."""
        return isinstance(stmt, ast.Assert) and stmt.lineno not in self.broken


class _Judge:
    """Builds the candidate cells a snippet could stand for, and trial-runs them."""

    def __init__(
        self,
        cell: _Cell,
        runner: TrialRunner,
        timeout_s: float,
        policy: TrialPolicy,
        max_trials: int,
        deadline: float,
    ) -> None:
        self.cell, self.runner, self.timeout_s, self.policy = cell, runner, timeout_s, policy
        self.max_trials, self.deadline = max_trials, deadline
        self.trials = 0
        self.verdicts: dict[tuple[str, tuple[str, ...]], str] = {}

    # ------------------------------------------------------------------ candidates

    def candidates(self, code: str, constant: bool = False) -> list[tuple[str, tuple[str, ...], str]]:
        """The cells ``code`` could stand for. A ``constant`` comparison stands in for no line
        and for no part of a line that reads a name (see :func:`guard_reply`)."""
        cell = self.cell
        tree = parse_cell(code)
        header = False
        if tree is None and code.strip().endswith(":") and "\n" not in code.strip():
            tree, header = parse_cell(code.strip() + "\n    pass"), True
        if tree is None or not tree.body:
            return []
        found: list[tuple[str, tuple[str, ...], str]] = []
        if not header:
            keys = set().union(*(_binding_keys(stmt) for stmt in tree.body))
            if keys & cell.keys or _ratio(code, cell.code) >= 0.5:
                own_asserts = any(isinstance(stmt, ast.Assert) for stmt in tree.body)
                checks = cell.checks + (() if own_asserts else cell.implicit)
                found.append((code, checks, "as the whole cell"))
            spliced = self.splice(code, tree)
            if spliced is not None:
                found.append((spliced, cell.checks, "in place of the statements it redefines"))
            # nbgrader's test cell fails on a name the answer cell above was to define: code
            # defining it is that answer, whether or not it looks like the failing cell.
            if any(kind == "name" and name in cell.reads for kind, name in keys - cell.keys):
                found.append((f"{code}\n{cell.code}", cell.checks, "run before the cell"))
        if "\n" not in code.strip() and len(tree.body) == 1:
            quoted = cell.lines_quoting(tree.body[0])
            if not constant:
                found.extend(self.line_swaps(code.strip(), tree.body[0], header, quoted))
            if not header and isinstance(tree.body[0], ast.Expr):
                found.extend(self.expression_swaps(code.strip(), constant, quoted))
        return found

    def splice(self, code: str, tree: ast.Module) -> str | None:
        """The cell with each top-level statement that the snippet redefines (same function,
        class or assignment target) replaced by the snippet's version."""
        cell = self.cell
        if cell.tree is None:
            return None
        lines = code.split("\n")
        replacements: dict[int, tuple[int, str]] = {}
        for stmt in tree.body:
            keys = _binding_keys(stmt)
            if not keys:
                continue
            for old in cell.tree.body:
                if old.lineno not in replacements and _binding_keys(old) == keys:
                    first = min([old.lineno, *[d.lineno for d in getattr(old, "decorator_list", [])]])
                    start = min([stmt.lineno, *[d.lineno for d in getattr(stmt, "decorator_list", [])]])
                    new = "\n".join(lines[start - 1 : stmt.end_lineno or stmt.lineno])
                    replacements[first] = (old.end_lineno or old.lineno, new)
                    break
        if not replacements:
            return None
        out = list(cell.lines)
        for first in sorted(replacements, reverse=True):
            last, new = replacements[first]
            out[first - 1 : last] = textwrap.dedent(new).split("\n")
        return "\n".join(out)

    def line_swaps(
        self, line: str, stmt: ast.stmt, header: bool, quoted: set[int]
    ) -> list[tuple[str, tuple[str, ...], str]]:
        """The cell with a one-line snippet in place of a failing line, or of a line it resembles
        (not of a line it quotes: see :meth:`_Cell.lines_quoting`)."""
        cell = self.cell
        similar = sorted(
            ((_ratio(line, text), n) for n, text in enumerate(cell.lines, 1) if text.strip()), reverse=True
        )
        targets = [n for n in cell.failing if _ratio(line, cell.lines[n - 1]) >= 0.3]
        targets += [n for ratio, n in similar[:2] if ratio >= 0.6]
        found = []
        for lineno in [n for n in dict.fromkeys(targets) if n not in quoted][:4]:
            old = cell.statement_at(lineno)
            if old is None:
                first, last = lineno, lineno
            else:
                if cell.protected(old) or (isinstance(old, ast.Assert) and not isinstance(stmt, ast.Assert)):
                    continue
                if header != (_header_end(old) < (old.end_lineno or old.lineno)):
                    continue  # a compound header stands only for a header, a statement for a statement
                first, last = old.lineno, _header_end(old)
            found.append((cell.replace_lines(first, last, line), cell.checks, f"in place of line {lineno}"))
        return found

    def expression_swaps(
        self, expr: str, constant: bool = False, quoted: frozenset[int] | set[int] = frozenset()
    ) -> list[tuple[str, tuple[str, ...], str]]:
        """The cell with an expression snippet in place of the part of a line it resembles (for a
        ``constant`` one, a part that reads no name either; never in a line it quotes)."""
        cell = self.cell
        scored: list[tuple[float, int, int, int]] = []
        failing_values = set()
        for lineno in cell.failing:
            stmt = cell.statement_at(lineno)
            value = getattr(stmt, "value", None) or getattr(stmt, "test", None)
            if isinstance(value, ast.expr):
                failing_values.add((value.lineno, value.col_offset, value.end_col_offset))
        if cell.tree is None:
            return []
        protected = {id(n) for stmt in cell.statements if cell.protected(stmt) for n in ast.walk(stmt)}
        nodes = [
            n
            for n in ast.walk(cell.tree)
            if isinstance(n, ast.expr)
            and id(n) not in protected
            and n.end_lineno == n.lineno
            and n.lineno not in quoted
            and n.end_col_offset is not None
            and not _trivial(n)
            and not (constant and any(isinstance(sub, ast.Name) for sub in ast.walk(n)))
        ]
        for sub in nodes[:3000]:
            assert sub.end_col_offset is not None
            segment = _segment(cell.lines[sub.lineno - 1], sub.col_offset, sub.end_col_offset)
            ratio = _ratio(expr, segment)
            floor = 0.3 if (sub.lineno, sub.col_offset, sub.end_col_offset) in failing_values else 0.6
            if ratio >= floor and segment.strip() != expr:
                scored.append((ratio, sub.lineno, sub.col_offset, sub.end_col_offset))
        found = []
        for _ratio_value, lineno, start, stop in sorted(set(scored), reverse=True)[:3]:
            line = cell.lines[lineno - 1].encode()
            new_line = (line[:start] + expr.encode() + line[stop:]).decode("utf-8", "replace")
            code = "\n".join([*cell.lines[: lineno - 1], new_line, *cell.lines[lineno:]])
            found.append((code, cell.checks, f"in place of part of line {lineno}"))
        return found

    # ------------------------------------------------------------------ trials

    def check(self, snippet: _Snippet) -> SnippetCheck:
        code = snippet.code

        def verdict(withheld: bool, reason: str, trials: int = 0) -> SnippetCheck:
            return SnippetCheck(snippet.kind, code, withheld, reason, trials)

        if not code.strip():
            return verdict(False, "empty")
        if self.cell.is_own(code):
            return verdict(False, "the student's own code, unchanged")
        constant = _constant_comparison(code)
        candidates = [c for variant in _variants(code) for c in self.candidates(variant, constant)]
        if not candidates:
            return verdict(
                False, _CONSTANT if constant else "it cannot stand in for the cell or any line of it"
            )
        before, safe = self.trials, "so it was withheld to be safe"
        for candidate, checks, how in candidates:
            if normalize_code(candidate) == self.cell.normal:
                continue
            result = self.outcome(candidate, checks)
            trials = self.trials - before
            if result is None:
                return verdict(True, f"there was no time left to try it, {safe}", trials)
            if result == "passed":
                return verdict(True, f"it passes {how}", trials)
            if result != "failed":
                return verdict(True, f"its trial {how} ended with {result}, {safe}", trials)
        return verdict(False, "no trial of it passed", self.trials - before)

    def outcome(self, candidate: str, checks: tuple[str, ...]) -> str | None:
        """How the trial of ``candidate`` ended (each candidate is run once per reply); one that
        may end otherwise another time (:data:`_RETRIED`) runs once more. ``None``: no trial or
        time was left."""
        key = (candidate, checks)
        if key in self.verdicts:
            return self.verdicts[key]
        result = ""
        for _ in range(2):
            if self.trials >= self.max_trials or time.monotonic() > self.deadline:
                return None
            result = self.trial(candidate, checks)
            self.trials += 1
            if result not in _RETRIED:
                break
        self.verdicts[key] = result
        return result

    def trial(self, code: str, checks: tuple[str, ...]) -> str:
        spec = TrialSpec(code=code, checks=checks, timeout_s=self.timeout_s, policy=self.policy)
        try:
            outcome = self.runner.run(spec)
        except Exception as err:  # a runner that raises has decided nothing
            return f"sandbox_error ({type(err).__name__})"
        return outcome.status


def _variants(code: str) -> list[str]:
    """``code``, plus what it means when it is a diff (the new side, and a single added line)
    or a console session (the ``>>>`` lines without their prompts)."""
    variants = [code]
    lines = code.split("\n")
    if any(line.startswith(">>> ") for line in lines):
        variants.append("\n".join(line[4:] for line in lines if line.startswith((">>> ", "... "))))
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in lines if line.startswith("-") and not line.startswith("---")]
    if added and removed and parse_cell(code) is None:
        kept = [line for line in lines if not line.startswith(("-", "@@", "+++"))]
        variants.append("\n".join(line[1:] if line.startswith(("+", " ")) else line for line in kept))
        variants.append("\n".join(line[1:] if line.startswith("+") else line for line in kept))
        if len(added) == 1:
            variants.append(added[0][1:].strip())
    return list(dict.fromkeys(v for v in variants if v.strip()))


def _segment(line: str, start: int, stop: int) -> str:
    """``line[start:stop]`` with the byte offsets ``ast`` uses."""
    return line.encode()[start:stop].decode("utf-8", "replace")


def guard_reply(
    text: str,
    task: RepairTask,
    runner: TrialRunner,
    *,
    timeout_s: float,
    policy: TrialPolicy | None = None,
    max_trials: int = 24,
    budget_s: float | None = None,
) -> GuardedReply:
    """``text`` with every piece of code that would make the cell pass withheld.

    Pieces of code: fenced blocks (any info string or none, also one cut off at the end),
    inline spans that compute something (not a lone name, literal or dotted name such as
    ``total`` or ``df.columns``), and lines of the prose that parse as such Python (a run of
    them, or the longest part of a sentence, as in "change it to total = sum(items)").

    Each piece is tried, with ``runner`` in the sandbox and the cell's checks, as:

    1. the whole cell, when it defines something the cell defines or resembles the cell; with
       the cell's own top-level asserts as extra checks unless the piece has asserts itself;
    2. the cell with the statements the piece redefines (same function, class or assignment
       target) replaced by the piece's versions;
    3. for a one-line piece: the cell with it in place of a failing line (the line that raised
       and each call site in the cell) or of the two lines most like it;
    4. for an expression: the cell with it in place of the part of a line most like it.

    An assert that failed as an assert is never replaced (the check is right, the code before
    it is not); a broken assert (say, a misspelt name in it) is, by an assert only. A comparison
    of literals (``'A' in 'aeiou'``) is always True or always False: in place of a line, or of a
    part of a line that reads a name, it does what the literal would (drop the line, make the
    code ignore its data), which passes only checks too weak to tell, and literals are shown as
    they are; it is tried only in place of a part that reads no name either.

    A piece is withheld when a trial passes; also, to be safe, when a trial cannot decide
    (timeout, sandbox error, refused action, ...; a timeout or a sandbox error is run once more
    first) or when ``max_trials`` or ``budget_s`` (default: 6 trial timeouts, at least 30 s) run
    out. The student's own lines, unchanged, are shown as they are. Prose that describes a fix
    in words is not code and is not checked.

    Code in the prose is found in backticks, in quotes ("... of 'lst = new' ...") and bare.
    What is withheld is taken out with what depends on it (:func:`.rewrite.take_out`: the
    sentence leading into a block with a colon; around code in a sentence, its brackets, its
    clause or the sentence, or, for a quoted fragment of the student's own line, neutral words
    in its place), so that every sentence left reads whole, and one note at the end says so.
    """
    text = text.replace("\r\n", "\n")
    snippets = _find_snippets(text)
    if not snippets:
        return GuardedReply(text, 0, 0)
    budget = budget_s if budget_s is not None else max(30.0, 6 * timeout_s)
    judge = _Judge(
        _Cell.of(task), runner, timeout_s, policy or TrialPolicy(), max_trials, time.monotonic() + budget
    )
    order = {"block": 0, "inline": 1, "bare": 2}
    checks: dict[int, SnippetCheck] = {}
    for index in sorted(range(len(snippets)), key=lambda i: order[snippets[i].kind]):
        checks[index] = judge.check(snippets[index])
    results = tuple(checks[i] for i in range(len(snippets)))
    withheld = [
        Withheld(s.start, s.end, whole, "" if whole else _stand_in(judge.cell, text, s, c.reason))
        for s, c in zip(snippets, results, strict=True)
        if c.withheld
        for whole in [_whole_lines(text, s)]
    ]
    note = withheld_note(len(withheld)) if withheld else ""
    prose = take_out(text, withheld) if withheld else text
    return GuardedReply(
        text=f"{prose}\n\n{note}".strip() if note else text,
        withheld=len(withheld),
        checked=len(results),
        trials=judge.trials,
        snippets=results,
        note=note,
    )


def _stand_in(cell: _Cell, text: str, snippet: _Snippet, reason: str) -> str:
    """Neutral words for a quoted fragment of the student's own line ("part of line 2", "the start
    of line 2"), which the rewrite may put in its place; '' for code that is not quoted, not the
    student's (new code is what a fix looks like: the sentence about it goes), or withheld for
    passing on another line than its own ("the end of line 3" would say where to copy from)."""
    quote = text[snippet.start : snippet.start + 1]
    if quote not in ("`", *_QUOTE_PAIRS) or "\n" in snippet.code.strip():
        return ""
    fragment = re.sub(r"\s+", "", snippet.code)
    lines = [n for n, line in enumerate(cell.lines, 1) if fragment and fragment in re.sub(r"\s+", "", line)]
    replaced = re.search(r"in place of (?:part of )?line (\d+)", reason)
    if replaced is not None:
        lines = [n for n in lines if n == int(replaced.group(1))]
    if not lines:
        return ""
    lineno = next((n for n in lines if n in cell.failing), lines[0])
    line = re.sub(r"\s+", "", cell.lines[lineno - 1])
    if line.startswith(fragment):
        return f"the start of line {lineno}"
    if line.endswith(fragment):
        return f"the end of line {lineno}"
    return f"part of line {lineno}"


def _whole_lines(text: str, snippet: _Snippet) -> bool:
    """Whether the snippet fills its lines (taken out, they go) or sits in a sentence."""
    before = text[: snippet.start].rsplit("\n", 1)[-1]
    after = text[snippet.end :].split("\n", 1)[0]
    return snippet.kind == "block" or not (before.strip() or after.strip())
