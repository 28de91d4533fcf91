"""``nbrefine fix`` over several notebooks: from the parsed options to a batch run.

``cli`` parses the command line; when it names several notebooks, a folder or a glob, or asks
for anything only a batch does (``--jobs``, ``--resume``, a JUnit or class report, ...), it hands
the options here. The run itself is :mod:`nbrefine.batch`.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
from pathlib import Path

from .batch.display import NORMAL, QUIET, VERBOSE
from .batch.gate import GateLimits
from .batch.job import JobSettings
from .batch.runner import REPORT_SUFFIXES, BatchOptions, run_batch

__all__ = ["is_batch", "options", "run"]

_BATCH_ONLY = ("jobs", "cluster", "record", "fail_on", "max_requests", "budget_tokens", "budget_usd")


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
    return args.resume or args.quiet or any(getattr(args, name) is not None for name in _BATCH_ONLY)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def options(args: argparse.Namespace) -> BatchOptions:
    """The batch's options; :class:`~nbrefine.cli.CliError` (one line) for bad usage."""
    from .cli import CliError, check_kernel, check_writable, choose_provider

    settings = _settings(args)
    output_dir = _output_dir(args)
    reports = tuple(Path(r) for r in args.report or [])
    for report in reports:
        if report.suffix.lower() not in REPORT_SUFFIXES:
            raise CliError(
                f"--report {report}: the file name must end in .md or .json (summary), .xml (JUnit) "
                "or .html (class report)"
            )
        check_writable(report, "--report")
    record = Path(args.record) if args.record else (output_dir or Path.cwd()) / "nbrefine-run.jsonl"
    check_writable(record, "--record")
    if settings.kernel is not None:
        check_kernel(settings.kernel)
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 1:
        raise CliError("--jobs must be at least 1")
    if args.cluster is not None:
        _check_cluster(args)
    return BatchOptions(
        arguments=tuple(args.notebook),
        settings=settings,
        choice=choose_provider(settings.fix_options(Path("."))),
        output_dir=output_dir,
        in_place=bool(args.in_place),
        dry_run=bool(args.dry_run),
        jobs=jobs,
        resume=bool(args.resume),
        record=record,
        reports=reports,
        fail_on=args.fail_on or "unfixed",
        verbosity=QUIET if args.quiet else VERBOSE if args.verbose else NORMAL,
        limits=_limits(args),
        cluster=args.cluster,
    )


def _check_cluster(args: argparse.Namespace) -> None:
    from .batch.cluster import require_distributed
    from .cli import CliError

    if not args.cluster.strip():
        raise CliError("--cluster needs the scheduler's address, e.g. tcp://10.0.0.5:8786")
    if args.jobs is not None:
        raise CliError("--jobs does not apply with --cluster: the cluster's workers run the notebooks")
    require_distributed()


def _settings(args: argparse.Namespace) -> JobSettings:
    from .cli import CliError, parse_cells

    if args.max_attempts is not None and args.max_attempts < 1:
        raise CliError("--max-attempts must be at least 1")
    if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise CliError("--timeout must be a positive number of seconds")
    if not (args.cell_timeout > 0 and math.isfinite(args.cell_timeout)):
        raise CliError("--cell-timeout must be a positive number of seconds")
    if args.max_hints is not None and args.max_hints < 1:
        raise CliError("--max-hints must be at least 1")
    return JobSettings(
        provider=args.provider,
        model=args.model,
        max_attempts=args.max_attempts,
        timeout=args.timeout,
        cell_timeout=max(1, math.ceil(args.cell_timeout)),
        kernel=args.kernel,
        cells=tuple(sorted(parse_cells(args.cells))) if args.cells is not None else None,
        quick_fixes=not args.no_quick_fixes,
        mode=args.mode,
        max_hints=args.max_hints,
    )


def _output_dir(args: argparse.Namespace) -> Path | None:
    from .cli import CliError, check_writable

    if not args.output:
        return None
    folder = Path(args.output)
    if folder.suffix.lower() == ".ipynb" or folder.is_file():
        raise CliError(f"-o {folder}: with several notebooks (or a batch option), -o names a folder")
    check_writable(folder / ".nbrefine-check", "-o")
    return folder


def _limits(args: argparse.Namespace) -> GateLimits:
    from .cli import CliError

    requests = 4 if args.max_requests is None else args.max_requests
    if requests < 1:
        raise CliError("--max-requests must be at least 1")
    if args.budget_tokens is not None and args.budget_tokens < 1:
        raise CliError("--budget-tokens must be at least 1")
    if args.budget_usd is not None and not (args.budget_usd > 0 and math.isfinite(args.budget_usd)):
        raise CliError("--budget-usd must be a positive amount")
    return GateLimits(requests, args.budget_tokens, args.budget_usd)


def run(opts: BatchOptions) -> int:
    return run_batch(opts)
