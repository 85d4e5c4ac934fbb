"""The ``netcl`` command.

``netcl devices`` lists every usable OpenCL device plus the NumPy backend, which one ``auto``
picks, and every device that failed its probe with the reason and what to do about it
(``--probe`` probes every device again instead of trusting the stored verdicts).
``netcl train`` trains the digits CNN, printing each epoch's line as the epoch ends
(``--task charlm``: a small GPT on the text of Python's ``help()`` topics, with loss and
perplexity per epoch, the unigram baseline and a sample at the end); its training step is
captured and replayed on OpenCL devices (``--no-capture``: eager steps), and
``--profile trace.json`` profiles the run (every kernel's launches and device time, sorted, and
a Chrome trace in ``trace.json``); ``--plot curves.png`` draws loss and accuracy per epoch
(matplotlib: ``netcl[plot]``), ``--log-csv`` and ``--tensorboard DIR`` log the metrics
(``netcl[tensorboard]``), ``--log-every K`` every K steps too; ``--nprocs N`` trains the
digits CNN data-parallel over N processes on this host (:mod:`netcl.trainer._parallel`).
``netcl launch -n N script.py [args ...]`` runs N ranks of a script on this host
(:mod:`netcl.distributed.launch`; its options, output and exit status).
``netcl tune MODEL`` runs one training step of ``digits-cnn`` or ``resnet18`` with autotuning
on and stores each shape class's fastest kernel for this device and driver (:mod:`netcl._tune`).
``netcl export WEIGHTS OUT.onnx`` writes a trained model (``--model digits-cnn`` by default)
as ONNX (:mod:`netcl.onnx`).
``netcl cache info`` lists every file cache netcl keeps (its folder, entries and size) and
``netcl cache clear [NAME ...]`` empties them, all by default (see :mod:`netcl.core.caches`).

Errors are one line on stderr, ``netcl: <what went wrong>``, and the exit status says which
kind (``--debug`` or ``NETCL_DEBUG=1`` adds the traceback):

- 0: done;
- 1: a failure while running: a checkpoint that cannot be used (``CheckpointError``),
  training that diverged (``DivergenceError``), a device or OpenCL error during the run, an OS
  error (disk full, permissions), a cache ``netcl cache clear`` had to leave alone (in use by
  a running netcl process); anything else is reported as an internal error;
- 2: bad usage or input: an unknown option or value or cache name, ``--resume`` without
  ``--checkpoint-dir``, a ``--device`` or ``NETCL_DEVICE`` that is malformed, names a device
  kind this machine lacks, or names only devices that failed their probe (the message says
  why and lists the usable ones);
- 130: interrupted (Ctrl-C), after the line ``netcl: interrupted``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from netcl.core.caches import (
    CACHE_NAMES,
    cache_info,
    cache_root,
    cache_root_origin,
    clear_caches,
    format_size,
)
from netcl.core.device import DeviceHandle, manager
from netcl.core.env import env_flag
from netcl.distributed.launch import main as launch_main
from netcl.io import CheckpointError
from netcl.runtime import Profile, profile
from netcl.trainer._argtypes import int_at_least, positive_float
from netcl.trainer._charlm import charlm_data, train_charlm
from netcl.trainer._charlm_cli import (
    CHARLM_OPTIONS,
    TASK_DEFAULTS,
    add_charlm_arguments,
    charlm_config,
    charlm_epoch_line,
    charlm_report,
)
from netcl.trainer._digits import DigitsConfig, train_digits
from netcl.trainer._parallel import train_digits_parallel

from ._export_cli import add_export_parser, export_command
from ._plot import add_plot_argument, require_matplotlib, write_plot
from ._tune import add_tune_parser, tune_command

EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130

# Failures that the command reports in one line; anything else is a bug in netcl, reported in
# one line too but flagged as such (the traceback is one --debug away).
_EXPECTED = (CheckpointError, FloatingPointError, RuntimeError, OSError, MemoryError,
             ImportError)


class InputError(Exception):
    """Input the command cannot use (a device selector, an option): exit status 2."""


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _describe(handle: DeviceHandle) -> list[str]:
    if handle.backend == "cpu":
        return ["NumPy backend", "  type: cpu (host NumPy, always available)"]
    dev: Any = handle.cl_device
    ext = dev.extensions
    return [
        f"{handle.platform_name}: {handle.device_name}",
        f"  type: {handle.device_type}, compute units: {dev.max_compute_units}, "
        f"OpenCL: {dev.version.strip()}, driver: {dev.driver_version.strip()}",
        f"  global memory: {dev.global_mem_size / 2**30:.1f} GiB, "
        f"local memory: {dev.local_mem_size / 1024:.0f} KiB",
        f"  fp16: {_yes('cl_khr_fp16' in ext)}, fp64: {_yes('cl_khr_fp64' in ext)}",
    ]


def devices(out: Any = None, reprobe: bool = False) -> int:
    """Print every usable device, the one ``auto`` selects, and the unusable ones with why.

    Raises:
        InputError: ``NETCL_DEVICE`` names no usable device (raised after the listing, which
            is what it takes to fix it).
    """
    out = out or sys.stdout
    if reprobe:
        for i in range(len(manager.discover())):
            manager.verdict(i, refresh=True)
    problem: Exception | None = None
    with warnings.catch_warnings():  # the unusable devices are listed below, with their remedy
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            chosen = manager.default("auto")
        except (ValueError, RuntimeError) as err:  # NETCL_DEVICE names nothing usable
            chosen, problem = None, err
    for i, handle in enumerate(manager.all_handles()):
        marker = "*" if handle == chosen else " "
        selector = "cpu" if handle.backend == "cpu" else f"#{i}"
        lines = _describe(handle)
        print(f"{marker} [{selector}] {lines[0]}", file=out)
        for line in lines[1:]:
            print(f"      {line}", file=out)
    for name, verdict, remedy in manager.unusable():
        print(f"x [unusable] {name}", file=out)
        print(f"      reason: {verdict.reason}", file=out)
        print(f"      remedy: {remedy}", file=out)
    if problem is not None:
        raise InputError(str(problem)) from problem
    print(f"auto picks: {chosen}  (override with NETCL_DEVICE)", file=out)
    return 0


def select_device(selector: str) -> DeviceHandle:
    """The device ``--device selector`` names (``auto`` obeys ``NETCL_DEVICE``).

    Raises:
        InputError: the selector is malformed, names no device, or only unusable ones.

    Examples:
        >>> str(select_device("cpu"))
        'cpu (NumPy)'
    """
    try:
        handle = manager.default(selector)
    except (ValueError, RuntimeError) as err:
        raise InputError(str(err)) from err
    if handle is None:  # a kind (gpu, accel, cl) this machine does not have
        found = ", ".join(str(h) for h in manager.all_handles())
        raise InputError(f"--device {selector!r} matches no device; devices: {found}")
    return handle


def epoch_line(m: Any) -> str:
    """The line ``netcl train`` prints for one :class:`netcl.trainer.EpochMetrics`.

    Examples:
        >>> from netcl.trainer import EpochMetrics
        >>> epoch_line(EpochMetrics(0, 0.5, 0.75, val_accuracy=0.8, seconds=1.25))
        'epoch  1  loss 0.5000  train acc 0.7500  test acc 0.8000  (1.2 s)'
    """
    return (f"epoch {m.epoch + 1:2d}  loss {m.train_loss:.4f}  train acc {m.train_accuracy:.4f}"
            f"  test acc {m.val_accuracy:.4f}  ({m.seconds:.1f} s)")


def train(args: argparse.Namespace, out: Any = None) -> int:
    """Train the digits CNN (or ``--task charlm``'s GPT), printing the device, one line per
    epoch as it ends (the epochs a resumed run restored first), and the held-out accuracy
    (charlm: the unigram baseline, the validation loss and a sample)."""
    out = out or sys.stdout
    task = args.task
    for name, value in TASK_DEFAULTS[task].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if task != "charlm":
        given = [f"--{n.replace('_', '-')}" for n in CHARLM_OPTIONS
                 if getattr(args, n) is not None]
        if given:
            raise InputError(f"{', '.join(given)}: charlm options; add --task charlm")
    _check_nprocs(args)
    if args.profile is not None:  # device times need a profiling queue, made with the device
        os.environ.setdefault("NETCL_PROFILE_EVENTS", "1")
    if args.plot is not None:
        require_matplotlib()  # a missing extra fails before training, not after
    dev = select_device(args.device)
    print(f"device: {dev}", file=out, flush=True)
    line = charlm_epoch_line if task == "charlm" else epoch_line

    def report(m: Any) -> None:
        print(line(m), file=out, flush=True)

    shared: dict[str, Any] = dict(
        device=dev, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
        workers=args.workers, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
        progress=not args.no_progress, amp=args.amp, on_epoch_end=report,
        capture=not args.no_capture, csv_log=args.log_csv, tensorboard_dir=args.tensorboard,
        log_every=args.log_every)
    if task == "charlm":
        try:  # the options and the corpus are checked before any training
            cfg = charlm_config(args, **shared)
            data = charlm_data(cfg)
        except (ValueError, OSError) as err:
            raise InputError(str(err)) from err
        print(f"corpus: {len(data.train_text)} training and {len(data.val_text)} validation "
              f"characters, {len(data.vocab)} distinct", file=out, flush=True)
        with _profiled(args.profile) as prof:
            result = train_charlm(cfg, data)
        history = result.history
        print("\n".join(charlm_report(result)), file=out)
    elif args.nprocs > 1:
        prof = None
        try:
            history = train_digits_parallel(DigitsConfig(**shared), args.nprocs)
        except ValueError as err:
            raise InputError(str(err)) from err
        final = history[-1].val_accuracy if history else None
        print(f"held-out accuracy: {final:.4f}" if final is not None else "no epoch ran",
              file=out)
    else:
        with _profiled(args.profile) as prof:
            _, history, _ = train_digits(DigitsConfig(**shared))
        final = history[-1].val_accuracy if history else None
        print(f"held-out accuracy: {final:.4f}" if final is not None else "no epoch ran",
              file=out)
    write_plot(args.plot, history, out)
    if prof is not None and args.profile is not None:
        prof.export_chrome_trace(args.profile)
        print(prof.table(), file=out)
        print(f"profile: {prof.launches} launches; Chrome trace written to {args.profile} "
              "(open it in Perfetto or chrome://tracing)", file=out)
    return 0


def _check_nprocs(args: argparse.Namespace) -> None:
    """``--nprocs N``: digits only; above 1, without the options one process only has.

    Raises:
        InputError: a combination the data-parallel job does not support.
    """
    if args.nprocs == 1:
        return
    if args.task != "digits":
        raise InputError(f"--nprocs {args.nprocs}: data-parallel training is for --task "
                         f"digits only; --task {args.task} trains in one process (drop --nprocs)")
    alone = [flag for flag, value in (("--profile", args.profile), ("--log-csv", args.log_csv),
                                      ("--tensorboard", args.tensorboard),
                                      ("--log-every", args.log_every)) if value is not None]
    if alone:
        raise InputError(f"{', '.join(alone)}: not supported with --nprocs {args.nprocs} "
                         "(one process only)")
    if args.batch_size < args.nprocs:
        raise InputError(f"--batch-size {args.batch_size} must be at least --nprocs "
                         f"{args.nprocs}: it is the global batch split over the processes")


def _profiled(trace: str | None) -> AbstractContextManager[Profile | None]:
    """:func:`netcl.runtime.profile` when ``--profile`` names a trace file, else nothing."""
    return profile() if trace is not None else nullcontext()


def cache_info_command(out: Any = None) -> int:
    """Print every cache: name, entries, size and folder, then what it holds (and a note).

    Examples:
        >>> import os, tempfile
        >>> os.environ["NETCL_CACHE_DIR"] = root = tempfile.mkdtemp()
        >>> cache_info_command()  # doctest: +ELLIPSIS
        netcl caches in /tmp/... (from NETCL_CACHE_DIR)
          cache          entries       size  folder
          programs             0        0 B  /tmp/.../programs
              compiled OpenCL program binaries (NETCL_DISK_CACHE)
        ...
          total                0        0 B
        0
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    out = out or sys.stdout
    infos = cache_info()
    origin = cache_root_origin()
    print(f"netcl caches in {cache_root()} "
          f"({'default' if origin == 'default' else 'from ' + origin})", file=out)
    print(f"  {'cache':<14}{'entries':>8}{'size':>11}  folder", file=out)
    for c in infos:
        print(f"  {c.name:<14}{c.entries:>8}{format_size(c.bytes):>11}  {c.path}", file=out)
        print(f"      {c.description}" + (f"; {c.note}" if c.note else ""), file=out)
    entries, size = sum(c.entries for c in infos), sum(c.bytes for c in infos)
    print(f"  {'total':<14}{entries:>8}{format_size(size):>11}", file=out)
    return 0


def cache_clear_command(names: Sequence[str], out: Any = None) -> int:
    """Clear the caches in ``names`` (all when empty), printing one line per cache.

    Raises:
        InputError: a name that is not a cache.
        RuntimeError: a cache was in use by a running netcl process and left alone (after the
            lines of those cleared).

    Examples:
        >>> import os, tempfile
        >>> os.environ["NETCL_CACHE_DIR"] = tempfile.mkdtemp()
        >>> cache_clear_command(["programs", "autotune"])  # doctest: +ELLIPSIS
        cleared programs: 0 entries, 0 B (/tmp/.../programs)
        cleared autotune: 0 entries, 0 B (/tmp/.../autotune)
        0
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    out = out or sys.stdout
    try:
        results = clear_caches(names or None)
    except ValueError as err:
        raise InputError(str(err)) from err
    busy = []
    for r in results:
        if r.skipped:
            print(f"left {r.name}: {r.skipped} ({r.path})", file=out)
            busy += [r.name] if r.skipped.startswith("in use") else []
        else:
            print(f"cleared {r.name}: {r.removed} entries, {format_size(r.freed)} ({r.path})",
                  file=out)
    if busy:
        raise RuntimeError(f"could not clear {', '.join(busy)}: in use by a running netcl "
                           f"process; run `netcl cache clear {' '.join(busy)}` once it has "
                           "exited")
    return 0


def _parser() -> argparse.ArgumentParser:
    debug_help = "on an error, print the full traceback too (or set NETCL_DEBUG=1)"
    parser = argparse.ArgumentParser(prog="netcl", description="netcl command line")
    parser.add_argument("--debug", action="store_true", help=debug_help)
    sub = parser.add_subparsers(dest="command", required=True)
    # SUPPRESS: a subcommand's --debug must not reset one given before the subcommand
    dp = sub.add_parser("devices", help="list OpenCL devices and the NumPy backend")
    dp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    dp.add_argument("--probe", action="store_true",
                    help="probe every OpenCL device again (after a driver change)")
    tp = sub.add_parser("train", help="train a CNN on scikit-learn's handwritten digits, or "
                        "(--task charlm) a character GPT on Python's help() text")
    tp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    tp.add_argument("--task", choices=tuple(TASK_DEFAULTS), default="digits",
                    help="digits (default): a CNN on 8x8 digits; charlm: a character language "
                    "model")
    tp.add_argument("--device", default="auto",
                    help="auto (default), cpu (NumPy), gpu, cl, cl:P:D or a device-name fragment")
    tp.add_argument("--epochs", type=int_at_least(1), default=None,
                    help="default per task: " + ", ".join(
                        f"{t} {d['epochs']}" for t, d in TASK_DEFAULTS.items()))
    tp.add_argument("--batch-size", type=int_at_least(1), default=None,
                    help="default per task: " + ", ".join(
                        f"{t} {d['batch_size']}" for t, d in TASK_DEFAULTS.items()))
    tp.add_argument("--lr", type=positive_float, default=None,
                    help="default per task: " + ", ".join(
                        f"{t} {d['lr']}" for t, d in TASK_DEFAULTS.items()))
    tp.add_argument("--seed", type=int, default=0)
    tp.add_argument("--workers", type=int_at_least(0), default=0,
                    help="DataLoader worker processes")
    tp.add_argument("--checkpoint-dir", default=None)
    tp.add_argument("--resume", action="store_true", help="continue from checkpoint-dir")
    tp.add_argument("--no-progress", action="store_true", help="no progress bar")
    tp.add_argument("--amp", action="store_true",
                    help="mixed precision: float16 matmuls/convolutions, dynamic loss scaling")
    tp.add_argument("--no-capture", action="store_true",
                    help="run every training step eagerly (default: capture the step once and "
                    "replay it, on OpenCL devices)")
    tp.add_argument("--profile", metavar="TRACE.json", default=None,
                    help="profile the run: print each kernel's launches and device time, "
                    "sorted, and write a Chrome trace (Perfetto, chrome://tracing) to this file")
    add_plot_argument(tp)
    tp.add_argument("--log-csv", metavar="METRICS.csv", default=None,
                    help="write per-epoch (and --log-every) metrics to this CSV file")
    tp.add_argument("--tensorboard", metavar="DIR", default=None,
                    help="write TensorBoard event files to DIR (needs pip install "
                    "'netcl[tensorboard]')")
    tp.add_argument("--log-every", type=int_at_least(1), default=None, metavar="K",
                    help="also log loss and accuracy every K training steps")
    tp.add_argument("--nprocs", type=int_at_least(1), default=1, metavar="N",
                    help="digits: train data-parallel over N processes on this host "
                    "(default 1)")
    add_charlm_arguments(tp)
    sub.add_parser("launch", add_help=False, help="run N ranks of a script on this host: "
                   "netcl launch -n N script.py [args ...] (netcl.distributed.launch)")
    add_tune_parser(sub)
    add_export_parser(sub)
    where = ("$NETCL_CACHE_DIR, else $XDG_CACHE_HOME/netcl, else ~/.cache/netcl; PoCL's kernel "
             "cache too unless POCL_CACHE_DIR names a folder of yours")
    cp = sub.add_parser("cache", help="list or clear netcl's file caches",
                        description=f"netcl's file caches, all in one folder ({where}).")
    cp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    cache_sub = cp.add_subparsers(dest="cache_command", required=True)
    info = cache_sub.add_parser(
        "info", help="print every cache: folder, entries, size",
        description="Print every cache netcl keeps: its folder, entries, size, what it holds.")
    info.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                      help=debug_help)
    clear = cache_sub.add_parser(
        "clear", help="delete cache entries (all caches by default)",
        description="Delete the entries of the named caches, all of them by default. Safe "
        "while other netcl processes run: they rebuild what they miss; PoCL's and the ICD "
        "folders are left alone (exit status 1) while a netcl process uses OpenCL.")
    clear.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=debug_help)
    clear.add_argument("names", nargs="*", metavar="NAME",
                       help=f"a cache to clear: {', '.join(CACHE_NAMES)}")
    return parser


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any,
                      **__: Any) -> None:
    print(f"netcl: warning: {message}", file=sys.stderr)


def _report(err: BaseException, debug: bool, err_out: TextIO) -> None:
    """One line for ``err`` (after its traceback when ``debug``)."""
    if debug:
        traceback.print_exception(type(err), err, err.__traceback__, file=err_out)
    lines = str(err).strip().splitlines() or [type(err).__name__]
    text = lines[0] + (" (more with --debug)" if len(lines) > 1 and not debug else "")
    module = type(err).__module__
    if isinstance(err, KeyboardInterrupt):
        text = "interrupted"
    elif module.startswith("pyopencl"):  # a driver's error, raised as pyopencl's own types
        text = f"OpenCL error: {text}"
    elif not isinstance(err, (InputError, *_EXPECTED)):
        text = f"internal error: {type(err).__name__}: {text}"
        text += "" if debug else " (rerun with --debug for the traceback and report it)"
    print(f"netcl: {text}", file=err_out, flush=True)


def _launch_argv(argv: Sequence[str]) -> list[str] | None:
    """The launcher's arguments when ``argv`` is ``[--debug] launch ...``, else None
    (argparse cannot hand a subcommand's leading ``-n`` over untouched).

    Examples:
        >>> _launch_argv(["launch", "-n", "2", "job.py", "--lr", "0.1"])
        ['-n', '2', 'job.py', '--lr', '0.1']
        >>> _launch_argv(["train", "launch"]) is None
        True
    """
    rest = list(argv)
    while rest and rest[0] == "--debug":
        rest.pop(0)
    return rest[1:] if rest and rest[0] == "launch" else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``netcl`` console command; returns the exit status (see the module
    docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    launch = _launch_argv(argv)
    if launch is not None:  # the launcher's own options, output and exit status
        return launch_main(launch)
    parser = _parser()
    args = parser.parse_args(argv)  # usage errors: argparse prints them and exits with 2
    try:
        debug = bool(args.debug) or env_flag("NETCL_DEBUG", False)
    except ValueError as err:
        parser.error(str(err))  # a bad NETCL_DEBUG is a usage error too (exit status 2)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            # NumPy's floating-point warnings say nothing the divergence check does not say
            # better (and AMP's float16 casts overflow on purpose: the GradScaler handles it)
            warnings.filterwarnings("ignore", category=RuntimeWarning, message=(
                r"(overflow|invalid value|divide by zero|underflow) encountered"))
            if args.command == "devices":
                return devices(reprobe=args.probe)
            if args.command == "cache":
                if args.cache_command == "info":
                    return cache_info_command()
                return cache_clear_command(args.names)
            if args.command == "export":
                return export_command(args)
            if args.command == "tune":
                try:
                    return tune_command(args, select_device=select_device)
                except ValueError as err:  # an input shape the model cannot take
                    raise InputError(f"tune: {err}") from err
            if args.resume and args.checkpoint_dir is None:
                raise InputError("--resume needs --checkpoint-dir")
            return train(args)
    except KeyboardInterrupt as err:
        sys.stdout.flush()
        _report(err, debug, sys.stderr)
        return EXIT_INTERRUPTED
    except InputError as err:
        _report(err, debug, sys.stderr)
        return EXIT_USAGE
    except Exception as err:
        _report(err, debug, sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
