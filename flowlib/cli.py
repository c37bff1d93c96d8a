"""Command line: ``flowlib validate`` (check the papers' claims, write a report), ``flowlib run CONFIG`` (a run
configuration: results and plots), ``flowlib bench`` (the peer benchmarks), ``flowlib demo`` (integrate a shipped
example, print its events, write a plot), ``flowlib certify RESULT`` (prove a saved flow in ball arithmetic),
``flowlib warmup`` (compile every kernel once, announced stage by stage) and ``flowlib info`` (versions and Numba
settings)."""

from __future__ import annotations

import argparse
import sys
import time


def _demo(args) -> int:
    import flowlib as fl
    from flowlib import examples, plots
    from flowlib.pipeline import make_folder

    out = make_folder(args.out, "--out")
    print("compiling / loading kernels ...", flush=True)
    compile_s = fl.warmup()
    print(f"kernels ready in {compile_s:.2f} s (compilation is cached on disk after the first run)")
    problem, p0 = examples.EXAMPLES[args.example]()
    print(f"example {args.example!r}: n = {problem.n}, d = {problem.d}, m = {p0.m}, loss {problem.loss} "
          f"({problem.reduction}), activation {problem.activation}, bias {problem.bias}, "
          f"train_outer {problem.train_outer}")
    res = fl.gradient_flow(problem, p0, args.t_end, rtol=args.rtol, progress=args.progress)
    print(res.summary())
    print()
    print(res.event_table(limit=args.max_rows))
    figure = out / f"{args.example}.png"
    plots.overview(res, figure)
    saved = res.save(out / f"{args.example}.npz")
    print(f"\nwrote {figure} and {saved}")
    return 0 if res.success else 1


def _certify(args) -> int:
    import flowlib as fl

    result = fl.load(args.result)
    if not isinstance(result, fl.FlowResult):
        raise ValueError(f"{args.result}: certify needs a saved gradient_flow result, got {type(result).__name__}")
    cert = fl.certify(result, times=args.times, prec=args.prec, order=args.order, time_tol=args.time_tol)
    print(cert.summary())
    return 0 if cert.certified else 1


def _info(args) -> int:
    import numba
    import numpy
    import mpmath
    import scipy

    import flowlib as fl

    print(f"flowlib {fl.__version__}\nnumpy {numpy.__version__}\nnumba {numba.__version__}\n"
          f"scipy {scipy.__version__}\nmpmath {mpmath.__version__}\npython {sys.version.split()[0]}")
    print(f"numba cache dir: {numba.config.CACHE_DIR or '(next to the sources / user cache)'}")
    tick = time.perf_counter()
    fl.warmup()
    print(f"kernel warm-up: {time.perf_counter() - tick:.2f} s")
    return 0


def _warmup(args) -> int:
    import numba

    import flowlib as fl

    print(f"Numba cache: {numba.config.CACHE_DIR or 'next to the installed sources (or the user cache)'}")
    total = fl.warmup(announce=True, jobs=args.jobs)
    print(f"kernels ready in {total:.1f} s; later processes load them from the cache (about a second)")
    return 0


