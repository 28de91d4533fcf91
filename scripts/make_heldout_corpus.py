"""Build the held-out corpus of the offline-tier bench: realistic mistakes injected into correct programs.

The offline quick fixes were developed against ``bench/offline_corpus.py``, a corpus written by
hand next to them. This script makes a corpus that was not: it takes correct, publicly licensed
programs (the QuixBugs and HumanEval solutions, with their tests; see ``corpora/heldout/README.md``)
and injects one mistake per case with a seeded random generator, so the output is the same on
every run:

- ``name_typo``: one use of a name (a variable, parameter, function or builtin) misspelt;
- ``attribute_typo``: one attribute or method name misspelt (``xs.apend``, ``math.sqr``);
- ``constant_typo``: one ``True``/``False``/``None`` misspelt (``Ture``, ``Nnoe``, ``none``);
- ``deleted_import``: one imported name's import removed;
- ``key_case``: one string key of a subscript written in the wrong case (``d['Zero']``).

A misspelling is one keyboard slip: a key replaced by a neighbour on a QWERTY keyboard, two
neighbouring letters swapped, or one letter left out (and, for the constants, the lower-case
spelling of other languages). Which site of a program and which slip are drawn from
``random.Random`` seeded with the seed, the program and the kind; nothing here knows how the
offline tier works.

Each case is a cell made of the mutated program followed by its tests, and the intended fix is
the original program followed by the same tests. A mutant is kept only if the original passes
and the mutant fails with an exception, the same one whether annotations are evaluated (as in a
kernel) or postponed (as in today's trials: a mistake that only breaks an annotation would pass
its trial unchanged); each program gives at most one case of each kind.

Usage:
    python scripts/make_heldout_corpus.py --import-from ../shared/data   # (re)copy the programs
    python scripts/make_heldout_corpus.py                                # write the corpus
"""

from __future__ import annotations
import __future__

import argparse
import ast
import contextlib
import json
import keyword
import os
import pickle
import random
import select
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "corpora" / "heldout"
PROGRAMS = HELDOUT / "programs.jsonl"
OUTPUT = HELDOUT / "offline_heldout.jsonl"
SEED = 11
TIMEOUT_S = 20.0  # generous: a loaded machine must not change which cases are kept
#: Programs whose own tests run longer than the bench's 5 s trial limit (measured: levenshtein's
#: exponential recursion): a fix could never be verified, so they are left out.
SLOW_PROGRAMS = frozenset({"quixbugs:levenshtein"})
KINDS = ("name_typo", "attribute_typo", "constant_typo", "deleted_import", "key_case")

