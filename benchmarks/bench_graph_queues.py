"""A captured ResNet-18 training step replayed on one in-order queue and on two
(``Graph.use_queues``, NOTE [ Two queues in a graph ] in netcl.runtime._overlap).

    python benchmarks/bench_graph_queues.py [--device cl] [--batch 32] [--width 64] [--steps 20]

Both rows replay the same graph, alternately, on the same inputs: ``step ms`` is the time per
step of back-to-back replays until the queue finished (best of ``--repeat`` batches of
``--steps``). The parameters after ``--check`` replays from one state must be bitwise equal
on one and two queues (the two-queue plan keeps every dependency), which the script checks and
prints. ``second`` is the number of launches the plan puts on the second queue, ``waits`` the
cross-queue event waits per replay.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

try:
    import netcl.runtime  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import manager
from netcl.nn import resnet18
from netcl.optim import SGD
from netcl.runtime import capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cl")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    dev = manager.default(args.device)
    if dev is None or dev.backend != "cl":
        raise SystemExit(f"bench_graph_queues: no OpenCL device for {args.device!r}")
    q = dev.queue
    net = resnet18(num_classes=10, stem="cifar", width=args.width, queue=q)
    opt = SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(net(x), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    rng = np.random.default_rng(0)
    x = Tensor.from_host(q, rng.standard_normal((args.batch, 3, args.size, args.size))
                         .astype(np.float32))
    y = Tensor.from_host(q, rng.integers(0, 10, args.batch))
    run = capture(step, warmup=1)
    run(x, y)
    run(x, y)
    q.finish()
    graph = run.graph
    if graph is None:
        raise SystemExit("bench_graph_queues: the step was not captured")
    params = list(net.parameters())
    state = [p.to_host().copy() for p in params]
    momenta = [s.to_host().copy() for s in _buffers(opt)]

    def restore() -> None:
        for p, h in zip(params, state):
            _write(q, p, h)
        for s, h in zip(_buffers(opt), momenta):
            _write(q, s, h)
        q.finish()

    results: dict[int, Any] = {}
    for queues in (1, 2):
        graph.use_queues(queues)
        restore()
        for _ in range(args.check):
            run(x, y)
        results[queues] = [p.to_host().copy() for p in params]
    same = all(np.array_equal(a, b) for a, b in zip(results[1], results[2]))
    print(f"bitwise equal after {args.check} replays from one state, 1 vs 2 queues: {same}")
    graph.use_queues(2)
    overlap = dict(graph.overlap)
    rows = []
    best = {1: float("inf"), 2: float("inf")}
    for _ in range(args.repeat):
        for queues in (1, 2):
            graph.use_queues(queues)
            run(x, y)
            q.finish()
            start = time.perf_counter()
            for _ in range(args.steps):
                run(x, y)
            q.finish()
            best[queues] = min(best[queues], (time.perf_counter() - start) / args.steps * 1e3)
    print(f"device: {dev}  ResNet-18 width {args.width}, batch {args.batch}, "
          f"{args.size}x{args.size}, SGD momentum; {graph.launches} launches per step")
    print(f"{'queues':>6} {'step ms':>8} {'second':>7} {'waits':>6}")
    for queues in (1, 2):
        extra = overlap if queues == 2 else {"second": 0, "waits": 0}
        print(f"{queues:>6} {best[queues]:>8.2f} {extra['second']:>7} {extra['waits']:>6}")
        rows.append({"queues": queues, "step_ms": best[queues], **extra})
    if args.json:
        Path(args.json).write_text(json.dumps({"device": str(dev), "bitwise_equal": same,
                                               "rows": rows}, indent=2))


def _buffers(opt: Any) -> list[Tensor]:
    return [v for s in opt.state.values() for v in s.values() if isinstance(v, Tensor)]


def _write(q: Any, t: Tensor, host: np.ndarray[Any, Any]) -> None:
    cl.enqueue_copy(q, t.buffer, np.ascontiguousarray(host), is_blocking=True)


if __name__ == "__main__":
    main()
