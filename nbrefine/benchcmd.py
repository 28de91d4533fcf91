"""``nbrefine bench CORPUS``: measure the refine loop on a corpus of bugs, in a real kernel.

CORPUS is a QuixBugs-format JSONL file (``name``, ``buggy_program``, ``tests``), a
HumanEvalFix-format one (``prompt``, ``buggy_solution``, ``test``, ``entry_point``), or a folder
of notebooks (every code cell that fails is a case; the cells before it run first, for state).
Each case runs as a ``%%refine --max-attempts N`` cell in one kernel (a fresh namespace per case);
the fix is never accepted. The report: first-attempt and cumulative success per round, by error
type, cycles, regressions, declines, provider errors, tokens and time.

Wiring (in cli.py): ``benchcmd.add_parser(subparsers)`` and, for the ``bench`` command,
``return benchcmd.run(args)``. Also runnable alone: ``python -m nbrefine.benchcmd CORPUS``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ._argparse import StrictParser

__all__ = ["add_parser", "main", "run"]

EXIT_OK, EXIT_USAGE = 0, 2

_MARK = "@@nbrefine-bench@@ "
_HELPERS = '__import__("nbrefine.benchcmd", fromlist=["_"])'
_HANG_MESSAGE = "the program did not finish within {s:g} s (stopped by nbrefine bench)"

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


class BenchError(Exception):
    """Bad usage or input: one line on stderr, exit status 2."""


class _Parser(StrictParser):
    def error(self, message: str) -> NoReturn:
        raise BenchError(f"{message} (see '{self.prog} --help')")


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("corpus", metavar="CORPUS", help="a .jsonl corpus or a folder of notebooks")
    parser.add_argument("--provider", default="offline", help="offline (default), anthropic, scripted, ...")
    parser.add_argument("--model", help="model name for the provider")
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
    parser.add_argument(
        "--no-quick-fixes",
        action="store_true",
        help="with a model provider, skip the offline quick fixes and ask the model straight away",
    )
    parser.add_argument("--kernel", default="python3", metavar="NAME", help="kernel name (default: python3)")
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` command to ``parser.add_subparsers(...)``; dispatch it to :func:`run`."""
    bench = subparsers.add_parser(
        "bench",
        allow_abbrev=False,  # StrictParser says so too; explicit, as the parent could be any parser
        help="measure the repair loop on a corpus of bugs (QuixBugs, HumanEvalFix, notebooks)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return _configure(bench)


def build_parser() -> argparse.ArgumentParser:
    return _configure(
        _Parser(
            prog="nbrefine bench",
            description=DESCRIPTION,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )


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


def options(args: argparse.Namespace) -> BenchOptions:
    if args.rounds < 1:
        raise BenchError("--rounds must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise BenchError("--limit must be at least 1")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise BenchError("--timeout must be a positive number of seconds")
    if args.case_timeout is not None and not (args.case_timeout > 0 and math.isfinite(args.case_timeout)):
        raise BenchError("--case-timeout must be a positive number of seconds")
    provider = args.provider or "offline"
    per_round = args.timeout + (15.0 if provider == "offline" else 180.0)
    case_timeout = args.case_timeout or 30.0 + args.timeout + args.rounds * per_round
    from .cli import CliError, check_writable

    for flag, value in (("--json", args.json), ("--plot", args.plot)):
        if value is not None:
            try:
                check_writable(Path(value), flag)  # a missing folder is made when writing
            except CliError as err:
                raise BenchError(str(err)) from None
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
        quick_fixes=not args.no_quick_fixes,
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
        raise BenchError(f"line {line}: not a JSON object")
    if {"buggy_program", "tests"} <= record.keys():
        name = str(record.get("name") or f"case{line}")
        return "quixbugs", Case(name, f"{record['buggy_program'].rstrip()}\n\n{record['tests'].strip()}\n")
    if {"prompt", "buggy_solution", "test", "entry_point"} <= record.keys():
        name = str(record.get("task_id") or record["entry_point"])
        program = record["prompt"] + record["buggy_solution"]
        check = record["test"] + "\ncheck(" + record["entry_point"] + ")"
        return "humanevalfix", Case(name, f"{program.rstrip()}\n\n{check.strip()}\n")
    raise BenchError(
        f"line {line}: unknown format (need QuixBugs fields buggy_program+tests or HumanEvalFix "
        "fields prompt+buggy_solution+test+entry_point)"
    )


def load_corpus(path: Path, limit: int | None) -> Corpus:
    if not path.exists():
        raise BenchError(f"{path}: no such file or folder")
    if path.is_dir():
        notebooks = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
        if not notebooks:
            raise BenchError(f"{path}: empty corpus (no .ipynb notebooks in the folder)")
        return Corpus("notebooks", notebooks=notebooks)
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as err:
        raise BenchError(f"{path}: cannot read it as UTF-8 text: {err}") from None
    kinds: set[str] = set()
    cases: list[Case] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise BenchError(f"{path}: unknown format (line {number} is not JSON)") from None
        try:
            kind, case = _case_from(record, number)
        except BenchError as err:
            raise BenchError(f"{path}: {err}") from None
        kinds.add(kind)
        cases.append(case)
        if limit is not None and len(cases) >= limit:
            break
    if not cases:
        raise BenchError(f"{path}: empty corpus (no cases)")
    if len(kinds) > 1:
        raise BenchError(f"{path}: unknown format (mixes QuixBugs and HumanEvalFix records)")
    return Corpus(kinds.pop(), cases=cases)


# --------------------------------------------------------------------------- kernel-side helpers
# These run inside the kernel (imported there as nbrefine.benchcmd): they bind no user names.


def _is_cell_file(filename: str) -> bool:
    return "ipykernel_" in filename or filename.startswith(("<ipython-input-", "<cell"))


def _kernel_prepare(hang_s: float, scripted_path: str = "") -> None:
    """Arm a one-shot timer that stops a hanging buggy program with TimeoutError, and point the
    scripted provider at this case's remaining replies. The timer only fires into the cell body
    (run by %%refine inside the outer cell): never into nbrefine's capture or loop."""
    import signal

    if scripted_path:
        os.environ["NBREFINE_SCRIPTED_REPLIES"] = scripted_path

    def on_alarm(signum: int, frame: Any) -> None:
        depth = 0
        while frame is not None:
            depth += _is_cell_file(frame.f_code.co_filename)
            frame = frame.f_back
        if depth >= 2:  # the outer %%refine cell and the body it runs
            raise TimeoutError(_HANG_MESSAGE.format(s=hang_s))

    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)


def _kernel_disarm() -> None:
    import signal

    signal.setitimer(signal.ITIMER_REAL, 0)


def _kernel_session(request_id: str) -> dict[str, Any] | None:
    """In the kernel: the session of the case run by ``request_id`` (see ``Kernel.session``)."""
    from .engine import session_for_request

    s = session_for_request(request_id)
    if s is None:
        return None
    attempts = []
    for a in s.attempts:
        reply = a.reply
        attempts.append(
            {
                "number": a.number,
                "ok": a.ok,
                "error_type": a.error_type,
                "outcome": a.outcome.status if a.outcome is not None else None,
                "summary": a.summary(),
                "note": a.note,
                "cycle": a.cycle,
                "regression": a.regression,
                "declined": reply is not None and reply.stop_reason == "declined",
                "provider_error": a.note.startswith("provider error"),
                "model": reply.model if reply is not None else None,
                "input_tokens": reply.input_tokens if reply is not None else 0,
                "output_tokens": reply.output_tokens if reply is not None else 0,
                "duration_s": a.duration_s,
            }
        )
    failure = s.failure
    return {
        "status": s.status,
        "message": s.message,
        "stop_reason": s.result.stop_reason if s.result is not None else "",
        "error_type": failure.error_type if failure is not None else None,
        "error_message": failure.message if failure is not None else "",
        "attempts": attempts,
    }


# --------------------------------------------------------------------------- results


@dataclass
class CaseResult:
    name: str
    status: str  # "fixed" | "unfixed" | "no_failure" | "error" | "timeout"
    error_type: str | None = None
    error_message: str = ""
    fixed_round: int | None = None
    stop_reason: str = ""
    message: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def failing(self) -> bool:
        return self.status != "no_failure"

    @property
    def tokens(self) -> tuple[int, int]:
        return (
            sum(int(a.get("input_tokens") or 0) for a in self.attempts),
            sum(int(a.get("output_tokens") or 0) for a in self.attempts),
        )

    @property
    def declined(self) -> bool:
        return self.stop_reason == "declined" or any(a.get("declined") for a in self.attempts[-1:])

    @property
    def provider_error(self) -> bool:
        return self.stop_reason == "provider_error" or any(a.get("provider_error") for a in self.attempts)

    def to_json(self) -> dict[str, Any]:
        tin, tout = self.tokens
        return {
            "name": self.name,
            "status": self.status,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "fixed_round": self.fixed_round,
            "stop_reason": self.stop_reason,
            "message": self.message,
            "declined": self.declined,
            "provider_error": self.provider_error,
            "cycles": sum(bool(a.get("cycle")) for a in self.attempts),
            "regressions": sum(bool(a.get("regression")) for a in self.attempts),
            "input_tokens": tin,
            "output_tokens": tout,
            "duration_s": round(self.duration_s, 3),
            "attempts": self.attempts,
        }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def summarize(results: list[CaseResult], rounds: int) -> dict[str, Any]:
    failing = [r for r in results if r.failing]
    n = len(failing)
    fixed = [r for r in failing if r.status == "fixed"]
    cumulative = []
    for k in range(1, rounds + 1):
        count = sum(r.fixed_round is not None and r.fixed_round <= k for r in fixed)
        cumulative.append({"round": k, "fixed": count, "rate": _rate(count, n)})
    by_type: dict[str, dict[str, Any]] = {}
    for r in failing:
        row = by_type.setdefault(r.error_type or "?", {"failing": 0, "fixed": 0})
        row["failing"] += 1
        row["fixed"] += r.status == "fixed"
    for row in by_type.values():
        row["rate"] = _rate(row["fixed"], row["failing"])
    tokens = [r.tokens for r in failing]
    return {
        "cases": len(results),
        "no_failure": len(results) - n,
        "failing": n,
        "fixed": len(fixed),
        "unfixed": n - len(fixed),
        "first_attempt_success_rate": cumulative[0]["rate"],
        "cumulative_success": cumulative,
        "by_error_type": dict(sorted(by_type.items(), key=lambda kv: (-kv[1]["failing"], kv[0]))),
        "cycles": sum(bool(a.get("cycle")) for r in failing for a in r.attempts),
        "regressions": sum(bool(a.get("regression")) for r in failing for a in r.attempts),
        "declined": sum(r.declined for r in failing),
        "provider_errors": sum(r.provider_error for r in failing),
        "case_timeouts": sum(r.status == "timeout" for r in failing),
        "errors": sum(r.status == "error" for r in failing),
        "tokens": {
            "input": sum(t[0] for t in tokens),
            "output": sum(t[1] for t in tokens),
            "median_input_per_case": _median([float(t[0]) for t in tokens]),
            "median_output_per_case": _median([float(t[1]) for t in tokens]),
        },
        "time": {
            "total_s": round(sum(r.duration_s for r in results), 3),
            "median_per_case_s": round(_median([r.duration_s for r in failing]), 3),
        },
    }


# --------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, opts: BenchOptions) -> None:
        self.opts = opts
        self.refine_line = f"%%refine --max-attempts {opts.rounds} --timeout {opts.timeout:g}"
        self.scripted: list[str] | None = None
        self.scratch = tempfile.TemporaryDirectory(prefix="nbrefine-bench-")
        if opts.provider == "scripted":
            path = os.environ.get("NBREFINE_SCRIPTED_REPLIES", "")
            try:
                replies = json.loads(Path(path).read_text()) if path else None
            except (OSError, ValueError) as err:
                raise BenchError(f"cannot read scripted replies from {path}: {err}") from None
            if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
                raise BenchError(
                    "--provider scripted needs NBREFINE_SCRIPTED_REPLIES: a JSON list of strings"
                )
            self.scripted = replies
        self.offline_model = "offline"
        try:
            from .providers.offline import OfflineProvider

            self.offline_model = str(OfflineProvider().model)
        except Exception:
            pass

    def setup_code(self) -> str:
        lines = ["%load_ext nbrefine", "%config Refine.display = 'text'"]
        lines.append(f"%config Refine.provider = {self.opts.provider!r}")
        if self.opts.model is not None:
            lines.append(f"%config Refine.model = {self.opts.model!r}")
        if not self.opts.quick_fixes:
            lines.append("%config Refine.quick_fixes = False")
        return "\n".join(lines)

    def _prepare(self, kernel: Any, reset: bool) -> None:
        scripted_path = ""
        if self.scripted is not None:
            file = Path(self.scratch.name) / f"replies-{time.monotonic_ns()}.json"
            file.write_text(json.dumps(self.scripted))
            scripted_path = str(file)
        code = f"{_HELPERS}._kernel_prepare({self.opts.timeout!r}, {scripted_path!r})"
        if reset:
            code = "%reset -f\n" + code
        run = kernel.run(code, 0, store_history=False)
        if not run.ok:
            raise BenchError(f"the kernel cannot prepare a case: {run.ename}: {run.evalue}")

    def _consume(self, attempts: list[dict[str, Any]]) -> None:
        """The scripted replies this case used are gone for the next one (one list per run)."""
        if self.scripted is None:
            return
        used = sum(1 for a in attempts if a.get("model") not in (None, self.offline_model))
        del self.scripted[:used]

    def run_case(self, kernel: Any, name: str, code: str, *, reset: bool) -> CaseResult:
        """Run ``code`` under %%refine; the result (status "no_failure" when it passes)."""
        from .cli import KernelDied

        started = time.perf_counter()
        self._prepare(kernel, reset)
        kernel.client.timeout = self.opts.case_timeout
        try:
            run = kernel.run(f"{self.refine_line}\n{code}", 0, store_history=False)
        except KernelDied as err:
            raise BenchError(f"the kernel died while case {name} ran: {err}") from None
        finally:
            kernel.client.timeout = 60
        result = CaseResult(name, "unfixed")
        if run.timed_out:
            result.status = "timeout"
            result.message = f"the case did not finish within {self.opts.case_timeout} s (interrupted)"
        elif run.ok:
            result.status = "no_failure"
        else:
            session = kernel.session(run, 0, helper=f"{_HELPERS}._kernel_session")
            if session is None:
                result.status = "error"
                result.error_type = run.ename or None
                result.message = f"no %%refine session: {run.ename}: {_one_line(run.evalue)}"
            else:
                self.take_session(result, session)
        kernel.run(f"{_HELPERS}._kernel_disarm()", 0, store_history=False)
        result.duration_s = time.perf_counter() - started
        return result

    def take_session(self, result: CaseResult, session: dict[str, Any]) -> None:
        result.attempts = list(session.get("attempts") or [])
        self._consume(result.attempts)
        result.error_type = session.get("error_type")
        result.error_message = _one_line(session.get("error_message") or "")
        result.stop_reason = session.get("stop_reason") or ""
        result.message = _one_line(session.get("message") or "")
        status = session.get("status")
        if status == "no_error":
            result.status = "no_failure"
        elif status == "fixed":
            result.status = "fixed"
            result.fixed_round = next((a["number"] for a in result.attempts if a.get("ok")), None)
        elif status == "error":
            result.status = "error"
            result.stop_reason = result.stop_reason or (
                "provider_error" if any(a.get("provider_error") for a in result.attempts) else "error"
            )
            if not result.attempts and "provider" in result.message.lower():
                result.stop_reason = "provider_error"
        else:
            result.status = "unfixed"

    def run(self, corpus: Corpus) -> list[CaseResult]:
        from .cli import CliError, _kernel, _nbf

        results: list[CaseResult] = []
        folder = self.opts.corpus.resolve() if corpus.kind == "notebooks" else Path(self.scratch.name)
        scratch_nb = _nbf().v4.new_notebook(cells=[_nbf().v4.new_code_cell("")])
        try:
            with _kernel(scratch_nb, self.opts.kernel, folder, 60) as kernel:
                setup = kernel.run(self.setup_code(), 0, store_history=False)
                if not setup.ok:
                    raise BenchError(f"the kernel cannot load nbrefine: {setup.ename}: {setup.evalue}")
                if corpus.kind == "notebooks":
                    self._run_notebooks(kernel, corpus, results)
                else:
                    total = len(corpus.cases)
                    for i, case in enumerate(corpus.cases, 1):
                        result = self.run_case(kernel, case.name, case.code, reset=True)
                        results.append(result)
                        _progress(f"[{i}/{total}] {case.name}: {describe(result)}")
        except CliError as err:
            raise BenchError(str(err)) from None
        return results

    def _run_notebooks(self, kernel: Any, corpus: Corpus, results: list[CaseResult]) -> None:
        for path in corpus.notebooks:
            try:
                notebook = _read_notebook(path)
            except BenchError as err:
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


def _read_notebook(path: Path) -> Any:
    from .cli import CliError, read_notebook

    try:
        return read_notebook(path)
    except CliError as err:
        raise BenchError(str(err)) from None


def describe(result: CaseResult) -> str:
    if result.status == "no_failure":
        return "no failure (left out of rates)"
    head = f"{result.error_type} → " if result.error_type else ""
    if result.status == "fixed":
        return f"{head}fixed at round {result.fixed_round} ({result.duration_s:.1f} s)"
    why = result.stop_reason or result.status
    detail = f": {_clip(result.message, 120)}" if result.message else ""
    return f"{head}{result.status} [{why}]{detail} ({result.duration_s:.1f} s)"


# --------------------------------------------------------------------------- reports


def _pct(rate: float | None) -> str:
    return "   -" if rate is None else f"{100 * rate:5.1f}%"


def report_text(summary: dict[str, Any], opts: BenchOptions, kind: str, wall_s: float) -> str:
    s = summary
    model = f", model {opts.model}" if opts.model else ""
    lines = [
        f"nbrefine bench {opts.corpus} ({kind}): {s['cases']} cases, provider {opts.provider}{model}, "
        f"{opts.rounds} round(s), {wall_s:.1f} s",
        "",
        f"  {'cases':<34}{s['cases']:>6}",
        f"  {'no failure (left out of rates)':<34}{s['no_failure']:>6}",
        f"  {'failing':<34}{s['failing']:>6}",
        f"  {'fixed':<34}{s['fixed']:>6}",
        f"  {'first-attempt success':<34}{_pct(s['first_attempt_success_rate']):>6}",
    ]
    for row in s["cumulative_success"]:
        label = f"cumulative success, round {row['round']}"
        lines.append(f"  {label:<34}{_pct(row['rate']):>6}  ({row['fixed']}/{s['failing']})")
    lines += [
        f"  {'cycles detected':<34}{s['cycles']:>6}",
        f"  {'regressions detected':<34}{s['regressions']:>6}",
        f"  {'declined':<34}{s['declined']:>6}",
        f"  {'provider errors':<34}{s['provider_errors']:>6}",
        f"  {'case timeouts':<34}{s['case_timeouts']:>6}",
        f"  {'tokens in / out (total)':<34}{s['tokens']['input']:>6} / {s['tokens']['output']}",
        f"  {'tokens in / out (median per case)':<34}"
        f"{s['tokens']['median_input_per_case']:>6g} / {s['tokens']['median_output_per_case']:g}",
        f"  {'time per case (median)':<34}{s['time']['median_per_case_s']:>6.2f} s",
        f"  {'time (total, cases)':<34}{s['time']['total_s']:>6.1f} s",
    ]
    if s["by_error_type"]:
        width = max(16, *(len(k) for k in s["by_error_type"]))
        lines += ["", f"  {'original error':<{width}}  failing  fixed    rate"]
        for name, row in s["by_error_type"].items():
            lines.append(f"  {name:<{width}}  {row['failing']:>7}  {row['fixed']:>5}  {_pct(row['rate']):>6}")
    if opts.provider == "offline" and s["failing"] and s["declined"] >= s["failing"] - s["fixed"] > 0:
        lines += [
            "",
            "  (the offline provider repairs typos and missing imports, not logic: declining these",
            "  is the expected result; --provider anthropic with ANTHROPIC_API_KEY asks a model)",
        ]
    return "\n".join(lines)


def report_json(
    summary: dict[str, Any], results: list[CaseResult], opts: BenchOptions, kind: str, wall_s: float
) -> str:
    from . import __version__

    data = {
        "nbrefine_version": __version__,
        "corpus": str(opts.corpus),
        "format": kind,
        "provider": opts.provider,
        "model": opts.model,
        "rounds": opts.rounds,
        "timeout_s": opts.timeout,
        "case_timeout_s": opts.case_timeout,
        "quick_fixes": opts.quick_fixes,
        "wall_s": round(wall_s, 3),
        "summary": summary,
        "cases": [r.to_json() for r in results],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_plot(summary: dict[str, Any], opts: BenchOptions, path: Path) -> str:
    """Cumulative success per round as a PNG; the one line to print about it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    rows = summary["cumulative_success"]
    xs = [row["round"] for row in rows]
    ys = [100.0 * (row["rate"] or 0.0) for row in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=120)
    try:
        ax.plot(xs, ys, marker="o")
        ax.set_xticks(xs)
        ax.set_ylim(0, 100)
        ax.set_xlabel("round (attempt)")
        ax.set_ylabel("cumulative success (%)")
        ax.set_title(f"{opts.corpus.name}: {opts.provider}, {summary['failing']} failing cases", fontsize=9)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return f"plot: {path}"


# --------------------------------------------------------------------------- main


def bench(opts: BenchOptions) -> int:
    corpus = load_corpus(opts.corpus, opts.limit)
    from .cli import CliError, check_kernel, write_atomic

    try:
        check_kernel(opts.kernel)
    except CliError as err:
        raise BenchError(str(err)) from None
    from .providers import available_providers

    if opts.provider not in ("auto", *available_providers()):
        raise BenchError(
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
        raise BenchError(f"{opts.corpus}: empty corpus (no failing code cells)")
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
    except BenchError as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except OSError as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("nbrefine: interrupted", file=sys.stderr, flush=True)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nbrefine.benchcmd CORPUS ...`` (the same as ``nbrefine bench``)."""
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else None)
    except BenchError as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 0
    return run(args)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
