"""``nbrefine bench CORPUS``: measure the refine loop on a corpus of bugs, in a real kernel.

CORPUS is a QuixBugs-format JSONL file (``name``, ``buggy_program``, ``tests``), a
HumanEvalFix-format one (``prompt``, ``buggy_solution``, ``test``, ``entry_point``), or a folder
of notebooks (every code cell that fails is a case; the cells before it run first, for state).
Each case runs as a ``%%refine --max-attempts N`` cell in one kernel (a fresh namespace per case);
the fix is never accepted. The figures and their rendering are :mod:`nbrefine.reports.bench`; what
runs in the kernel is the in-kernel API's ``bench_prepare`` and ``bench_disarm``
(``nbrefine.ipython.kernel_api``, called by name through the driver).

May import: :mod:`nbrefine.reports`, :mod:`nbrefine.headless`, the providers (their names),
:mod:`nbrefine._errors`, :mod:`nbrefine.grounding.text`, :mod:`nbrefine.engine.config` and traitlets (a
flag's rule is its trait's), the rest of this package and the standard library; never the IPython side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import BadInputError, KernelCallError, KernelDiedError
from ..grounding.text import clip
from ..headless import KernelDriver, SessionJSON, check_kernel, open_kernel, read_notebook
from ..headless.fixer import offline_model
from ..headless.notebook_files import first_line, nbf
from ..headless.settings import cell_options, config_values
from ..reports.bench import CaseResult, report_json, report_text, summarize, write_plot
from ..reports.files import check_writable, write_atomic
from ._argparse import add_trait_flags

__all__ = ["BenchOptions", "add_parser", "bench", "load_corpus", "options", "run"]

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130

DESCRIPTION = """\
Run every case of CORPUS through the %%refine loop in a real kernel and report how often it
repairs them: first-attempt success, cumulative success after each round, by error type, cycles
and regressions, declines, provider errors, tokens and time. Fixes are trial-run, never accepted.

CORPUS: a QuixBugs-format .jsonl (name, buggy_program, tests), a HumanEvalFix-format .jsonl
(prompt, buggy_solution, test, entry_point), or a folder of notebooks (each failing code cell
is a case). Cases whose program does not fail count as "no failure" and are left out of rates.
"""

EPILOG = """\
The default provider is offline (no key): it repairs typos and missing imports, not logic, so
on logic-bug corpora it declines nearly everything — that is the honest baseline. With
--provider anthropic and ANTHROPIC_API_KEY set, a model is asked.

