"""The offline tutor: explanations and hints without a model, from the captured failure.

:func:`tutor_text` builds nbrefine's own explanation or hint at a level from the canned texts
(:mod:`.texts`) and, for hint 3, from facts: what the offline tier's quick fixes find (with a
runner, only a candidate whose trial passes), the cell's own loops and the names in scope.
:class:`OfflineTutor` is that, as a provider.

May import: the standard library, :mod:`nbrefine.grounding`, :mod:`nbrefine.providers` (base, and
the offline tier's candidates and spellings), :mod:`nbrefine.sandbox`, the engine's loop and
prompt, and :mod:`.texts` and :mod:`.guard`.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
from collections.abc import Iterable
from typing import Any

from ...grounding.capture import Failure
from ...grounding.scope import bound_names
from ...providers.base import DECLINED, ProviderReply, ProviderRequest, RepairContext, TextCallback
from ...providers.offline import propose_fixes
from ...providers.offline.spelling import _close_matches, _distance
from ...sandbox import TrialPolicy, TrialSpec
from ..prompt import RepairTask
from ..types import TrialRunner
from .guard import parse_cell
from .texts import (
    ITERATING_CALLS,
    NEEDS,
    NUMBER_TYPES,
    article,
    kind_of,
    meaning,
    nudge,
    remedy,
    rule_for,
    upper_first,
)


def _where(task: RepairTask) -> str:
    failure = task.failures[0]
    if failure.where == task.label and failure.lineno:
        return f"line {failure.lineno} of your cell"
    if failure.where.startswith("check"):
        return f"the {failure.where} that runs after your cell"
    return "your cell"


def _values_text(task: RepairTask) -> str:
    failure = task.failures[0]
    shown = [
        f"{v.name} was {v.text.strip().splitlines()[0][:120]}" for v in failure.values[:3] if v.text.strip()
    ]
    return f" At that moment, {'; '.join(shown)}." if shown else ""


def _assertion_text(task: RepairTask) -> str:
    failure = task.failures[0]
    if not failure.assertion:
        return ""
    wheres = []
    for line in failure.assertion.splitlines()[1:]:
        match = re.match(r"\s*where (.+?) = (?:\w+ )?(.+)$", line)
        if match:
            wheres.append(f"{match.group(1)} gave {match.group(2)}")
    if not wheres:
        return ""
    return " The check saw: " + "; ".join(wheres[:3]) + "."


def _identifiers(line: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", line)))


def _close(word: str, options: Iterable[str]) -> str | None:
    pool = sorted({o for o in options if isinstance(o, str) and o and o != word})
    same_case = [o for o in pool if o.lower() == word.lower()]
    if same_case:
        return same_case[0]
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _close_suggestion(task: RepairTask) -> str:
    """A name, attribute or key that exists and resembles the missing one (level 3)."""
    failure = task.failures[0]
    namespace = task.namespace
    message = failure.message
    try:
        if failure.error_type in ("NameError", "UnboundLocalError"):
            match = re.search(r"name '(\w+)' is not defined", message)
            if match:
                tree = parse_cell(task.code)
                stored = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)] if tree else []
                names = [k for k in namespace if isinstance(k, str) and not k.startswith("_")]
                found = _close(match.group(1), [*names, *stored, *dir(builtins)])
                if found:
                    return f" A name that does exist and looks similar: {found}."
        elif failure.error_type == "AttributeError":
            match = re.search(r"'(\w+)' object has no attribute '(\w+)'", message)
            if match:
                options: list[str] = []
                for name in _identifiers(failure.line):
                    value = namespace.get(name)
                    if value is not None and type(value).__name__ == match.group(1):
                        options.extend(dir(type(value)))
                found = _close(match.group(2), [o for o in options if not o.startswith("_")])
                if found:
                    return f" A {match.group(1)} does have something with a similar name: {found}."
        elif failure.error_type == "KeyError":
            key = ast.literal_eval(message.strip()) if message.strip() else None
            if isinstance(key, str):
                keys: list[str] = []
                for name in _identifiers(failure.line):
                    value = namespace.get(name)
                    if type(value) is dict and len(value) <= 5000:
                        keys.extend(k for k in value if isinstance(k, str))
                    elif type(value).__module__.startswith("pandas") and hasattr(value, "columns"):
                        columns: Any = getattr(value, "columns", ())
                        keys.extend(str(c) for c in list(columns)[:2000])
                found = _close(key, keys)
                if found:
                    return f" The closest key that exists is {found!r}."
    except Exception:  # hints never fail because of an odd object
        return ""
    return ""


# ---- facts the hint is grounded in: the offline tier's verified candidates, the cell's own loops,
# and the names in scope


def _failing_node(line: str) -> ast.AST | None:
    """The failing line parsed on its own (a compound header gets a body to parse)."""
    text = line.strip()
    for source in (text, text + "\n    pass"):
        tree = parse_cell(source)
        if tree is not None and tree.body:
            return tree.body[0]
    return None


def _positions(node: ast.AST, needs: str) -> list[ast.expr]:
    """The expressions of ``node`` in the place that needs ``needs`` (``len(HERE)``, ...)."""
    found: list[ast.expr] = []
    for sub in ast.walk(node):
        if needs == "sized" and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            if sub.func.id == "len":
                found.extend(sub.args[:1])
        elif needs == "iterable":
            if isinstance(sub, (ast.For, ast.comprehension)):
                found.append(sub.iter)
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Name)
                and sub.func.id in ITERATING_CALLS
            ):
                found.extend(sub.args)
        elif needs == "callable" and isinstance(sub, ast.Call):
            found.append(sub.func)
        elif needs == "subscriptable" and isinstance(sub, ast.Subscript):
            found.append(sub.value)
    return found


def _short_type(type_name: str) -> str:
    return type_name.split(".")[-1].split()[0] if type_name.strip() else ""


def _culprits(task: RepairTask, needs: str, got: str) -> list[tuple[str, str]]:
    """(name, its value as captured) for the names in the needing place whose value is a ``got``."""
    failure = task.failures[0]
    node = _failing_node(failure.line)
    if node is None:
        return []
    values = {v.name: v for v in failure.values}
    found = []
    for expr in _positions(node, needs):
        if isinstance(expr, ast.Name) and expr.id in values:
            value = values[expr.id]
            if _short_type(value.type_name) == got:
                found.append((expr.id, value.text.strip().splitlines()[0][:80]))
    return list(dict.fromkeys(found))


def _loop_over(tree: ast.Module, name: str) -> tuple[str, int] | None:
    """The collection a loop of the cell goes over with ``name`` as its variable, and its line."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name):
            if node.target.id == name:
                return ast.unparse(node.iter), node.lineno
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:
                if isinstance(generator.target, ast.Name) and generator.target.id == name:
                    return ast.unparse(generator.iter), node.lineno
    return None