def _run(args) -> int:
    from flowlib import config, pipeline

    if args.list or args.config is None:
        print(pipeline.describe(config.shipped()))
        return 0
    cfg = config.load(args.config, quick=args.quick, out=args.out, table=args.table, save=args.save)
    progress = args.progress
    if progress:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            print("(no progress bar: pip install 'flowlib[progress]')")
            progress = False
    return pipeline.execute(cfg, progress=progress)


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error format: one line ``<prog>: error: <message>`` on stderr and exit status 2 (no
    usage block; ``--help`` shows it)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (the parser prints one line and exits 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``flowlib`` argument parser."""
    from flowlib.examples import EXAMPLES

    parser = _Parser(prog="flowlib", description="Exact gradient flow of two-layer ReLU networks.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="integrate a shipped example, print its event table and write a plot")
    demo.add_argument("--example", choices=sorted(EXAMPLES), default="os-logistic")
    demo.add_argument("--t-end", type=float, default=100.0, help="final flow time (default 100)")
    demo.add_argument("--rtol", type=float, default=1e-13)
    demo.add_argument("--out", default="flowlib-out", help="folder for the plot and the saved result")
    demo.add_argument("--max-rows", type=int, default=40, help="rows of the event table to print")
    demo.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    demo.set_defaults(run=_demo)
    run = sub.add_parser("run", help="run a configuration file (or a shipped one: flowlib run --list); writes "
                                     "results and plots; an interrupted ensemble resumes when run again")
    run.add_argument("config", nargs="?", help="a TOML file or the name of a shipped configuration")
    run.add_argument("--quick", action="store_true", help="apply the configuration's [quick] overrides")
    run.add_argument("--out", help="output folder (default: the configuration's output.dir)")
    run.add_argument("--list", action="store_true",
                     help="list the shipped configurations: name, title and the path of its file")
    run.add_argument("--progress", action="store_true", help="show progress bars (needs tqdm)")
    run.add_argument("--table", choices=("short", "full"),
                     help="printed output: a summary with tables cut at 20 rows (short), or every row and one line "
                          "per ensemble member (full); default: the configuration's output.table, else short")
    run.add_argument("--save", choices=("compact", "full"),
                     help="saved single runs: compact (no dense output, at most output.records states) or full; "
                          "default: the configuration's output.save, else compact")
    run.set_defaults(run=_run)
    sub.add_parser("bench", add_help=False, help="flowlib against SciPy, heyoka.py and tiny-step GD (benchmarks "
                                                 "B0-B9): table, bench.json, bench.png; from a checkout of the "
                                                 "repository (flowlib bench --help)")
    sub.add_parser("validate", add_help=False, help="check the source papers' claims; writes report.md, "
                                                    "report.json and plots (flowlib validate --help)")
    cert = sub.add_parser("certify", help="prove a saved flow (a .npz from res.save or flowlib demo) in ball "
                                          "arithmetic: event-time and state enclosures, or why not (needs "
                                          "python-flint); exit status 0 certified, 1 rejected or undecided")
    cert.add_argument("result", help="a saved FlowResult (.npz)")
    cert.add_argument("--prec", type=_positive_int, default=128, help="working precision in bits (default 128)")
    cert.add_argument("--order", type=_positive_int, default=None, help="Taylor order (default prec / 4)")
    cert.add_argument("--times", type=float, nargs="+", default=None,
                      help="times at which to enclose the state and the loss (default: the final time)")
    cert.add_argument("--time-tol", type=float, default=1e-9,
                      help="relative distance beyond which a logged event time rejects the log (default 1e-9)")
    cert.set_defaults(run=_certify)
    warm = sub.add_parser("warmup", help="compile every kernel once, stage by stage (cached on disk: later "
                                         "processes only load them)")
    warm.add_argument("--jobs", type=_positive_int, default=None,
                      help="worker processes compiling at once (default: 2 where there are two cores; 1 compiles "
                           "in this process)")
    warm.set_defaults(run=_warmup)
    info = sub.add_parser("info", help="versions, Numba settings and kernel warm-up time")
    info.set_defaults(run=_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``flowlib`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["validate"]:  # its own parser (argparse's REMAINDER would swallow no leading option)
        from flowlib.validation import runner

        return runner.main(argv[1:])
    if argv[:1] == ["bench"]:  # the harness is not installed: it lives in the repository's benchmarks/ folder
        import os

        checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # flowlib's source tree, if any
        if os.path.isfile(os.path.join(checkout, "benchmarks", "bench.py")) and checkout not in sys.path:
            sys.path.append(checkout)  # the `flowlib` script does not put the working directory on sys.path
        try:
            from benchmarks import bench
        except ModuleNotFoundError as exc:  # only a missing benchmarks package; a missing dependency is raised
            if exc.name not in ("benchmarks", "benchmarks.bench"):
                raise
            print("flowlib bench: the benchmarks live in the repository's benchmarks/ folder and are run with "
                  "'python -m benchmarks' from a checkout", file=sys.stderr)
            return 2
        return bench.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError) as exc:  # bad input (the message names the argument or key), or the OS refused
        print(f"flowlib {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
