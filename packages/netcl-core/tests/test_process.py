"""Process-level behaviour: fork safety, SIGINT during a stuck kernel, life without pyopencl."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from netcl.core import process
from netcl.core.backend import opencl
from netcl.core.backend.cpu import CPUBackend
from netcl.core.device import DeviceHandle
from netcl.core.process import interruptible_finish
from netcl.core.tensor import Tensor


def _run(code: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "NETCL_DEVICE"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env={**environ, **env})


def test_forked_child_keeps_working(dev: DeviceHandle) -> None:
    selector = "cpu" if dev.backend == "cpu" else "cl"
    out = _run(f"""
        import os, numpy as np
        from netcl.core import Tensor, manager
        q = manager.default({selector!r}).queue
        t = Tensor.from_host(q, np.arange(5.0))
        u = Tensor.from_shape(q, (1000,))
        pid = os.fork()
        if pid == 0:
            c = Tensor.from_host(None, np.arange(3.0) * 2)
            ok = c.to_host().tolist() == [0.0, 2.0, 4.0]
            try:
                manager.default("cl")
                cl_refused = {selector!r} == "cpu"
            except RuntimeError as e:
                cl_refused = "forked" in str(e)
            del t, u
            import gc; gc.collect()
            raise SystemExit(0 if ok and cl_refused else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), t.to_host().tolist())
    """, NETCL_DEVICE=selector)  # the child's "auto" must still fall back to NumPy
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1) == ["0", "[0.0, 1.0, 2.0, 3.0, 4.0]\n"]


def test_sigint_during_stuck_kernel_exits_130(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("needs an OpenCL device")
    code = f"""
        import sys, numpy as np
        from netcl.core import Tensor, KernelSpec, manager
        q = manager.default({os.environ.get("NETCL_DEVICE") or "cl"!r}).queue
        spec = KernelSpec(name="spin", tune=False, src='''
            __kernel void spin(__global float* x, long n) {{
                float acc = x[0];
                for (long i = 0; i < n; ++i) acc = acc * 0.9999999f + 1.0f;
                x[0] = acc;
            }}''')
        x = Tensor.from_host(q, np.zeros(1))
        k = spec.build(q)
        print("ready", flush=True)
        k.run(q, (1,), (1,), x, np.int64(1) << 40)
        q.finish()
        print("finished?!", flush=True)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # let the kernel start
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        code_ = proc.wait(timeout=10)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
    assert code_ == 130 and elapsed < 5.0, (code_, elapsed)


def test_interruptible_finish(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("needs an OpenCL device")
    t = Tensor.from_host(dev.queue, np.ones(1000))
    assert interruptible_finish(dev.queue, timeout=10.0) is True
    assert t.to_host().sum() == 1000


def test_interruptible_finish_times_out() -> None:
    class SlowQueue:
        def finish(self) -> None:
            time.sleep(0.5)

    with pytest.raises(TimeoutError, match=r"did not finish within 0\.05 s"):
        interruptible_finish(SlowQueue(), timeout=0.05)


def test_without_pyopencl_numpy_works_and_opencl_says_how_to_install() -> None:
    out = _run("""
        import sys
        sys.modules["pyopencl"] = None  # simulate pyopencl not installed
        import numpy as np
        from netcl.core import Tensor, manager, KernelSpec
        from netcl.core.memory import create_pinned_buffer
        assert manager.discover() == []
        h = manager.default("auto")
        t = Tensor.from_host(h.queue, np.arange(3.0))
        print(h.backend, t.to_host().tolist())
        try:
            create_pinned_buffer(None, 16)
        except ImportError as e:
            print("ImportError:", e)
    """)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "cpu [0.0, 1.0, 2.0]"
    assert lines[1].startswith("ImportError: pyopencl required")
    assert "pip install 'netcl-core[cpu]'" in lines[1]


def test_cpu_backend_interface() -> None:
    be = CPUBackend()
    x = be.from_host(np.arange(32), dtype="float32")
    y = be.from_shape((4, 8), dtype="float32")
    assert y.sum() == 0 and x.dtype == np.float32
    assert be.to_host(x, (4, 8), "float32").shape == (4, 8)
    arr, event = be.to_host_async(x, (32,), "float32")
    assert event is None and arr is not None
    be.wait(None)


def test_fork_child_callbacks_run_in_order_and_a_failing_one_warns() -> None:
    out = _run("""
        import os
        from netcl.core import process
        seen = []
        def boom():
            raise OSError("planted")
        process.on_fork_in_child(lambda: seen.append("first") or ["kept"])
        process.on_fork_in_child(boom)
        process.on_fork_in_child(lambda: seen.append("last"))
        process.install_process_hooks()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the hooks ran inside os.fork(); the warning went to stderr
            kept = ["kept"] in process._inherited
            os.write(write_fd, f"{','.join(seen)} {kept} {process.registered_queues()}".encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(os.read(read_fd, 200).decode(), seen)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "first,last True [] []"
    assert "RuntimeWarning: netcl: a fork-child hook (boom) failed" in out.stderr
    assert "OSError('planted')" in out.stderr


def test_process_hooks_import_no_other_netcl_module() -> None:
    """The hooks are the bottom of core: device, memory and the transport import them."""
    tree = ast.parse(Path(process.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {f"{'.' * node.level}{node.module or ''}" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith((".", "netcl")) for name in imported - {"__future__"}), (
        imported)


def test_transport_keeps_the_hooks_old_import_paths() -> None:
    for name in ("install_process_hooks", "interruptible_finish", "register_queue",
                 "track_owner"):
        assert getattr(opencl, name) is getattr(process, name)
        assert name in opencl.__all__


def test_a_queue_is_registered_once() -> None:
    class Queue:
        def finish(self) -> None:
            pass

    q = Queue()
    process.register_queue(q)
    process.register_queue(q)
    assert sum(r is q for r in process.registered_queues()) == 1