examples:
  nbrefine bench corpora/quixbugs_python.jsonl --limit 10
  nbrefine bench humanevalpack_python.jsonl --provider anthropic --rounds 3 --json out.json --plot out.png
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` command to ``parser.add_subparsers(...)``."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        allow_abbrev=False,  # StrictParser says so too; explicit, as the parent could be any parser
        help="measure the repair loop on a corpus of bugs (QuixBugs, HumanEvalFix, notebooks)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("corpus", metavar="CORPUS", help="a .jsonl corpus or a folder of notebooks")
    add_trait_flags(parser, ("provider", "model"), defaults={"provider": "offline"})
    parser.add_argument(
        "--rounds", type=int, default=3, metavar="N", help="most attempts per case (default: 3)"
    )
    parser.add_argument("--limit", type=int, metavar="K", help="only the first K cases")
    parser.add_argument("--json", metavar="OUT.json", help="also write the report as JSON")
    parser.add_argument("--plot", metavar="OUT.png", help="plot cumulative success per round (matplotlib)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds the buggy program, and each trial of a candidate, may run (default: 10)",
    )
    parser.add_argument(
        "--case-timeout",
        type=float,
        metavar="S",
        help="seconds one whole case may take (default: from --rounds and --timeout)",
    )
    add_trait_flags(parser, ("quick_fixes",))
    parser.add_argument("--kernel", default="python3", metavar="NAME", help="kernel name (default: python3)")
    return parser


# --------------------------------------------------------------------------- options and corpus


@dataclass(frozen=True)
class BenchOptions:
    corpus: Path
    provider: str
    model: str | None
    rounds: int
    limit: int | None
    json_out: Path | None
    plot: Path | None
    timeout: float
    case_timeout: int
    quick_fixes: bool
    kernel: str

    def trait_values(self) -> dict[str, Any]:
        """The Refine traits a bench sets (see :mod:`nbrefine.headless.settings`)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "quick_fixes": self.quick_fixes,
            "max_attempts": self.rounds,
            "timeout": self.timeout,
        }


def options(args: argparse.Namespace) -> BenchOptions:
    if args.rounds < 1:
        raise BadInputError("--rounds must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise BadInputError("--limit must be at least 1")
    from traitlets import TraitError

    from ..engine.config import Refine

    try:  # a trial's timeout: the rule of the Refine trait it stands for
        Refine.validated("timeout", args.timeout, option="--timeout")
    except TraitError as err:
        raise BadInputError(str(err)) from None
    if args.case_timeout is not None and not (args.case_timeout > 0 and math.isfinite(args.case_timeout)):
        raise BadInputError("--case-timeout must be a positive number of seconds")
    provider = args.provider or "offline"
    per_round = args.timeout + (15.0 if provider == "offline" else 180.0)
    case_timeout = args.case_timeout or 30.0 + args.timeout + args.rounds * per_round
    for flag, value in (("--json", args.json), ("--plot", args.plot)):
        if value is not None:
            check_writable(Path(value), flag)  # a missing folder is made when writing
    return BenchOptions(
        corpus=Path(args.corpus),
        provider=provider,
        model=args.model,
        rounds=args.rounds,
        limit=args.limit,
        json_out=Path(args.json) if args.json else None,
        plot=Path(args.plot) if args.plot else None,
        timeout=float(args.timeout),
        case_timeout=max(1, math.ceil(case_timeout)),
        quick_fixes=args.quick_fixes is not False,
        kernel=args.kernel,
    )


@dataclass(frozen=True)
class Case:
    name: str
    code: str  # the cell body: the buggy program and its tests


@dataclass
class Corpus:
    kind: str  # "quixbugs" | "humanevalfix" | "notebooks"
    cases: list[Case] = field(default_factory=list)  # JSONL corpora
    notebooks: list[Path] = field(default_factory=list)  # a folder


def _case_from(record: Any, line: int) -> tuple[str, Case]:
    if not isinstance(record, dict):
        raise BadInputError(f"line {line}: not a JSON object")
    if {"buggy_program", "tests"} <= record.keys():
        name = str(record.get("name") or f"case{line}")
        return "quixbugs", Case(name, f"{record['buggy_program'].rstrip()}\n\n{record['tests'].strip()}\n")
    if {"prompt", "buggy_solution", "test", "entry_point"} <= record.keys():
        name = str(record.get("task_id") or record["entry_point"])
        program = record["prompt"] + record["buggy_solution"]
        check = record["test"] + "\ncheck(" + record["entry_point"] + ")"
        return "humanevalfix", Case(name, f"{program.rstrip()}\n\n{check.strip()}\n")
    raise BadInputError(
        f"line {line}: unknown format (need QuixBugs fields buggy_program+tests or HumanEvalFix "
        "fields prompt+buggy_solution+test+entry_point)"
    )


def load_corpus(path: Path, limit: int | None) -> Corpus:
    if not path.exists():
        raise BadInputError(f"{path}: no such file or folder")
    if path.is_dir():
        notebooks = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
        if not notebooks:
            raise BadInputError(f"{path}: empty corpus (no .ipynb notebooks in the folder)")
        return Corpus("notebooks", notebooks=notebooks)
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as err:
        raise BadInputError(f"{path}: cannot read it as UTF-8 text: {err}") from None
    kinds: set[str] = set()
    cases: list[Case] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise BadInputError(f"{path}: unknown format (line {number} is not JSON)") from None
        try:
            kind, case = _case_from(record, number)
        except BadInputError as err:
            raise BadInputError(f"{path}: {err}") from None
        kinds.add(kind)
        cases.append(case)
        if limit is not None and len(cases) >= limit:
            break
    if not cases:
        raise BadInputError(f"{path}: empty corpus (no cases)")
    if len(kinds) > 1:
        raise BadInputError(f"{path}: unknown format (mixes QuixBugs and HumanEvalFix records)")
    return Corpus(kinds.pop(), cases=cases)


# --------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, opts: BenchOptions) -> None:
        self.opts = opts
        values = opts.trait_values()
        self.refine_line = "%%refine" + cell_options({k: values[k] for k in ("max_attempts", "timeout")})
        self.scripted: list[str] | None = None
        self.scratch = tempfile.TemporaryDirectory(prefix="nbrefine-bench-")
        if opts.provider == "scripted":
            path = os.environ.get("NBREFINE_SCRIPTED_REPLIES", "")
            try:
                replies = json.loads(Path(path).read_text()) if path else None
            except (OSError, ValueError) as err:
                raise BadInputError(f"cannot read scripted replies from {path}: {err}") from None
            if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
                raise BadInputError(
                    "--provider scripted needs NBREFINE_SCRIPTED_REPLIES: a JSON list of strings"
                )
            self.scripted = replies
        self.offline_model = offline_model()

    def setup_config(self) -> dict[str, Any]:
        """The traits the in-kernel ``setup_run`` sets (as ``%config`` would)."""
        values = self.opts.trait_values()
        return config_values({k: values[k] for k in ("provider", "model", "quick_fixes")})

    def _prepare(self, kernel: KernelDriver, reset: bool) -> None:
        scripted_path = ""
        if self.scripted is not None:
            file = Path(self.scratch.name) / f"replies-{time.monotonic_ns()}.json"
            file.write_text(json.dumps(self.scripted))
            scripted_path = str(file)
        try:
            kernel.call("bench_prepare", self.opts.timeout, scripted_path, reset)
        except KernelCallError as err:
            raise BadInputError(f"the kernel cannot prepare a case: {err}") from None

    def _consume(self, result: CaseResult) -> None:
        """The scripted replies this case used are gone for the next one (one list per run)."""
        if self.scripted is None:
            return
        used = sum(1 for a in result.attempts if a["model"] not in (None, self.offline_model))
        del self.scripted[:used]

    def run_case(self, kernel: KernelDriver, name: str, code: str, *, reset: bool) -> CaseResult:
        """Run ``code`` under %%refine; the result (status "no_failure" when it passes)."""
        started = time.perf_counter()
        self._prepare(kernel, reset)
        try:
            with kernel.cell_timeout(self.opts.case_timeout):
                run = kernel.run(f"{self.refine_line}\n{code}", 0, store_history=False)
        except KernelDiedError as err:
            raise BadInputError(f"the kernel died while case {name} ran: {err}") from None
        result = CaseResult(name, "unfixed")
        if run.timed_out:
            result.status = "timeout"
            result.message = f"the case did not finish within {self.opts.case_timeout} s (interrupted)"
        elif run.ok:
            result.status = "no_failure"
        else:
            session = kernel.session(run, 0)
            if session is None:
                result.status = "error"
                result.error_type = run.ename or None
                result.message = f"no %%refine session: {run.ename}: {first_line(run.evalue)}"
            else:
                take_session(result, session)
                self._consume(result)
        kernel.call("bench_disarm")
        result.duration_s = time.perf_counter() - started
        return result

    def run(self, corpus: Corpus) -> list[CaseResult]:
        results: list[CaseResult] = []
        folder = self.opts.corpus.resolve() if corpus.kind == "notebooks" else Path(self.scratch.name)
        scratch_nb = nbf().v4.new_notebook(cells=[nbf().v4.new_code_cell("")])
        with open_kernel(scratch_nb, self.opts.kernel, folder, 60) as kernel:
            try:
                kernel.call("setup_run", self.setup_config(), None, None, True)
            except KernelCallError as err:
                raise BadInputError(f"the kernel cannot load nbrefine: {err}") from None
            if corpus.kind == "notebooks":
                self._run_notebooks(kernel, corpus, results)
            else:
                total = len(corpus.cases)
                for i, case in enumerate(corpus.cases, 1):
                    result = self.run_case(kernel, case.name, case.code, reset=True)
                    results.append(result)
                    _progress(f"[{i}/{total}] {case.name}: {describe(result)}")
        return results

    def _run_notebooks(self, kernel: KernelDriver, corpus: Corpus, results: list[CaseResult]) -> None:
        for path in corpus.notebooks:
            try:
                notebook = read_notebook(path)
            except BadInputError as err:
                _progress(f"skipped {path.name}: {err}")
                continue
            reset = True
            number = 0
            for cell in notebook.cells:
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                number += 1
                if self.opts.limit is not None and len(results) >= self.opts.limit:
                    return
                source = cell.source
                if source.lstrip().startswith("%%"):
                    kernel.run(source, 0, store_history=False)  # a cell magic: state only
                    reset = False
                    continue
                result = self.run_case(kernel, f"{path.name}:cell{number}", source, reset=reset)
                reset = False
                if result.status != "no_failure":  # passing cells are state, not cases
                    results.append(result)
                    _progress(f"[{len(results)}] {result.name}: {describe(result)}")


def take_session(result: CaseResult, session: SessionJSON) -> None:
    """What the case's ``%%refine`` session says, into ``result``."""
    failure = session["failure"]
    result.attempts = list(session["attempts"])
    result.error_type = failure["error_type"] if failure is not None else None
    result.error_message = first_line(failure["message"] if failure is not None else "")
    result.stop_reason = session["stop_reason"] or ""
    result.message = first_line(session["message"] or "")
    status = session["status"]
    if status == "no_error":
        result.status = "no_failure"
    elif status == "fixed":
        result.status = "fixed"
        result.fixed_round = next((a["number"] for a in result.attempts if a["ok"]), None)
    elif status == "error":
        result.status = "error"
        result.stop_reason = result.stop_reason or (
            "provider_error" if any(a["provider_error"] for a in result.attempts) else "error"
        )
        if not result.attempts and "provider" in result.message.lower():
            result.stop_reason = "provider_error"
    else:
        result.status = "unfixed"


def describe(result: CaseResult) -> str:
    if result.status == "no_failure":
        return "no failure (left out of rates)"
    head = f"{result.error_type} → " if result.error_type else ""
    if result.status == "fixed":
        return f"{head}fixed at round {result.fixed_round} ({result.duration_s:.1f} s)"
    why = result.stop_reason or result.status
    detail = f": {clip(result.message, 120)}" if result.message else ""
    return f"{head}{result.status} [{why}]{detail} ({result.duration_s:.1f} s)"


# --------------------------------------------------------------------------- main


def bench(opts: BenchOptions) -> int:
    corpus = load_corpus(opts.corpus, opts.limit)
    check_kernel(opts.kernel)
    from ..providers import available_providers

    if opts.provider not in ("auto", *available_providers()):
        raise BadInputError(
            f"unknown provider {opts.provider!r}; available: auto, {', '.join(available_providers())}"
        )
    runner = Bench(opts)
    what = (
        f"{len(corpus.cases)} cases" if corpus.kind != "notebooks" else f"{len(corpus.notebooks)} notebooks"
    )
    _progress(f"nbrefine bench: {opts.corpus} ({corpus.kind}, {what}), provider {opts.provider}")
    started = time.perf_counter()
    try:
        results = runner.run(corpus)
    finally:
        runner.scratch.cleanup()
    wall = time.perf_counter() - started
    if not results:
        raise BadInputError(f"{opts.corpus}: empty corpus (no failing code cells)")
    summary = summarize(results, opts.rounds)
    notes = []
    if opts.json_out is not None:
        write_atomic(opts.json_out, report_json(summary, results, opts, corpus.kind, wall))
        notes.append(f"report: {opts.json_out}")
    if opts.plot is not None:
        notes.append(write_plot(summary, opts, opts.plot))
    text = report_text(summary, opts, corpus.kind, wall)
    print(text + ("\n\n" + "\n".join(notes) if notes else ""), flush=True)
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Run ``nbrefine bench`` for parsed ``args``; the exit status (2 with one line on bad input)."""
    try:
        return bench(options(args))
    except (BadInputError, OSError) as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("nbrefine: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
