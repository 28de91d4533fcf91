"""Layer 3, private mappings: every shared mapping a trial inherited (``np.memmap``, ``mmap``,
``SharedMemory``) is replaced at the same address by a copy-on-write one, so no write reaches
the original pages. May import :mod:`.native`."""

from __future__ import annotations

import ctypes
import os
from typing import Any

from .native import load_libc

__all__ = ["SharedMapping", "open_backing_file", "privatize_shared_mappings", "shared_mappings"]


_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x02, 0x10, 0x20
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2


class SharedMapping:
    """One line of /proc/self/maps."""

    def __init__(self, line: str) -> None:
        fields = line.split(maxsplit=5)
        self.start, self.end = (int(part, 16) for part in fields[0].split("-"))
        self.perms = fields[1]
        self.offset = int(fields[2], 16)
        self.path = fields[5].rstrip("\n") if len(fields) > 5 else ""
        self.backing_fd: int | None = None  # opened ahead by prepare()

    @property
    def shared(self) -> bool:
        return self.perms[3] == "s"

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def prot(self) -> int:
        return (
            (_PROT_READ if self.perms[0] == "r" else 0)
            | (_PROT_WRITE if self.perms[1] == "w" else 0)
            | (_PROT_EXEC if self.perms[2] == "x" else 0)
        )


def _mmap_fn(libc: Any) -> Any:
    libc.mmap.restype = ctypes.c_void_p
    size, void_p, c_int = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
    libc.mmap.argtypes = [void_p, size, c_int, c_int, c_int, ctypes.c_long]
    libc.mremap.restype = void_p
    libc.mremap.argtypes = [void_p, size, size, c_int, void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def open_backing_file(mapping: SharedMapping) -> int | None:
    """A read-only fd on the file behind a shared mapping: its path, or (for deleted files,
    memfds, shared memory and anonymous shared memory) the kernel's map_files link."""
    candidates = []
    if mapping.path.startswith("/") and not mapping.path.endswith(" (deleted)"):
        candidates.append(mapping.path)
    candidates.append(f"/proc/self/map_files/{mapping.start:x}-{mapping.end:x}")
    for path in candidates:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        if os.fstat(fd).st_size >= mapping.offset + mapping.length or path.startswith("/proc/"):
            return fd
        os.close(fd)
    return None


def _remap_private(libc: Any, mapping: SharedMapping) -> bool:
    """Replace a shared mapping by a copy-on-write one of the same pages, at the same address.

    A private mapping of the same file shows the same content (shared mappings ARE the page
    cache) and costs no copy; writes, even after ``mprotect``, go to the trial's own pages."""
    fd = os.dup(mapping.backing_fd) if mapping.backing_fd is not None else open_backing_file(mapping)
    if fd is not None:
        try:
            flags = _MAP_PRIVATE | _MAP_FIXED
            placed = libc.mmap(mapping.start, mapping.length, mapping.prot, flags, fd, mapping.offset)
            if placed == mapping.start:
                return True
        finally:
            os.close(fd)
    # No file to map privately: copy the content into fresh private memory and move it over.
    flags = _MAP_PRIVATE | _MAP_ANONYMOUS
    copy = libc.mmap(None, mapping.length, _PROT_READ | _PROT_WRITE, flags, -1, 0)
    if copy in (None, ctypes.c_void_p(-1).value):
        return False
    if mapping.perms[0] == "r":
        ctypes.memmove(copy, mapping.start, mapping.length)
    libc.mprotect(ctypes.c_void_p(copy), mapping.length, mapping.prot)
    moved = libc.mremap(copy, mapping.length, mapping.length, _MREMAP_MAYMOVE | _MREMAP_FIXED, mapping.start)
    return bool(moved == mapping.start)


def shared_mappings() -> list[SharedMapping]:
    with open("/proc/self/maps") as maps:
        return [mapping for mapping in map(SharedMapping, maps) if mapping.shared]


def privatize_shared_mappings(mappings: list[SharedMapping] | None = None) -> bool:
    """Shared mappings (``mmap``, ``np.memmap``, ``SharedMemory``) survive a fork and would let a
    trial write into the kernel's memory and files, if only after ``mprotect``-ing them
    writable again. Replace every one, whatever its size and protection, by a private one;
    one that cannot be replaced is unmapped (touching it then crashes the trial, visibly).

    ``mappings`` (from :func:`prepare`, with backing files already open) saves reading
    ``/proc/self/maps``, which takes milliseconds in a large process."""
    libc = _mmap_fn(load_libc())
    for mapping in shared_mappings() if mappings is None else mappings:
        if not _remap_private(libc, mapping):
            libc.munmap(mapping.start, mapping.length)
    return True