def _collections_in(tree: ast.Module) -> set[str]:
    """Names the cell itself shows to be collections: looped over, or given a list/dict/... value."""
    displays = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(node.iter, ast.Name):
            found.add(node.iter.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, displays):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _scope_at(tree: ast.Module, lineno: int | None) -> set[str]:
    """Names bound where line ``lineno`` of the cell runs: its functions' and the cell's own."""
    names = set(bound_names(tree))
    if lineno is None:
        return names
    for node in ast.walk(tree):
        inside = isinstance(node, ast.stmt) and node.lineno < lineno <= (node.end_lineno or node.lineno)
        if inside and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names |= bound_names(node)
    return names


def _close_in_scope(task: RepairTask, tree: ast.Module, name: str, needs: str) -> str | None:
    """A name in scope close to ``name`` (as the offline tier judges closeness) whose value is
    known to be what the operation needs: only then is it worth pointing at."""
    failure = task.failures[0]
    lineno = failure.lineno if failure.where == task.label else None
    scope = _scope_at(tree, lineno)
    pool = sorted(scope | {k for k in task.namespace if isinstance(k, str) and not k.startswith("_")})
    close = _close_matches(name, pool)
    if not close:  # a short name: one keystroke away, and the only one (as the tier does in functions)
        near = [n for n in scope if n != name and len(n) >= 2 and _distance(name, n, 1) == 1]
        close = near if len(near) == 1 else []
    attribute, _ = NEEDS[needs]
    statically = _collections_in(tree) if needs != "callable" else set()
    for candidate in close:
        if candidate in task.namespace and candidate not in scope:
            if hasattr(type(task.namespace[candidate]), attribute):
                return candidate
        elif candidate in statically:
            return candidate
    return None