# Neighbouring keys on a QWERTY keyboard (letters only: digits and symbols are left alone).
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours() -> dict[str, str]:
    found: dict[str, str] = {}
    for r, row in enumerate(_ROWS):
        for c, key in enumerate(row):
            near = []
            for dr, dc in ((0, -1), (0, 1), (-1, 0), (-1, 1), (1, -1), (1, 0)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < len(_ROWS) and 0 <= cc < len(_ROWS[rr]):
                    near.append(_ROWS[rr][cc])
            found[key] = "".join(near)
    return found


NEIGHBOURS = _neighbours()


# --------------------------------------------------------------------------- sources


def import_programs(data: Path) -> None:
    """Copy the correct programs and their tests from the OctoPack files into ``PROGRAMS``."""
    rows = []
    for line in (data / "quixbugs_python.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(
            {
                "id": f"quixbugs:{row['name']}",
                "source": "QuixBugs",
                "program": row["solution"],
                "test": row["tests"],
            }
        )
    for line in (data / "humanevalpack_python.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(
            {
                "id": f"humaneval:{row['task_id']}",
                "source": "HumanEval",
                "program": row["prompt"] + row["canonical_solution"],
                "test": row["test"] + f"\ncheck({row['entry_point']})\n",
            }
        )
    HELDOUT.mkdir(parents=True, exist_ok=True)
    PROGRAMS.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    print(f"wrote {len(rows)} programs to {PROGRAMS.relative_to(ROOT)}")


# --------------------------------------------------------------------------- running a cell


def _child(code: str, postponed: bool, write_fd: int) -> None:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    random.seed(0)
    flags = __future__.annotations.compiler_flag if postponed else 0
    try:
        exec(compile(code, "<cell>", "exec", flags=flags, dont_inherit=True), {"__name__": "__main__"})
        result = "passed"
    except BaseException as err:  # the outcome is the exception's type, whatever it is
        result = type(err).__name__
    os.write(write_fd, pickle.dumps(result))
    os._exit(0)


def run(code: str, postponed: bool = False) -> str:
    """``passed``, the type name of the exception the cell raised, or ``timeout``."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(code, postponed, write_fd)
    os.close(write_fd)
    deadline = time.monotonic() + TIMEOUT_S
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                return "timeout"
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return pickle.loads(data) if data else "crashed"


# --------------------------------------------------------------------------- slips


def slips(word: str, rng: random.Random, constant: bool = False) -> Iterator[tuple[str, str]]:
    """Misspellings of ``word`` in a random order: (the slip, its kind)."""
    options: list[tuple[str, str]] = []
    for i, char in enumerate(word):
        for near in NEIGHBOURS.get(char.lower(), ""):
            options.append(
                (word[:i] + (near.upper() if char.isupper() else near) + word[i + 1 :], "adjacent key")
            )
        if i + 1 < len(word) and word[i] != word[i + 1]:
            options.append((word[:i] + word[i + 1] + word[i] + word[i + 2 :], "transposition"))
        if len(word) >= 3:
            options.append((word[:i] + word[i + 1 :], "deletion"))
    if constant:
        options.append((word.lower(), "lower case"))
    by_kind: dict[str, list[str]] = {}
    for text, kind in options:
        if text != word and text.isidentifier() and not keyword.iskeyword(text):
            by_kind.setdefault(kind, [])
            if text not in by_kind[kind]:
                by_kind[kind].append(text)
    # Each kind of slip is as likely as any other, whatever the number of its variants.
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    for kind in kinds:
        variants = by_kind[kind]
        rng.shuffle(variants)
        for text in variants:
            yield text, kind


# --------------------------------------------------------------------------- mutation sites


@dataclass(frozen=True)
class Site:
    start: int  # character offsets in the program
    end: int
    text: str  # what is there now
    line: int


def _offset(lines: list[str], starts: list[int], lineno: int, col_bytes: int) -> int:
    text = lines[lineno - 1]
    return starts[lineno - 1] + len(text.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))


class Program:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.split("\n")
        self.starts = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line) + 1
        self.tree = ast.parse(source)

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = _offset(self.lines, self.starts, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = _offset(self.lines, self.starts, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def names(self) -> list[Site]:
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and len(node.id) >= 2:
                start, end = self.span(node)
                if self.source[start:end] == node.id:
                    found.append(Site(start, end, node.id, node.lineno))
        return found

    def attributes(self) -> list[Site]:
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and len(node.attr) >= 3:
                _, end = self.span(node)
                start = end - len(node.attr)
                if self.source[start:end] == node.attr:
                    found.append(Site(start, end, node.attr, node.end_lineno or node.lineno))
        return found

    def constants(self) -> list[Site]:
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Constant) and (
                node.value is True or node.value is False or node.value is None
            ):
                start, end = self.span(node)
                if self.source[start:end] in ("True", "False", "None"):
                    found.append(Site(start, end, self.source[start:end], node.lineno))
        return found

    def imports(self) -> list[tuple[Site, str]]:
        """Each imported name: the text to cut to delete its import, and the replacement."""
        found = []
        for node in self.tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or any(a.name == "*" for a in node.names):
                continue
            start, end = self.span(node)
            if len(node.names) == 1:
                line_end = end + 1 if self.source[end : end + 1] == "\n" else end
                found.append((Site(start, line_end, self.source[start:line_end], node.lineno), ""))
                continue
            for index in range(len(node.names)):
                kept = [a for i, a in enumerate(node.names) if i != index]
                names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
                head = (
                    f"from {'.' * node.level}{node.module or ''} import "
                    if isinstance(node, ast.ImportFrom)
                    else "import "
                )
                found.append((Site(start, end, self.source[start:end], node.lineno), head + names))
        return found

    def keys(self) -> list[Site]:
        """String keys written in a subscript (``d['zero']``) or in a dict display (``{'zero': 0}``)."""
        literals: list[ast.expr] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Subscript):
                literals.append(node.slice)
            elif isinstance(node, ast.Dict):
                literals += [key for key in node.keys if key is not None]
        found = []
        for node in literals:
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and any(c.isalpha() for c in node.value)
            ):
                start, end = self.span(node)
                text = self.source[start:end]
                if text[:1] in "'\"" and text[-1:] == text[:1] and text[1:-1] == node.value:
                    found.append(Site(start, end, text, node.lineno))
        return found


def _case_variants(literal: str, rng: random.Random) -> list[str]:
    quote = literal[0]
    body = literal[1:-1]
    variants = {body.capitalize(), body.upper(), body.lower(), body[:1].swapcase() + body[1:]}
    variants.discard(body)
    ordered = sorted(variants)
    rng.shuffle(ordered)
    return [quote + v + quote for v in ordered if quote not in v and "\\" not in v]


# --------------------------------------------------------------------------- the corpus


def mutants(program: Program, kind: str, rng: random.Random) -> Iterator[tuple[str, dict[str, object]]]:
    """Mutated programs of one kind, in a random order, with what was changed."""
    src = program.source
    if kind == "deleted_import":
        sites = program.imports()
        rng.shuffle(sites)
        for site, replacement in sites:
            yield (
                src[: site.start] + replacement + src[site.end :],
                {"line": site.line, "original": site.text.strip(), "mutated": replacement, "slip": "deleted"},
            )
        return
    if kind == "key_case":
        key_sites = program.keys()
        rng.shuffle(key_sites)
        for site in key_sites:
            for variant in _case_variants(site.text, rng):
                info = {"line": site.line, "original": site.text, "mutated": variant, "slip": "case"}
                yield src[: site.start] + variant + src[site.end :], info
        return
    sites = {
        "name_typo": program.names,
        "attribute_typo": program.attributes,
        "constant_typo": program.constants,
    }[kind]()
    rng.shuffle(sites)
    for site in sites:
        for tries, (text, slip) in enumerate(slips(site.text, rng, constant=kind == "constant_typo")):
            if tries >= 3:  # a few slips per site, then another site
                break
            info = {"line": site.line, "original": site.text, "mutated": text, "slip": slip}
            yield src[: site.start] + text + src[site.end :], info


def build(seed: int) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in PROGRAMS.read_text().splitlines()]
    cases: list[dict[str, object]] = []
    skipped = Counter[str]()
    for row in rows:
        program_text = row["program"].rstrip() + "\n"
        cell_tail = "\n\n" + row["test"].strip() + "\n"
        expected = program_text + cell_tail
        if row["id"] in SLOW_PROGRAMS:
            skipped["tests slower than a trial may run"] += 1
            continue
        if run(expected) != "passed":
            skipped["original does not pass"] += 1
            continue
        program = Program(program_text)
        for kind in KINDS:
            # One generator per program and kind: what one program gives never shifts another's draws.
            rng = random.Random(f"{seed}/{row['id']}/{kind}")
            for mutated, info in mutants(program, kind, rng):
                cell = mutated + cell_tail
                try:
                    ast.parse(cell)
                except SyntaxError:
                    continue
                error = run(cell)
                if error in ("passed", "timeout", "crashed") or run(cell, postponed=True) != error:
                    continue
                cases.append(
                    {
                        "id": f"heldout:{row['id']}:{kind}",
                        "program": row["id"],
                        "source": row["source"],
                        "kind": kind,
                        "error": error,
                        **info,
                        "cell": cell,
                        "expected": expected,
                    }
                )
                break
    if skipped:
        print("programs left out:", dict(skipped), file=sys.stderr)
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--import-from", type=Path, help="copy the programs from the OctoPack files in this folder"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":  # set and dict orders must not vary between runs
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    if args.import_from is not None:
        import_programs(args.import_from)
    cases = build(args.seed)
    args.out.write_text("".join(json.dumps(case, sort_keys=True) + "\n" for case in cases))
    by_kind = Counter(str(case["kind"]) for case in cases)
    by_error = Counter(str(case["error"]) for case in cases)
    print(f"wrote {len(cases)} cases to {args.out}")
    print("by kind:", dict(sorted(by_kind.items())))
    print("by error:", dict(sorted(by_error.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
