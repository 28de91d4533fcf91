"""Early trials on and off, side by side in one run: request → outcome known, with a streamed reply.

The loopback fake of the Anthropic API (tests/fakes/anthropic_api.py) streams, through the real SDK, a
reply shaped like a real model's: three sentences, the fenced corrected cell, then ``--after``
characters of explanation, ``--chunk`` characters per delta every ``--delay-ms``. The candidate runs
in a snapshot of a live state (a ``--rows``-row DataFrame), as ``%%refine`` runs it. Each round runs
the same repair with ``LoopConfig(early_trials=True)`` and ``False`` (alternating which goes first,
so both see the same load) and times, from the loop's events, the request to the trial's outcome
(``trial_done``). With early trials on, the trial runs while the explanation streams, so the figure
drops by about the trial's length; ``early`` is ``Attempt.trial_early_s``, how long before the
reply was in the trial started.

Best-of-2 (``--best-of-rounds``, 0 to skip): two replies stream at once, each with its own
candidate (both pass); the loop trials each as its reply is in. The same repair runs on a snapshot
alone (one trial at a time) and on one taken with a twin (``Snapshot.take(..., at_once=2)``: the
two trials at the same time), alternating; the figure is the whole loop, request to result.

Usage: .venv/bin/python bench/bench_early_trials.py [--rounds 10] [--rows 1000000] [--after 600]
    [--delay-ms 20] [--chunk 12] [--best-of-rounds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nbrefine.engine import LoopConfig, RepairTask, refine
from nbrefine.engine.types import Attempt
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import Failure
from nbrefine.providers.anthropic import AnthropicProvider
from nbrefine.sandbox import Snapshot

# The one way bench/ finds the test fakes (tests/fakes/): tests/ on the path, as pyproject.toml
# puts it for pytest.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakes.anthropic_api import FakeAnthropic

CELL = "by_region = df.groupby('regon')['sales'].sum()\nshare = by_region / by_region.sum()\nshare.round(3)"
FIX = CELL.replace("'regon'", "'region'") + "\nassert abs(share.sum() - 1) < 1e-9"
BEFORE = (
    "The frame has no column `regon`: the column is `region`, so `groupby` raised a KeyError. "
    "The fix names the right column and keeps the rest of the cell as it was. "
    "The shares are fractions, so they add up to 1."
)
AFTER = (
    "Why this is the whole fix: `df.columns` lists `region`, `sales` and `units`, and nothing in the "
    "notebook defines a column called `regon`, so the name is a typo rather than a missing step. "
    "Grouping by `region` gives one total per region; dividing by the grand total turns the totals "
    "into shares, which is what the cell's `round(3)` display and its name suggest. No other cell "
    "reads `by_region` before this one, so nothing else has to change, and the state the cell runs "
    "on is the one it saw when it failed. If the regions were meant to be merged or renamed first, "
    "that belongs in the cell that loads the data, not here; I left the cell's structure alone. "
)
MODES = ("on", "off")


def reply_text(after: int) -> str:
    tail = (AFTER * (after // len(AFTER) + 1))[:after]
    return f"{BEFORE}\n\n```python\n{FIX}\n```\n\n{tail}"


def one_repair(
    fake: FakeAnthropic, runner: Snapshot, spec: dict[str, Any], early: bool
) -> tuple[float, Attempt]:
    """Seconds from the request to the trial's outcome, and the attempt."""
    fake.script(spec)
    provider = AnthropicProvider(api_key="sk-bench", base_url=fake.base_url, max_retries=0, timeout=60.0)
    failure = Failure("KeyError", "'regon'", lineno=1, line=CELL.splitlines()[0])
    marks: dict[str, float] = {}

    def on_event(kind: str, _: dict[str, Any]) -> None:
        marks.setdefault(kind, time.monotonic())

    try:
        result = refine(
            RepairTask(code=CELL, failures=(failure,)),
            provider,
            runner,
            Redactor(environ={}),
            LoopConfig(max_attempts=1, early_trials=early),
            on_event=on_event,
        )
    finally:
        provider.close()
    assert result.status == "fixed", result.message
    return marks["trial_done"] - marks["request"], result.attempts[0]


#: the second candidate of best-of-2: the same fix, said differently (it passes too)
FIX_TOO = FIX.replace("by_region / by_region.sum()", "by_region.div(by_region.sum())")


