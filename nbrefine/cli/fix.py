"""``nbrefine fix``: the command line of the headless repair, for one notebook or many.

One notebook file: :func:`fix` runs it (:func:`~nbrefine.headless.run_notebook`), writes the
repaired notebook and the ``--report``, and prints the summary. Several notebooks, a folder, a glob,
or any batch option: :func:`batch_options` hands the run to :mod:`nbrefine.batch`. This module only
turns the command line into options and the outcome into files and an exit status.

May import: :mod:`nbrefine.batch`, :mod:`nbrefine.reports`, :mod:`nbrefine.headless`, the engine and
below (and traitlets, whose errors the traits raise), :mod:`nbrefine._version` and the rest of this
package; never the IPython side (magics, panel, auto, write-back).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import BadInputError
from .._version import __version__
from ..headless import (
    EXIT_FAILING,
    EXIT_OK,
    FixOptions,
    check_kernel,
    choose_provider,
    kernel_name_of,
    notebook_text,
    read_notebook,
    run_notebook,
)
from ..headless.settings import check_values
from ..reports.files import check_writable, write_atomic
from ..reports.notebook import report_json, report_markdown, summary_text
from ._argparse import add_trait_flags

if TYPE_CHECKING:
    from ..batch.client import BatchOptions
    from ..batch.gate import GateLimits
    from ..batch.notebook_job import JobSettings

__all__ = ["add_parser", "batch_options", "fix", "options", "parse_cells", "run"]

DESCRIPTION = """\
Run NOTEBOOK cell by cell in a real kernel (in the notebook's folder). Each code cell runs
under %%refine; when one fails, a fix that passed its trial run in a fork of the kernel state
is accepted: it runs for real, the state advances, and it goes into the cell with its
provenance in the cell's metadata (metadata.nbrefine). Cells that stay broken keep their error
output, and the run goes on. A progress line per cell goes to stderr; the summary, with the
diff of every fix, to stdout.

Several notebooks, folders (searched recursively) or glob patterns run in parallel, one kernel
each (--jobs): one progress bar, a line per notebook, a summary over all of them, and reports
for CI (JUnit) and for a class (an instructor's page, a feedback file per student).
"""

EPILOG = """\
exit status: 0 every cell passes at the end, 1 some cell still fails (or the kernel died),
2 bad usage or input, 130 interrupted (nothing is written). Over several notebooks: 0 all pass,
1 some cell still fails (--fail-on any: failed at all), 2 some input was bad (the others still
run), 130 interrupted (what finished is written, and the reports).

Provider 'auto' (the default, or $NBREFINE_PROVIDER) is anthropic when ANTHROPIC_API_KEY is set,
else offline: the offline quick fixes (typos, missing imports, wrong column names, ...) need no key.

examples:
  nbrefine fix analysis.ipynb                      # writes analysis.fixed.ipynb
  nbrefine fix analysis.ipynb --in-place           # keeps analysis.ipynb.bak
  nbrefine fix analysis.ipynb --dry-run --report report.md
  nbrefine fix analysis.ipynb --cells 3,5-7 --provider anthropic --max-attempts 5
  nbrefine fix exercise.ipynb --mode hint --max-hints 3 --report hints.md
  nbrefine fix notebooks/ -o fixed/ --report summary.md --report junit.xml
  nbrefine fix course/submitted --mode hint -o graded/ --report class.html
"""

_TEACHING_NOTE = {
    "mode": "Here a failing cell gets the hint or explanation (in the report and the notebook) "
    "instead of a fix.",
}
#: With --batch: the jobs mostly wait for their batch, so more of them run at once (each round's
#: batch holds the requests of the notebooks running), and a cell may wait for hours.
BATCH_JOBS = 8
DEFAULT_CELL_TIMEOUT = 600.0
BATCH_CELL_TIMEOUT = 25 * 3600.0  # Anthropic ends every batch within 24 hours
_BATCH_ONLY = ("jobs", "cluster", "record", "fail_on", "max_requests", "budget_tokens", "budget_usd")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``fix`` command to ``parser.add_subparsers(...)``."""
    fix: argparse.ArgumentParser = commands.add_parser(
        "fix",
        allow_abbrev=False,  # the class says so too; explicit, as the parent could be any parser
        help="run a notebook in a real kernel and repair the cells that fail",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fix.add_argument(
        "notebook",
        nargs="+",
        metavar="NOTEBOOK",
        help="notebooks, folders (searched recursively) or glob patterns ('**' too) to run and repair",
    )
    out = fix.add_mutually_exclusive_group()
    out.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="where to write: OUT.ipynb for one notebook (default: NAME.fixed.ipynb next to it); "
        "a folder for several, mirroring the input tree",
    )
    out.add_argument(
        "--in-place", action="store_true", help="overwrite NOTEBOOK (atomically; keeps NAME.ipynb.bak)"
    )
    out.add_argument("--dry-run", action="store_true", help="run and report, write no notebook")
    fix.add_argument(
        "--apply-proposals",
        action="store_true",
        help="also apply fixes that run but that nothing checks (they change what a cell computes, "
        "a literal or an index, with no assert that pins the result); by default they are reported",
    )
    add_trait_flags(fix, ("provider", "model", "max_attempts", "timeout", "early_trials"))
    fix.add_argument(
        "--cell-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds one cell (its run and its repair) may take (default: 600)",
    )
    fix.add_argument(
        "--report",
        action="append",
        metavar="FILE",
        help="also write a report, by its extension: .json or .md (for several notebooks, the summary "
        "over all), .xml (JUnit, for CI), .html (the class report for an instructor); repeatable",
    )
    fix.add_argument("--kernel", metavar="NAME", help="kernel name (default: the notebook's, else python3)")
    fix.add_argument(
        "--cells",
        metavar="LIST",
        help="repair only these code cells (1-based, e.g. 3,5-7); the others still run",
    )
    add_trait_flags(fix, ("quick_fixes", "mode", "max_hints"), notes=_TEACHING_NOTE)
    _add_batch_options(fix)
    return fix


def _add_batch_options(fix: argparse.ArgumentParser) -> None:
    from ..reports.summary import FAIL_ON

    batch = fix.add_argument_group(
        "several notebooks (with a single notebook, any of these but -v makes a batch of one)"
    )
    batch.add_argument(
        "--jobs", type=int, metavar="N", help="notebooks run at once, one kernel each (default: the cores)"
    )
    batch.add_argument(
        "--resume",
        action="store_true",
        help="skip the notebooks an earlier run with the same settings finished (see --record)",
    )
    batch.add_argument(
        "--record",
        metavar="FILE",
        help="the run record, one JSON line per notebook (default: nbrefine-run.jsonl in the -o folder, "
        "else here)",
    )
    batch.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        help="what fails a notebook (exit 1, JUnit failure): 'unfixed' (default) a cell still "
        "failing, 'any' a cell that failed at all, even if it was fixed",
    )
    batch.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each notebook as a task on this running dask.distributed scheduler (e.g. "
        "tcp://10.0.0.5:8786; needs nbrefine[dask]); the results come back here and are written here",
    )
    batch.add_argument(
        "--batch",
        action="store_true",
        help="send each round's model requests, over all notebooks, as one Anthropic Message Batch "
        "(half price; a round takes as long as its batch, minutes to hours; --jobs defaults to 8 and "
        "--cell-timeout to 25 h); --resume takes up the batches an interrupted run sent",
    )
    batch.add_argument(
        "--max-requests",
        type=int,
        metavar="N",
        help="model requests in flight at once, over all jobs (default: 4); a 429 pauses every job",
    )
    batch.add_argument(
        "--budget-tokens", type=int, metavar="N", help="most model tokens the whole batch may use"
    )
    batch.add_argument(
        "--budget-usd", type=float, metavar="X", help="most money (USD) the whole batch may spend"
    )
    talk = batch.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="also show every cell's line")
    talk.add_argument("-q", "--quiet", action="store_true", help="no progress, one line at the end (CI)")


