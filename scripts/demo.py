"""Repair notebooks/demo.ipynb headlessly and print what happened, cell by cell.

Until nbrefine's offline provider and ``nbrefine fix`` exist, the model is the loopback
fake of the Anthropic Messages API from tests/ (the real ``anthropic`` SDK talks to it over
HTTP), playing the replies in notebooks/demo_replies.json. Everything else is real: a real
kernel runs the notebook, the failure is captured there, every candidate is trial-run in a
fork of the kernel state, and ``%refine accept`` applies the fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_anthropic import FakeAnthropic  # noqa: E402


def _outputs_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(output.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
    return "\n".join(p.rstrip("\n") for p in parts if p)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", default=str(ROOT / "notebooks" / "demo.ipynb"))
    parser.add_argument("--replies", default=str(ROOT / "notebooks" / "demo_replies.json"))
    parser.add_argument("-o", "--output", default=str(ROOT / "out" / "demo.executed.ipynb"))
    args = parser.parse_args()

    notebook = nbformat.read(args.notebook, as_version=4)
    replies = json.loads(Path(args.replies).read_text())
    started = time.perf_counter()
    with FakeAnthropic() as fake:
        fake.script(*({"text": text} for text in replies))
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        os.environ["ANTHROPIC_API_KEY"] = "demo-key-for-the-loopback-fake"
        os.environ.pop("NBREFINE_PROVIDER", None)
        client = NotebookClient(
            notebook,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(ROOT / "notebooks")}},
        )
        client.execute()
        calls = len(fake.requests)
    elapsed = time.perf_counter() - started

    print(f"nbrefine demo: {args.notebook}")
    print("(model: the loopback fake of the Anthropic API playing scripted replies; see README)\n")
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        print(f"── In [{cell.get('execution_count') or ' '}] " + "─" * 50)
        print(cell.source)
        text = _outputs_text(cell)
        if text:
            print("·· output ··")
            print(text)
        print()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, args.output)
    print(f"{calls} model request(s); notebook ran in {elapsed:.1f} s; executed copy: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