def best_of_two(fake: FakeAnthropic, runner: Snapshot, specs: list[dict[str, Any]]) -> float:
    """Seconds from the start of the loop to its result, two candidates per round."""
    fake.script(*specs)
    provider = AnthropicProvider(api_key="sk-bench", base_url=fake.base_url, max_retries=0, timeout=60.0)
    failure = Failure("KeyError", "'regon'", lineno=1, line=CELL.splitlines()[0])
    started = time.monotonic()
    try:
        result = refine(
            RepairTask(code=CELL, failures=(failure,)),
            provider,
            runner,
            Redactor(environ={}),
            LoopConfig(max_attempts=1, early_trials=True, candidates=2),
        )
    finally:
        provider.close()
    assert result.status == "fixed", result.message
    assert len(result.attempts[0].alternatives) == 1  # both candidates were tried
    return time.monotonic() - started


def _best_of_report(df: pd.DataFrame, rounds: int, args: argparse.Namespace) -> None:
    pace = {"chunk_delay": args.delay_ms / 1000, "chunk_size": args.chunk}
    specs = [
        {"text": f"{BEFORE}\n\n```python\n{FIX}\n```\n", **pace},
        {"text": f"{BEFORE}\n\n```python\n{FIX_TOO}\n```\n", **pace},
    ]
    took: dict[int, list[float]] = {1: [], 2: []}
    with FakeAnthropic() as fake:
        for number in range(rounds):
            for at_once in (1, 2) if number % 2 == 0 else (2, 1):
                with Snapshot.take({"df": df}, Redactor(environ={}), at_once=at_once) as snapshot:
                    time.sleep(0.2)  # its spares ready, as when the model is asked
                    took[at_once].append(best_of_two(fake, snapshot, specs))
            print(f"best-of-2 round {number + 1}/{rounds} done", file=sys.stderr)
    load = os.getloadavg()
    print(
        f"\nbest-of-2, {rounds} rounds (load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):"
    )
    print(f"{'trials':<22} {'median s':>8} {'max s':>7}")
    for at_once, title in ((1, "one at a time"), (2, "in parallel (a twin)")):
        print(f"{title:<22} {statistics.median(took[at_once]):8.3f} {max(took[at_once]):7.3f}")
    ratio = statistics.median(took[1]) / statistics.median(took[2])
    print(f"one at a time / in parallel (medians): {ratio:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the live DataFrame")
    parser.add_argument("--after", type=int, default=600, help="characters of explanation after the block")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="between streamed events")
    parser.add_argument("--chunk", type=int, default=12, help="characters per text delta")
    parser.add_argument("--best-of-rounds", type=int, default=6, help="rounds of best-of-2 (0: skip it)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    regions = np.array(["north", "south", "east", "west"])
    df = pd.DataFrame(
        {
            "region": regions[rng.integers(0, 4, args.rows)],
            "sales": rng.random(args.rows),
            "units": rng.integers(1, 9, args.rows),
        }
    )
    spec = {"text": reply_text(args.after), "chunk_delay": args.delay_ms / 1000, "chunk_size": args.chunk}
    took: dict[str, list[float]] = {mode: [] for mode in MODES}
    trial: dict[str, list[float]] = {mode: [] for mode in MODES}
    early_s: list[float] = []
    with FakeAnthropic() as fake, Snapshot.take({"df": df}, Redactor(environ={})) as snapshot:
        for number in range(args.rounds):
            for mode in MODES if number % 2 == 0 else MODES[::-1]:
                seconds, attempt = one_repair(fake, snapshot, spec, mode == "on")
                took[mode].append(seconds)
                assert attempt.outcome is not None
                trial[mode].append(attempt.outcome.duration_s)
                if mode == "on":
                    early_s.append(attempt.trial_early_s)
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    load = os.getloadavg()
    print(
        f"request -> outcome known, {args.rounds} rounds; reply {len(spec['text'])} chars, the block ends "
        f"{len(spec['text']) - args.after} in, {args.chunk} chars per delta every {args.delay_ms:g} ms; "
        f"{args.rows:,}-row frame"
    )
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores, shared)")
    print(f"{'early trials':<13} {'median s':>8} {'max s':>7} {'trial median s':>14} {'early median s':>14}")
    for mode in MODES:
        early = f"{statistics.median(early_s):14.3f}" if mode == "on" else f"{'-':>14}"
        print(
            f"{mode:<13} {statistics.median(took[mode]):8.3f} {max(took[mode]):7.3f} "
            f"{statistics.median(trial[mode]):14.3f} {early}"
        )
    saved = statistics.median(took["off"]) - statistics.median(took["on"])
    print(f"saved (median off - median on): {saved * 1000:.0f} ms")
    if args.best_of_rounds > 0:
        _best_of_report(df, args.best_of_rounds, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