def run(args: argparse.Namespace) -> int:
    """Run ``nbrefine fix`` for parsed ``args``; its exit status."""
    if is_batch(args):
        from ..batch.client import run_batch

        return run_batch(batch_options(args))
    return fix(options(args))


# --------------------------------------------------------------------------- one notebook


def parse_cells(text: str) -> frozenset[int]:
    """``"3,5-7"`` → {3, 5, 6, 7} (1-based code-cell numbers)."""
    chosen: set[int] = set()
    bad = BadInputError(f"--cells {text!r}: use 1-based code-cell numbers and ranges, e.g. 3,5-7")
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise bad from None
        if first < 1 or last < first:
            raise bad
        chosen.update(range(first, last + 1))
    if not chosen:
        raise bad
    return frozenset(chosen)


def _check_trait(name: str, value: Any, flag: str) -> None:
    """``value`` of ``flag`` by the rule of the ``Refine`` trait ``name`` (one line, naming it)."""
    from traitlets import TraitError

    from ..engine.config import Refine

    try:
        Refine.validated(name, value, option=flag)
    except TraitError as err:
        raise BadInputError(str(err)) from None


def _trait_values(args: argparse.Namespace) -> dict[str, Any]:
    """The Refine traits the command line sets (checked), and the cell timeout."""
    values = {name: getattr(args, name) for name in ("provider", "model", "max_attempts", "timeout")}
    values.update(
        quick_fixes=args.quick_fixes is not False,
        early_trials=args.early_trials is not False,
        mode=args.mode,
        max_hints=args.max_hints,
    )
    check_values(values)
    if not (args.cell_timeout > 0 and math.isfinite(args.cell_timeout)):
        raise BadInputError("--cell-timeout must be a positive number of seconds")
    return values


