"""Where the compiled kernels spend their time: a sampled, per-function profile of a flow, with Linux ``perf``.

Numba's machine code has no symbols that ``perf`` can see, so a sampled profile of a flow is a list of anonymous
addresses. This module names them: :func:`install` keeps a copy of each kernel library's object code as Numba
loads it from the cache (or compiles it), :func:`write_map` reads the functions' offsets from those objects' ELF
symbol tables, anchors them at the addresses Numba resolved, and writes ``/tmp/perf-<pid>.map`` (the format
``perf`` reads for code generated at run time). :func:`profile` then runs a workload in a loop while ``perf record``
samples this process, and :func:`shares` groups the samples by kernel function (``series.taylor_coefficients``,
``driver.earliest_switching``, ...), BLAS, Numba's reference counting, the Python interpreter and the rest.

``python -m benchmarks.kernel_profile B1-os`` (or ``B8``; ``--seconds`` to sample longer) prints the table that
BENCHMARKS.md quotes. It needs ``perf`` on the ``PATH`` and permission to sample this process; without them the map is
still written and the command says how to sample by hand. :func:`install` touches one private method of Numba's
code library (it wraps ``_set_compiled_object``), so this stays a developer tool of the benchmark suite and is not
part of flowlib.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter

#: ``perf report`` symbols grouped under one row of :func:`shares`, by substring
GROUPS = (("BLAS (dgemm and its copies)", ("dgemm", "dgemv", "ddot", "daxpy")),
          ("Numba reference counting (NRT_incref / NRT_decref)", ("NRT_incref", "NRT_decref")),
          ("memory (malloc, free, memset, page clearing)", ("malloc", "free", "memset", "memmove", "clear_page",
                                                            "NRT_MemInfo", "page_fault")),
          ("Python interpreter", ("_PyEval", "PyObject", "_Py", "PyType", "PyUnicode", "unicodekeys", "dict_",
                                  "gc_collect", "visit_", "tuple", "PyArray")))

_KEPT = "_flowlib_profile_object"


def install() -> None:
    """Keep a copy of every kernel library's object code as Numba loads it (call before the first kernel runs)."""
    from numba.core import codegen

    library = codegen.CPUCodeLibrary
    if getattr(library, "_flowlib_profile_installed", False):
        return
    original = library._set_compiled_object

    def keep(self, value):
        setattr(self, _KEPT, value)
        return original(self, value)

    library._set_compiled_object = keep
    library._flowlib_profile_installed = True