def _type_facts(task: RepairTask) -> str:
    """For an operation that got the wrong kind of value: which name holds it, what that name
    is (a loop's variable, a function's name hidden by a value), and a close name that fits."""
    failure = task.failures[0]
    found = rule_for(kind_of(failure.error_type), failure.message)
    tree = parse_cell(task.code)
    if found is None or not found[0].needs or not found[1]["got"] or tree is None:
        return ""
    rule, fields = found
    facts = []
    for name, value in _culprits(task, rule.needs, fields["got"])[:2]:
        loop = _loop_over(tree, name)
        if loop is not None:
            facts.append(
                f"`{name}` is the loop variable of the loop over `{loop[0]}` on line {loop[1]}: it holds "
                f"one item at a time (here, {value})."
            )
        if rule.needs == "callable" and hasattr(builtins, name):
            facts.append(
                f"`{name}` is the name of a Python function, and a value given to `{name}` hides it."
            )
        close = _close_in_scope(task, tree, name, rule.needs)
        if close is not None:
            facts.append(f"A name in scope close to `{name}` that is {NEEDS[rule.needs][1]}: `{close}`.")
    return " " + " ".join(facts) if facts else ""


_TOKEN = re.compile(r"\w+|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|\S")
_CONVERSIONS = {"str": "text", "int": "a whole number", "float": "a number"}
_CLOSE_WORDS = {
    "NameError": "A name that exists and is close to `{old}`: `{new}`.",
    "UnboundLocalError": "A name that exists and is close to `{old}`: `{new}`.",
    "AttributeError": "An attribute that exists and is close to `{old}`: `{new}`.",
    "KeyError": "The closest key that exists is {new}.",
    "ModuleNotFoundError": "A module that exists and is close to `{old}`: `{new}`.",
    "ImportError": "A name that exists and is close to `{old}`: `{new}`.",
}


def _described(text: str, failure: Failure) -> str:
    """How a value reads in a hint: "text (a str)", "a number", or its captured type."""
    types = {v.name: _short_type(v.type_name) for v in failure.values}
    kind = types.get(text) or ("str" if text[:1] in "'\"" else "int" if text.isdigit() else "")
    if kind == "str":
        return "text (a str)"
    if kind in NUMBER_TYPES:
        return "a number"
    return article(kind) if kind else "a value of another kind"


def _unwrapped(code: str, fixed: str) -> tuple[str, str] | None:
    """(function, expression) when ``fixed`` is ``code`` with one ``str(...)``/``int(...)``/
    ``float(...)`` put around an expression."""
    for function in _CONVERSIONS:
        for match in re.finditer(rf"\b{function}\(", fixed):
            depth, end = 1, match.end()
            while end < len(fixed) and depth:
                depth += {"(": 1, ")": -1}.get(fixed[end], 0)
                end += 1
            inner = fixed[match.end() : end - 1]
            if depth == 0 and fixed[: match.start()] + inner + fixed[end:] == code:
                return function, inner
    return None