def options(args: argparse.Namespace) -> FixOptions:
    """The options of a run over one notebook file; :class:`BadInputError` (one line) otherwise."""
    notebook = Path(args.notebook[0])
    report = args.report[0] if args.report else None
    if report is not None and Path(report).suffix.lower() not in (".json", ".md"):
        raise BadInputError(f"--report {report}: the file name must end in .json or .md")
    values = _trait_values(args)
    if args.dry_run:
        output = None
    elif args.in_place:
        output = notebook
    elif args.output:
        output = Path(args.output)
    else:
        output = notebook.with_name(notebook.stem + ".fixed.ipynb")
    return FixOptions(
        notebook=notebook,
        output=output,
        in_place=bool(args.in_place),
        cell_timeout=max(1, math.ceil(args.cell_timeout)),
        report=Path(report) if report is not None else None,
        kernel=args.kernel,
        cells=parse_cells(args.cells) if args.cells is not None else None,
        apply_proposals=bool(getattr(args, "apply_proposals", False)),
        **values,
    )


def fix(opts: FixOptions) -> int:
    """Repair one notebook; write it and its report; print the summary. The exit status."""
    notebook = read_notebook(opts.notebook)
    _check_outputs(opts)
    check_kernel(kernel_name_of(opts, notebook))
    choice = choose_provider(opts)

    def starting(kernel_name: str) -> None:
        _progress(f"nbrefine {__version__}: fixing {opts.notebook} in kernel {kernel_name!r}")
        _progress(choice.describe())

    folder = opts.notebook.resolve().parent
    run = run_notebook(opts, choice, notebook, folder, on_start=starting).run

    code = EXIT_OK if run.all_pass else EXIT_FAILING
    problems: list[str] = []
    unchanged = opts.in_place and all(c.fixed_source is None for c in run.cells)
    written = None if opts.output is None or unchanged else _write_notebook(opts, notebook, problems)
    if written:
        note = f"wrote {written}" + (f" (backup: {opts.notebook.name}.bak)" if opts.in_place else "")
    elif unchanged:
        note = f"no cell changed: {opts.notebook} left as it was (no backup made)"
    else:
        note = "dry run: no notebook written" if opts.output is None else "no notebook written"
    if opts.report is not None:
        render = report_json if opts.report.suffix.lower() == ".json" else report_markdown
        try:
            write_atomic(opts.report, render(run, opts, choice, written, code))
            note += f"; report: {opts.report}"
        except OSError as err:
            problems.append(f"cannot write the report {opts.report}: {err.strerror or err}")
    print(summary_text(run, opts, choice, note), flush=True)
    if run.stopped:
        _progress(f"nbrefine: {run.stopped}")
    if problems:
        raise BadInputError("; ".join(problems))
    return code


def _check_outputs(opts: FixOptions) -> None:
    """Fail before the run when its outputs could not be written at its end."""
    if opts.output is not None:
        if not opts.in_place and opts.output.resolve() == opts.notebook.resolve():
            raise BadInputError(f"{opts.output}: that is the input notebook; use --in-place to overwrite it")
        check_writable(opts.output, "output")
        if opts.in_place:
            check_writable(opts.notebook.with_name(opts.notebook.name + ".bak"), "backup")
    if opts.report is not None:
        check_writable(opts.report, "--report")


def _write_notebook(opts: FixOptions, notebook: Any, problems: list[str]) -> str | None:
    """Write the repaired notebook (over the input with a backup, for --in-place); where, or None."""
    assert opts.output is not None
    text = notebook_text(notebook)
    try:
        if opts.in_place:
            backup = opts.notebook.with_name(opts.notebook.name + ".bak")
            mode = opts.notebook.stat().st_mode & 0o7777
            write_atomic(backup, opts.notebook.read_bytes(), mode=mode)
            write_atomic(opts.notebook, text, mode=mode)
        else:
            write_atomic(opts.output, text)
    except OSError as err:
        problems.append(f"cannot write {opts.output}: {err.strerror or err}")
        return None
    return str(opts.output)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- several notebooks


