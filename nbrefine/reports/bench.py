"""The report of ``nbrefine bench``: each case's result, the figures over a corpus, and the table,
JSON and plot they are rendered as.

:class:`CaseResult` is one case as the bench found it; :func:`summarize` computes every figure
(first-attempt and cumulative success per round, by error type, cycles, regressions, declines,
provider errors, tokens, time) from the results, and the renderers print them.

May import: :mod:`nbrefine.headless` (the attempt JSON of a session), :mod:`nbrefine._version`, the
standard library and matplotlib (for the plot, when installed).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .._version import __version__
from ..headless.session_json import AttemptJSON

__all__ = ["BenchSetup", "CaseResult", "report_json", "report_text", "summarize", "write_plot"]


class BenchSetup(Protocol):
    """What a bench report says about how it was run (``nbrefine bench``'s options)."""

    @property
    def corpus(self) -> Path: ...
    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def rounds(self) -> int: ...
    @property
    def timeout(self) -> float: ...
    @property
    def case_timeout(self) -> int: ...
    @property
    def quick_fixes(self) -> bool: ...


@dataclass
class CaseResult:
    name: str
    status: str  # "fixed" | "unfixed" | "no_failure" | "error" | "timeout"
    error_type: str | None = None
    error_message: str = ""
    fixed_round: int | None = None
    stop_reason: str = ""
    message: str = ""
    attempts: list[AttemptJSON] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def failing(self) -> bool:
        return self.status != "no_failure"

    @property
    def tokens(self) -> tuple[int, int]:
        return (
            sum(int(a["input_tokens"] or 0) for a in self.attempts),
            sum(int(a["output_tokens"] or 0) for a in self.attempts),
        )

    @property
    def declined(self) -> bool:
        return self.stop_reason == "declined" or any(a["declined"] for a in self.attempts[-1:])

    @property
    def provider_error(self) -> bool:
        return self.stop_reason == "provider_error" or any(a["provider_error"] for a in self.attempts)

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
            "cycles": sum(a["cycle"] for a in self.attempts),
            "regressions": sum(a["regression"] for a in self.attempts),
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
    """Every figure of the bench over ``results``, for ``rounds`` rounds."""
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
        "cycles": sum(a["cycle"] for r in failing for a in r.attempts),
        "regressions": sum(a["regression"] for r in failing for a in r.attempts),
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


def _pct(rate: float | None) -> str:
    return "   -" if rate is None else f"{100 * rate:5.1f}%"


def report_text(summary: dict[str, Any], opts: BenchSetup, kind: str, wall_s: float) -> str:
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
    summary: dict[str, Any], results: list[CaseResult], opts: BenchSetup, kind: str, wall_s: float
) -> str:
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


def write_plot(summary: dict[str, Any], opts: BenchSetup, path: Path) -> str:
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
