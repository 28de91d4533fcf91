"""The run record: one JSON line per notebook, appended (and flushed to disk) as each finishes.

It is what keeps the client's memory flat (the reports are rendered from it at the end, one
notebook at a time) and what ``--resume`` reads: a notebook is done when an earlier run with the
same settings recorded it and neither the input nor the output written since has changed.

May import: the standard library."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Done", "RunRecord", "file_digest", "settings_key"]

FORMAT = "nbrefine-run/1"


def settings_key(settings: dict[str, Any]) -> str:
    """The digest of everything that decides what a repair does (``--resume`` compares it)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class Done:
    """A notebook an earlier run finished: where its entry is, and the digests it recorded."""

    offset: int
    input_sha: str | None
    output: str | None
    output_sha: str | None


class RunRecord:
    """``path``: a JSON-lines file. A ``run`` line opens each run; a ``notebook`` line follows for
    every notebook it finished. Without ``resume`` the file starts afresh."""

    def __init__(self, path: Path, header: dict[str, Any], *, resume: bool) -> None:
        self.path = path
        self.run_id = uuid.uuid4().hex[:12]
        self.key = str(header["settings_key"])
        self.batches_before: list[dict[str, Any]] = []  # --batch: the batches earlier runs sent
        self.earlier: dict[str, Done] = self._read_done() if resume else {}
        self._lock = threading.Lock()  # --batch records its batches from a thread of its own
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a" if resume else "w", encoding="utf-8")
        if resume and _torn(path):
            self._fh.write("\n")  # end the line a killed run left half-written
        self._write({"kind": "run", "format": FORMAT, "run": self.run_id, **header})

    def done_before(self, input_path: Path, output: Path | None) -> dict[str, Any] | None:
        """The earlier entry of this notebook, if it is done with these settings and unchanged."""
        done = self.earlier.get(_name(input_path))
        if done is None:
            return None
        now = file_digest(input_path)
        # --in-place replaced the input by the output: either digest means "this one is done".
        if now is None or now not in (done.input_sha, done.output_sha):
            return None
        if done.output is not None and (output is None or file_digest(output) != done.output_sha):
            return None
        return self._entry_at(done.offset)

    def add(self, entry: dict[str, Any]) -> None:
        self._write({"kind": "notebook", "run": self.run_id, "settings_key": self.key, **entry})

    def add_batch(self, entry: dict[str, Any]) -> None:
        """A Message Batch this run sent (``--batch``): its id and its requests' digests."""
        self._write({"kind": "batch", "run": self.run_id, "settings_key": self.key, **entry})

    def entries(self) -> Iterator[dict[str, Any]]:
        """This run's notebook entries, read back from the file one at a time."""
        self._fh.flush()
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                entry = _parse(line)
                if entry and entry.get("kind") == "notebook" and entry.get("run") == self.run_id:
                    yield entry

    def close(self) -> None:
        self._fh.close()

    # ---------------------------------------------------------------- internals

    def _write(self, data: dict[str, Any]) -> None:
        with self._lock:
            self._fh.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())  # the record must survive the machine, not just the process

    def _read_done(self) -> dict[str, Done]:
        done: dict[str, Done] = {}
        if not self.path.exists():
            return done
        with self.path.open("rb") as fh:
            offset = 0
            for raw in fh:
                entry = _parse(raw.decode("utf-8", "replace"))
                if entry and entry.get("kind") == "batch" and entry.get("settings_key") == self.key:
                    self.batches_before.append(entry)
                if (
                    entry
                    and entry.get("kind") == "notebook"
                    and entry.get("settings_key") == self.key
                    and entry.get("status") in ("pass", "fail")
                ):
                    done[str(entry["input"])] = Done(
                        offset, entry.get("input_sha"), entry.get("output"), entry.get("output_sha")
                    )
                offset += len(raw)
        return done

    def _entry_at(self, offset: int) -> dict[str, Any] | None:
        with self.path.open("rb") as fh:
            fh.seek(offset)
            return _parse(fh.readline().decode("utf-8", "replace"))


def _torn(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return False
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def _name(path: Path) -> str:
    return str(path.resolve())


def _parse(line: str) -> dict[str, Any] | None:
    """A line of the record; None for a torn last line (the process died while writing it)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