def is_batch(args: argparse.Namespace) -> bool:
    """Whether the command is a batch: more than a single notebook file, or a batch option."""
    if len(args.notebook) != 1:
        return True
    only = args.notebook[0]
    if glob.has_magic(only) or Path(only).is_dir():
        return True
    reports = args.report or []
    if len(reports) > 1 or any(Path(r).suffix.lower() in (".xml", ".html") for r in reports):
        return True
    flags = args.resume or args.quiet or args.batch
    return flags or any(getattr(args, name) is not None for name in _BATCH_ONLY)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def batch_options(args: argparse.Namespace) -> BatchOptions:
    """The batch's :class:`~nbrefine.batch.client.BatchOptions`; :class:`BadInputError` (one
    line) for bad usage."""
    from ..batch.client import REPORT_SUFFIXES, BatchOptions
    from ..batch.display import NORMAL, QUIET, VERBOSE

    if args.batch and args.cell_timeout == DEFAULT_CELL_TIMEOUT:
        args.cell_timeout = BATCH_CELL_TIMEOUT  # a cell waits for its batch
    settings = _settings(args)
    output_dir = _output_dir(args)
    reports = tuple(Path(r) for r in args.report or [])
    for report in reports:
        if report.suffix.lower() not in REPORT_SUFFIXES:
            raise BadInputError(
                f"--report {report}: the file name must end in .md or .json (summary), .xml (JUnit) "
                "or .html (class report)"
            )
        check_writable(report, "--report")
    record = Path(args.record) if args.record else (output_dir or Path.cwd()) / "nbrefine-run.jsonl"
    check_writable(record, "--record")
    if settings.kernel is not None:
        check_kernel(settings.kernel)
    jobs = (BATCH_JOBS if args.batch else default_jobs()) if args.jobs is None else args.jobs
    if jobs < 1:
        raise BadInputError("--jobs must be at least 1")
    choice = choose_provider(settings.fix_options(Path(".")))
    if args.batch:
        _check_batch(args, choice.name)
    if args.cluster is not None:
        _check_cluster(args)
    return BatchOptions(
        arguments=tuple(args.notebook),
        settings=settings,
        choice=choice,
        output_dir=output_dir,
        in_place=bool(args.in_place),
        dry_run=bool(args.dry_run),
        jobs=jobs,
        resume=bool(args.resume),
        record=record,
        reports=reports,
        fail_on=args.fail_on or "unfixed",
        verbosity=QUIET if args.quiet else VERBOSE if args.verbose else NORMAL,
        limits=_limits(args, jobs),
        cluster=args.cluster,
        batch=bool(args.batch),
    )


def _check_batch(args: argparse.Namespace, provider: str) -> None:
    if provider != "anthropic":
        raise BadInputError(
            f"--batch needs the anthropic provider (Message Batches are Anthropic's), not {provider}: "
            "set ANTHROPIC_API_KEY, or --provider anthropic"
        )
    if not os.environ.get("ANTHROPIC_API_KEY", "").strip():
        raise BadInputError("--batch needs ANTHROPIC_API_KEY: the batches are sent from here")
    if args.cluster is not None:
        raise BadInputError("--batch is not with --cluster (yet): the kernels hand their requests over here")
    if args.max_requests is not None:
        raise BadInputError(
            "--max-requests does not apply with --batch: each round's requests go as one batch"
        )


def _check_cluster(args: argparse.Namespace) -> None:
    from ..batch.cluster import require_distributed

    if not args.cluster.strip():
        raise BadInputError("--cluster needs the scheduler's address, e.g. tcp://10.0.0.5:8786")
    if args.jobs is not None:
        raise BadInputError("--jobs does not apply with --cluster: the cluster's workers run the notebooks")
    require_distributed()


def _settings(args: argparse.Namespace) -> JobSettings:
    from ..batch.notebook_job import JobSettings

    values = _trait_values(args)
    return JobSettings(
        cell_timeout=max(1, math.ceil(args.cell_timeout)),
        kernel=args.kernel,
        cells=tuple(sorted(parse_cells(args.cells))) if args.cells is not None else None,
        **values,
    )


def _output_dir(args: argparse.Namespace) -> Path | None:
    if not args.output:
        return None
    folder = Path(args.output)
    if folder.suffix.lower() == ".ipynb" or folder.is_file():
        raise BadInputError(f"-o {folder}: with several notebooks (or a batch option), -o names a folder")
    check_writable(folder / ".nbrefine-check", "-o")
    return folder


def _limits(args: argparse.Namespace, jobs: int) -> GateLimits:
    from ..batch.gate import GateLimits

    # With --batch a request waits for its round's batch: every job may have one or two waiting.
    requests = (2 * jobs if args.batch else 4) if args.max_requests is None else args.max_requests
    if requests < 1:
        raise BadInputError("--max-requests must be at least 1")
    for name in ("budget_tokens", "budget_usd"):  # the whole batch's, by the session traits' rules
        _check_trait(name, getattr(args, name), "--" + name.replace("_", "-"))
    return GateLimits(requests, args.budget_tokens, args.budget_usd)
