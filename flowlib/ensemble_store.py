"""The folder an ensemble streams to (``out=``): its format, its checks and its lock.

Layout of ``FOLDER``:

``meta.json``
    The ensemble's fields (:data:`FIELDS`: method, problems, problem index, options, chunk layout, the shape and a
    SHA-256 of the initialisations, and the versions of flowlib, numba and numpy), a SHA-256 of each field
    (``field_sha256``), the ``fingerprint`` (SHA-256 of those), and the full ``versions`` (for the record).
``inits.npy``
    The initialisations (float64).
``chunk_NNNNNN.npz``
    One finished chunk: the member arrays, the ensemble's ``fingerprint``, the chunk ``index`` and a ``checksum``
    (SHA-256 of the arrays' names, dtypes, shapes and bytes). Written to a temporary name, then renamed.
``.lock``
    Holds an exclusive ``fcntl.flock`` (``msvcrt.locking`` on Windows) while an ensemble writes the folder; it
    contains the writer's process id (for the error message only). The operating system releases the lock when
    its process ends, however it ends, so a lock left by a dead process never blocks (the file itself stays and
    is harmless). A second writer is refused (``ValueError`` naming ``out``), it does not wait.

Every chunk is verified when it is read back (fingerprint, index, checksum, member count, dtypes and shapes);
``meta.json`` is verified field by field.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np

from flowlib.ensemble_result import MEMBER_ARRAYS, PENDING, EVENT_COLUMNS, EnsembleResult, empty_members, versions
from flowlib.problem import Problem

#: Version of the folder layout written by this module.
FORMAT = 3
#: Fields of ``meta.json`` that make the fingerprint.
FIELDS = ("method", "problems", "problem_index", "options", "chunk_size", "n_members", "shape", "inits_sha256",
          "engine")
#: Packages whose versions must be those of the writer for a folder to be resumed (they make the numbers).
ENGINE = ("flowlib", "numba", "numpy")
META, INITS, LOCK = "meta.json", "inits.npy", ".lock"


def engine_versions() -> dict:
    """Versions of the packages that compute an ensemble's numbers."""
    found = versions()
    return {name: found[name] for name in ENGINE}


def chunk_bounds(count: int, size: int) -> list:
    """``(lo, hi)`` of each chunk of ``count`` members, ``size`` at a time."""
    return [(lo, min(lo + size, count)) for lo in range(0, count, size)]


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def _json_sha256(value) -> str:
    return _sha256(json.dumps(value, sort_keys=True).encode())


def _array_sha256(arrays: dict) -> str:
    """SHA-256 of named arrays: name, dtype, shape and bytes of each, in :data:`MEMBER_ARRAYS` order."""
    parts = []
    for name in MEMBER_ARRAYS:
        values = np.ascontiguousarray(arrays[name])
        parts += [name.encode(), values.dtype.str.encode(), repr(values.shape).encode(), values.tobytes()]
    return _sha256(*parts)


def _inits_sha256(inits: np.ndarray) -> str:
    return _sha256(inits.dtype.str.encode(), repr(inits.shape).encode(), np.ascontiguousarray(inits).tobytes())


def _fingerprint(field_sha256: dict) -> str:
    return _json_sha256([field_sha256.get(name) for name in FIELDS])


# ----- meta.json ------------------------------------------------------------------------------------------------
def _meta_error(path: Path, what: str) -> ValueError:
    return ValueError(f"{path}: {what}")