def _substituted(code: str, fixed: str) -> tuple[str, str] | None:
    """(old, new) when ``fixed`` is ``code`` with one token replaced by another (everywhere)."""
    old, new = _TOKEN.findall(code), _TOKEN.findall(fixed)
    ops = [
        op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    pairs = {(" ".join(old[i1:i2]), " ".join(new[j1:j2])) for _, i1, i2, j1, j2 in ops}
    single = all(tag == "replace" and i2 - i1 == j2 - j1 == 1 for tag, i1, i2, j1, j2 in ops)
    return next(iter(pairs)) if ops and single and len(pairs) == 1 else None


def _literal(token: str) -> str:
    """A string literal as Python shows it ('price', whatever quotes the cell used)."""
    if token[:1] not in "'\"":
        return token
    try:
        return repr(ast.literal_eval(token))
    except (ValueError, SyntaxError):
        return token


def _fix_fact(code: str, fixed: str, failure: Failure) -> str:
    """The offline tier's candidate in words: a close name it substitutes, a conversion it wraps
    around a value, or an import it adds. '' for any other kind of edit."""
    substituted = _substituted(code, fixed)
    if substituted is not None:
        words = _CLOSE_WORDS.get(kind_of(failure.error_type), "`{old}` looks like a slip for `{new}`.")
        return words.format(old=_literal(substituted[0]), new=_literal(substituted[1]))
    wrapped = _unwrapped(code, fixed)
    if wrapped is not None:
        function, inner = wrapped
        return (
            f"`{inner}` is {_described(inner, failure)} here: {function}() turns it into "
            f"{_CONVERSIONS[function]}."
        )
    added = [line.strip() for line in fixed.split("\n") if line.strip() and line.strip() not in code]
    if len(added) == 1 and re.match(r"(?:import|from)\s", added[0]):
        return f"The module {added[0].split()[1]} provides the missing name, and nothing has imported it yet."
    return ""


def _tier_fact(
    task: RepairTask, runner: TrialRunner | None, timeout_s: float, policy: TrialPolicy | None
) -> str:
    """What the offline tier (the same quick fixes the fix mode tries first) knows about this
    failure, in words. With a ``runner``, only a candidate whose trial passes counts, so the hint
    never points at a change that does not work; without one, the tier's first candidate."""
    failure = task.failures[0]
    context = RepairContext(code=task.code, failure=failure, namespace=task.namespace)
    try:
        fixes, _ = propose_fixes(context)
    except Exception:  # a hint never fails because of the quick-fix tier
        return ""
    for fix in fixes[:3]:
        if runner is not None and not _passes(fix.code, task, runner, timeout_s, policy):
            continue
        fact = _fix_fact(task.code, fix.code, failure)
        if fact or runner is None:
            return fact
    return ""


def _passes(
    code: str, task: RepairTask, runner: TrialRunner, timeout_s: float, policy: TrialPolicy | None
) -> bool:
    spec = TrialSpec(
        code=code, checks=tuple(task.checks), timeout_s=timeout_s, policy=policy or TrialPolicy()
    )
    try:
        return runner.run(spec).status == "passed"
    except Exception:  # a runner that raises has decided nothing
        return False


def _facts(
    task: RepairTask, runner: TrialRunner | None, timeout_s: float = 10.0, policy: TrialPolicy | None = None
) -> str:
    """The grounded part of hint 3: the tier's verified candidate, else what the cell and its
    values show about the wrong-typed value, else a close name, attribute or key."""
    tier = _tier_fact(task, runner, timeout_s, policy)
    if tier:
        return " " + tier
    return _type_facts(task) or _close_suggestion(task)


def tutor_text(
    task: RepairTask,
    *,
    mode: str,
    level: int = 1,
    runner: TrialRunner | None = None,
    timeout_s: float = 10.0,
    policy: TrialPolicy | None = None,
) -> str:
    """nbrefine's own explanation (``mode="explain"``) or hint at ``level`` 1 to 3, built from
    the captured failure without a model. Plain words; never code. The meaning and the remedy
    are those of the error message seen (:mod:`.texts`), never another error's; hint 3 is grounded
    in what the offline tier finds (with ``runner``, only a candidate that passes its trial),
    the cell's loops and the names in scope (``_facts``)."""
    if not task.failures:
        return "The cell ran, but nbrefine could not see what went wrong, so it has no hint for it."
    failure = task.failures[0]
    kind = kind_of(failure.error_type)
    where = _where(task)
    detail = failure.message.strip().splitlines()[0][:200] if failure.message.strip() else ""
    said = f" The message was: {detail}." if detail else ""
    if mode == "explain":
        return (
            f"Python stopped at {where} with {article(failure.error_type)}. This means "
            f"{meaning(kind, failure.message)}"
            f"{said}{_assertion_text(task)}{_values_text(task)}"
        )
    if level <= 1:
        return f"Have a look at {where}: {nudge(kind)}"
    if level == 2:
        return (
            f"At {where}, Python raised {article(failure.error_type)}.{said}{_assertion_text(task)}"
            f"{_values_text(task)} {upper_first(nudge(kind))}"
        )
    return f"{remedy(kind, failure.message)}{_facts(task, runner, timeout_s, policy)}"


class OfflineTutor:
    """Explanations and hints without a model (no API key needed), from the captured failure.

    It is a :class:`Provider` (answering a request's context with a first hint), but
    :func:`teach` calls :meth:`reply` directly, with the mode and level."""

    name = "offline-tutor"
    model = "offline-tutor"

    def reply(
        self,
        task: RepairTask,
        *,
        mode: str,
        level: int,
        runner: TrialRunner | None = None,
        timeout_s: float = 10.0,
        policy: TrialPolicy | None = None,
    ) -> ProviderReply:
        text = tutor_text(task, mode=mode, level=level, runner=runner, timeout_s=timeout_s, policy=policy)
        return ProviderReply(text, self.model, stop_reason="end_turn")

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        context = request.context
        if context is None or context.failure is None:
            return ProviderReply("the offline tutor needs the failure", self.model, stop_reason=DECLINED)
        task = RepairTask(code=context.code, failures=(context.failure,), namespace=context.namespace)
        reply = self.reply(task, mode="hint", level=1)
        if on_text is not None:
            on_text(reply.text)
        return reply