def elf_functions(data: bytes) -> list[tuple[str, int, int, int]]:
    """The function symbols of a 64-bit little-endian ELF relocatable object: ``(name, section, offset, size)``.

    Raises
    ------
    ValueError
        If ``data`` is not such an object.
    """
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("data must be a 64-bit little-endian ELF object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    found = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link]
        names = data[strtab[4]:strtab[4] + strtab[5]]
        for k in range(size // entsize):
            name_at, info, _, section, value, length = struct.unpack_from("<IBBHQQ", data, offset + k * entsize)
            if info & 0xF != 2 or section == 0 or section >= 0xFF00:  # STT_FUNC, defined in a real section
                continue
            name = names[name_at:names.index(b"\0", name_at)].decode("ascii", "replace")
            found.append((name, section, value, length))
    return found


def _libraries():
    """Each distinct code library of the Numba dispatchers alive in this process."""
    from numba.core.registry import CPUDispatcher

    seen = {}
    for obj in gc.get_objects():
        if isinstance(obj, CPUDispatcher):
            for result in obj.overloads.values():
                seen.setdefault(id(result.library), result.library)
    return list(seen.values())


def kernel_symbols() -> dict[int, tuple[int, str]]:
    """``{address: (size, name)}`` of every compiled function of the loaded kernels whose object code was kept
    (:func:`install`) or is still held by Numba."""
    table = {}
    for library in _libraries():
        data = getattr(library, _KEPT, None) or getattr(library, "_compiled_object", None)
        if not data:
            continue
        functions = elf_functions(data)
        bases = {}
        for name, section, offset, _ in functions:
            if section in bases:
                continue
            try:
                address = library.get_pointer_to_function(name)
            except Exception:  # a local symbol the engine does not export
                address = 0
            if address:
                bases[section] = address - offset
        for name, section, offset, size in functions:
            if section in bases and size:
                table[bases[section] + offset] = (size, name)
    table.update(_runtime_symbols())
    return table


def _runtime_symbols() -> dict[int, tuple[int, str]]:
    """Numba's runtime helpers (``NRT_incref``, ``NRT_decref``, ...), compiled in this process at start-up: their
    addresses from the runtime's library, each function's size taken as the gap to the next one."""
    from numba.core.runtime import nrt

    library = nrt.rtsys.library
    try:
        functions = list(library._final_module.functions)
    except AttributeError:  # another Numba's internals: the runtime's helpers stay unnamed
        return {}
    found = {}
    for function in functions:
        if not function.is_declaration:
            address = library.get_pointer_to_function(function.name)
            if address:
                found[address] = function.name
    ordered = sorted(found)
    return {a: (min(b - a, 4096), found[a]) for a, b in zip(ordered, ordered[1:] + [ordered[-1] + 4096])} \
        if ordered else {}


def write_map(path: str | None = None) -> str:
    """Write the ``perf`` map of :func:`kernel_symbols` (default ``/tmp/perf-<pid>.map``); return its path."""
    path = path or f"/tmp/perf-{os.getpid()}.map"
    with open(path, "w") as out:
        for address, (size, name) in sorted(kernel_symbols().items()):
            out.write(f"{address:x} {size:x} {name}\n")
    return path


def short_name(symbol: str) -> str:
    """``module.function`` of a Numba-mangled kernel symbol (``_ZN7flowlib7kernels6series3fooB4v12...E...`` ->
    ``series.foo``); other symbols unchanged."""
    if not symbol.startswith("_ZN"):
        return symbol
    parts, at = [], 3
    while at < len(symbol) and symbol[at].isdigit():
        digits = re.match(r"\d+", symbol[at:]).group()
        at += len(digits)
        parts.append(symbol[at:at + int(digits)])
        at += int(digits)
    parts = [p for p in parts if p not in ("flowlib", "kernels")]
    return ".".join(parts[-2:]) if parts else symbol


def shares(report: str) -> list[tuple[str, float]]:
    """Percentages per row from ``perf report --no-children --sort sym`` text: kernel functions by
    :func:`short_name`, then the :data:`GROUPS`, then everything else as one row; largest first."""
    rows = Counter()
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(\S+)", line)
        if not match:
            continue
        percent, symbol = float(match.group(1)), match.group(2)
        if symbol.startswith("_ZN7flowlib"):
            rows[short_name(symbol)] += percent
            continue
        for label, keys in GROUPS:
            if any(key in symbol for key in keys):
                rows[label] += percent
                break
        else:
            rows["other (libm, Numba helpers, unnamed)"] += percent
    return sorted(rows.items(), key=lambda item: -item[1])


def workload(case: str):
    """``(callable, description)`` of a named case: ``B1-os`` (the whole flow to t = 10, repeated) or ``B8`` (the
    digits flow from t = 0, repeated to t = 3)."""
    import flowlib as fl
    from benchmarks import bench, event_dense

    if case == "B1-os":
        prob, p0 = bench.os_transversal()
        return (lambda: fl.gradient_flow(prob, p0, 10.0, dense_output=False)), "B1-os to t = 10, repeated"
    if case == "B8":
        prob, p0 = event_dense.digits_case()
        return (lambda: fl.gradient_flow(prob, p0, 3.0, dense_output=False)), "B8-digits to t = 3, repeated"
    raise ValueError(f"case must be 'B1-os' or 'B8', got {case!r}")


def profile(case: str, seconds: float = 20.0) -> tuple[list[tuple[str, float]], str]:
    """Sample ``case``'s workload for about ``seconds`` with ``perf record`` on this process.

    Returns
    -------
    rows : list of (str, float)
        :func:`shares` of the samples.
    perf_data : str
        The ``perf.data`` file (for ``perf report -i``).

    Raises
    ------
    RuntimeError
        If ``perf`` is not on the ``PATH`` or recorded nothing.
    """
    if shutil.which("perf") is None:
        raise RuntimeError("perf is not on the PATH (install linux-tools); the map alone: "
                           "benchmarks.kernel_profile.write_map()")
    install()
    run, _ = workload(case)
    run()  # loads (or compiles) every kernel the workload calls, keeping their object code
    write_map()
    data = os.path.join(tempfile.mkdtemp(prefix="flowlib-profile-"), "perf.data")
    recorder = subprocess.Popen(["perf", "record", "-q", "-F", "2999", "-o", data, "-p", str(os.getpid())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        run()
    recorder.send_signal(2)
    _, err = recorder.communicate(timeout=60)
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym", "--stdio"],
                            capture_output=True, text=True).stdout
    rows = shares(report)
    if not rows:
        raise RuntimeError(f"perf recorded no samples: {err.decode(errors='replace').strip()}")
    return rows, data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernel_profile", description=__doc__.split("\n")[0])
    parser.add_argument("case", choices=["B1-os", "B8"])
    parser.add_argument("--seconds", type=float, default=20.0, help="sampling time (default 20)")
    parser.add_argument("--top", type=int, default=25, help="rows printed (default 25)")
    args = parser.parse_args(argv)
    try:
        rows, data = profile(args.case, args.seconds)
    except RuntimeError as exc:
        print(f"kernel_profile: {exc}", file=sys.stderr)
        return 2
    print(f"{workload(args.case)[1]}: {args.seconds:g} s sampled at 2999 Hz ({data})")
    for label, percent in rows[:args.top]:
        print(f"{percent:6.1f}%  {label}")
    rest = sum(percent for _, percent in rows[args.top:])
    if rest:
        print(f"{rest:6.1f}%  ({len(rows) - args.top} more rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