def read_meta(folder: Path) -> dict:
    """``meta.json`` of ``folder``, checked field by field; ``ValueError`` naming the file and field otherwise."""
    path = folder / META
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _meta_error(path, f"cannot be read as JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict):
        raise _meta_error(path, f"is a JSON {type(meta).__name__}, not an object")
    for name in ("kind", "format") + FIELDS + ("field_sha256", "fingerprint", "versions"):
        if name not in meta:
            raise _meta_error(path, f"field {name!r} is missing")
    if meta["kind"] != "EnsembleStore":
        raise _meta_error(path, f"field 'kind' is {meta['kind']!r}, not 'EnsembleStore'")
    if meta["format"] != FORMAT:
        raise _meta_error(path, f"field 'format' is {meta['format']!r}; this flowlib reads format {FORMAT} "
                                "(give a new out folder)")
    _check_meta_types(path, meta)
    sums = meta["field_sha256"]
    for name in FIELDS:
        if sums.get(name) != _json_sha256(meta[name]):
            raise _meta_error(path, f"field {name!r} does not match its checksum (edited or damaged)")
    if meta["fingerprint"] != _fingerprint(sums):
        raise _meta_error(path, "field 'fingerprint' does not match the fields (edited or damaged)")
    return meta


def _check_meta_types(path: Path, meta: dict) -> None:
    """Types and ranges of the fields (before their checksums, so that a wrong value is named)."""
    def positive(value):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    n = meta["n_members"]
    n_problems = len(meta["problems"]) if isinstance(meta["problems"], list) else 0
    checks = {
        "method": meta["method"] in ("flow", "gd"),
        "n_members": positive(n),
        "chunk_size": positive(meta["chunk_size"]),
        "shape": isinstance(meta["shape"], list) and len(meta["shape"]) == 3 and all(map(positive, meta["shape"]))
        and meta["shape"][0] == n,
        "problems": isinstance(meta["problems"], list) and bool(meta["problems"])
        and all(isinstance(p, dict) for p in meta["problems"]),
        "problem_index": meta["problem_index"] is None or (
            isinstance(meta["problem_index"], list) and len(meta["problem_index"]) == n
            and all(isinstance(i, int) and 0 <= i < n_problems for i in meta["problem_index"])),
        "options": isinstance(meta["options"], dict),
        "inits_sha256": isinstance(meta["inits_sha256"], str),
        "engine": isinstance(meta["engine"], dict),
        "field_sha256": isinstance(meta["field_sha256"], dict),
        "fingerprint": isinstance(meta["fingerprint"], str),
        "versions": isinstance(meta["versions"], dict),
    }
    for name, ok in checks.items():
        if not ok:
            raise _meta_error(path, f"field {name!r} has an invalid value {meta[name]!r:.200}")


def _read_inits(folder: Path, meta: dict) -> np.ndarray:
    """``inits.npy``, checked against ``meta.json``; ``ValueError`` naming the file otherwise."""
    path = folder / INITS
    try:
        inits = np.load(path, allow_pickle=False)
    except Exception as exc:  # a damaged file raises many kinds of errors; all mean the same here
        raise ValueError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(inits, np.ndarray) or inits.dtype != np.float64 or list(inits.shape) != meta["shape"]:
        raise ValueError(f"{path}: holds {getattr(inits, 'dtype', '?')} {getattr(inits, 'shape', '?')}, not the "
                         f"float64 {tuple(meta['shape'])} that meta.json says")
    if _inits_sha256(inits) != meta["inits_sha256"]:
        raise ValueError(f"{path}: does not match the checksum in meta.json (damaged)")
    return inits


# ----- chunks ---------------------------------------------------------------------------------------------------
class _Damaged(Exception):
    """A chunk file that is not a valid chunk of this ensemble (the message says why)."""


def chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk_{index:06d}.npz"


def _load_chunk(path: Path, fingerprint: str, index: int, count: int, shape: tuple) -> dict:
    """The verified member arrays of chunk ``index`` (``count`` members of packed shape ``shape``)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            stored = {name: data[name] for name in data.files}
    except Exception as exc:  # truncated, zeroed or flipped: zipfile, zlib, EOFError, OSError, ValueError, ...
        raise _Damaged(f"cannot be read ({type(exc).__name__}: {exc})") from None
    for name in ("fingerprint", "index", "checksum") + tuple(MEMBER_ARRAYS):
        if name not in stored:
            raise _Damaged(f"has no array {name!r}")
    if str(stored["fingerprint"]) != fingerprint:
        raise _Damaged("belongs to another ensemble (its fingerprint differs)")
    if stored["index"].shape != () or int(stored["index"]) != index:
        raise _Damaged(f"holds chunk {stored['index']!r}, not chunk {index}")
    arrays = {name: stored[name] for name in MEMBER_ARRAYS}
    expected = {"final": (count,) + tuple(shape), "event_counts": (count, len(EVENT_COLUMNS))}
    for name, dtype in MEMBER_ARRAYS.items():
        want = expected.get(name, (count,))
        if arrays[name].dtype != dtype or arrays[name].shape != want:
            raise _Damaged(f"array {name!r} is {arrays[name].dtype} {arrays[name].shape}, not "
                           f"{np.dtype(dtype)} {want}")
    if str(stored["checksum"]) != _array_sha256(arrays):
        raise _Damaged("does not match its checksum (damaged)")
    if np.any(arrays["status_code"] == PENDING):
        raise _Damaged("holds pending members")
    return arrays


def _verified_chunk(path: Path, fingerprint: str, index: int, count: int, shape: tuple) -> dict | None:
    """:func:`_load_chunk`, or ``None`` (with a ``UserWarning`` naming the file when it exists but is damaged)."""
    if not path.exists():
        return None
    try:
        return _load_chunk(path, fingerprint, index, count, shape)
    except _Damaged as exc:
        warnings.warn(f"{path}: {exc}; its members are treated as not computed", UserWarning, stacklevel=4)
        return None


# ----- the lock -------------------------------------------------------------------------------------------------
class _FolderLock:
    """Exclusive lock of a folder (``FOLDER/.lock``), released by :meth:`release` or when the process ends."""

    def __init__(self, folder: Path, out: str):
        self._fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(self._fd):
            holder = os.read(self._fd, 32).decode(errors="replace").strip() or "?"
            os.close(self._fd)
            raise ValueError(f"out={out!r} is being written by another ensemble run (process {holder}); wait for it "
                             "to finish or give another folder")
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


def _try_lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


# ----- writing --------------------------------------------------------------------------------------------------
class ChunkStore:
    """The folder an ensemble streams to, opened for writing (and locked) until :meth:`close`.

    Parameters
    ----------
    folder : path
    description : dict
        JSON-friendly ``method``, ``problems``, ``problem_index``, ``options``, ``chunk_size``, ``n_members``.
        With the initialisations and :func:`engine_versions` it makes the fingerprint.
    inits : ndarray

    Raises
    ------
    ValueError
        Naming ``out``: the folder is being written by another run, holds another ensemble, was written by other
        versions of flowlib, numba or numpy (resuming would not be guaranteed bit-identical, so it is refused), or
        holds chunk files but no ``meta.json``; naming ``meta.json`` and the field when that file is damaged.
    """

    def __init__(self, folder, description: dict, inits: np.ndarray):
        self.folder, self.out = Path(folder), str(folder)
        self.fields = dict(description, shape=list(inits.shape), inits_sha256=_inits_sha256(inits),
                           engine=engine_versions())
        self.field_sha256 = {name: _json_sha256(self.fields[name]) for name in FIELDS}
        self.fingerprint = _fingerprint(self.field_sha256)
        self.bounds = chunk_bounds(description["n_members"], description["chunk_size"])
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"out={self.out!r} exists and is not a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._lock = _FolderLock(self.folder, self.out)
        except OSError as exc:
            raise ValueError(f"out={self.out!r} cannot be written ({exc})") from None
        try:
            self._open(inits)
        except BaseException:
            self.close()
            raise

    def _open(self, inits: np.ndarray) -> None:
        meta_path = self.folder / META
        if os.path.lexists(meta_path):
            meta = read_meta(self.folder)
            if meta["engine"] != self.fields["engine"]:
                raise ValueError(f"out={self.out!r} was written with {meta['engine']}, this is {self.fields['engine']}:"
                                 " results of other versions are not resumed (they need not be bit-identical); "
                                 "give a new folder")
            if meta["fingerprint"] != self.fingerprint:
                raise ValueError(f"out={self.out!r} holds another ensemble (different problem, options, chunk size or "
                                 "initialisations); give a new folder or delete it")
            try:
                _read_inits(self.folder, meta)
            except ValueError as exc:
                warnings.warn(f"{exc}; rewritten from the inits given", UserWarning, stacklevel=4)
                _atomic_write(self.folder / INITS, lambda tmp: np.save(tmp, inits))
            return
        if any(self.folder.glob("chunk_*.npz")):
            raise ValueError(f"out={self.out!r} holds chunk files but no meta.json: they cannot be verified; give a "
                             "new folder or delete it")
        _atomic_write(self.folder / INITS, lambda tmp: np.save(tmp, inits))
        meta = dict(self.fields, kind="EnsembleStore", format=FORMAT, field_sha256=self.field_sha256,
                    fingerprint=self.fingerprint, versions=versions())
        _atomic_write(meta_path, lambda tmp: tmp.write_text(json.dumps(meta, indent=1)))

    def read(self, index: int) -> dict | None:
        """The verified arrays of chunk ``index``; ``None`` when it is missing, or damaged or foreign (then a
        ``UserWarning`` names the file, and the chunk is computed again)."""
        lo, hi = self.bounds[index]
        return _verified_chunk(chunk_path(self.folder, index), self.fingerprint, index, hi - lo,
                               tuple(self.fields["shape"][1:]))

    def write(self, index: int, arrays: dict) -> None:
        """Write chunk ``index`` (atomically), with the fingerprint and a checksum."""
        stamped = dict(arrays, fingerprint=np.array(self.fingerprint), index=np.array(index, np.int64),
                       checksum=np.array(_array_sha256(arrays)))
        _atomic_write(chunk_path(self.folder, index), lambda tmp: np.savez(tmp, **stamped))

    def close(self) -> None:
        """Release the folder's lock."""
        self._lock.release()


def _atomic_write(path: Path, write) -> None:
    """``write(tmp)`` to a temporary sibling, then rename over ``path`` (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    write(tmp)
    os.replace(tmp, path)


# ----- reading --------------------------------------------------------------------------------------------------
def load_store(folder) -> EnsembleResult:
    """Assemble an :class:`EnsembleResult` from an ensemble's ``out`` folder.

    Chunks not written yet are ``"pending"`` (``complete=False``). A damaged or foreign chunk file is skipped with a
    ``UserWarning`` naming it (its members pending); a damaged ``meta.json`` or ``inits.npy`` raises
    ``ValueError`` naming the file (and the field).
    """
    folder = Path(folder)
    if not os.path.lexists(folder / META):
        raise ValueError(f"{folder}: not an ensemble folder (no meta.json)")
    meta = read_meta(folder)
    inits = _read_inits(folder, meta)
    try:
        problems = tuple(Problem(**p) for p in meta["problems"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{folder / META}: field 'problems' is invalid ({exc})") from None
    members = empty_members(len(inits), inits.shape[1:])
    complete = True
    for index, (lo, hi) in enumerate(chunk_bounds(len(inits), meta["chunk_size"])):
        arrays = _verified_chunk(chunk_path(folder, index), meta["fingerprint"], index, hi - lo, inits.shape[1:])
        if arrays is None:
            complete = False
            continue
        for name, values in arrays.items():
            members[name][lo:hi] = values
    index = meta["problem_index"]
    index = np.zeros(len(inits), np.int64) if index is None else np.asarray(index, np.int64)
    return EnsembleResult(method=meta["method"], problems=problems, problem_index=index, inits=inits,
                          options=meta["options"], complete=complete,
                          meta={"versions": meta["versions"], "fingerprint": meta["fingerprint"]}, **members)
