"""Register OpenCL runtimes installed by pip with the ICD loader, before pyopencl loads it.

Intel's CPU OpenCL runtime (``pip install 'netcl-core[intel-cpu]'``: ``intel-opencl-rt`` and
``intel-cmplr-lib-rt``) puts ``libintelocl.so`` in the environment's ``lib`` folder, but the ICD
file its wheel ships names a build-machine path, so the loader never finds it. netcl writes its
own vendors folder, ``$NETCL_CACHE_DIR/icd/<environment hash>/``, holding one ``.icd`` file for
every vendor the loader would have read anyway (``OCL_ICD_VENDORS`` when it names a folder,
else ``OPENCL_VENDOR_PATH``, else ``/etc/OpenCL/vendors``) plus one for each pip runtime found,
and points ``OCL_ICD_VENDORS`` at it. Other vendors stay visible (a GPU driver's ICD is copied
over), and the PoCL bundled in the pyopencl wheel is found by that loader by itself. When
``OCL_ICD_VENDORS`` names a single ``.icd`` file the user chose one vendor, and netcl leaves it
alone; ``NETCL_ICD_REGISTER=0`` turns the registration off.

# NOTE [ ICD registration ]
# ocl-icd (the loader in the pyopencl wheel) reads OCL_ICD_VENDORS once, at the first OpenCL
# call, so this must run before the first get_platforms(); netcl.core._cl.cl() calls it before
# importing pyopencl. netcl-data, which imports no other netcl layer, does the same through its
# own copy (netcl/data/_cl_devices.py); tests-integration checks that both write the same folder.

Linux only: on Windows the Intel runtime registers itself in the registry.

Examples:
    >>> pip_runtimes(prefixes=[]) == {}
    True
"""

from __future__ import annotations

import hashlib
import os
import site
import sys
from pathlib import Path

from ._paths import atomic_write, cache_dir, mark_in_use
from .env import env_flag

__all__ = ["pip_runtimes", "register_pip_runtimes"]

# ICD file name -> library file name, for each runtime a pip wheel installs into <prefix>/lib.
_PIP_RUNTIMES = {"netcl-intel-cpu.icd": "libintelocl.so"}
_SYSTEM_VENDORS = "/etc/OpenCL/vendors"


def _prefixes() -> list[str]:
    """Where pip puts a wheel's data files: the environment, then the user base."""
    found = [sys.prefix]
    user_base = site.getuserbase()
    if user_base and user_base not in found:
        found.append(user_base)
    return found


def pip_runtimes(prefixes: list[str] | None = None) -> dict[str, str]:
    """ICD file name -> absolute library path of each pip-installed runtime present."""
    found: dict[str, str] = {}
    for prefix in _prefixes() if prefixes is None else prefixes:
        for icd_name, lib_name in _PIP_RUNTIMES.items():
            lib = Path(prefix, "lib", lib_name)
            if icd_name not in found and lib.is_file():
                found[icd_name] = str(lib)
    return found


def _existing_vendors(vendors_dir: str) -> dict[str, str]:
    """ICD file name -> its text, for every ``.icd`` in ``vendors_dir``."""
    entries: dict[str, str] = {}
    try:
        names = sorted(os.listdir(vendors_dir))
    except OSError:
        return entries
    for name in names:
        if name.endswith(".icd"):
            try:
                entries[name] = Path(vendors_dir, name).read_text()
            except OSError:
                continue
    return entries


def register_pip_runtimes() -> str | None:
    """Point the ICD loader at a vendors folder that adds pip runtimes; return that folder.

    Returns ``None`` (and changes nothing) when no pip runtime is installed, on a platform other
    than Linux, when ``OCL_ICD_VENDORS`` names one ``.icd`` file, or with ``NETCL_ICD_REGISTER=0``.
    """
    mark_in_use()  # `netcl cache clear` must not empty the folder before the loader reads it
    if not sys.platform.startswith("linux") or not env_flag("NETCL_ICD_REGISTER", True):
        return None
    runtimes = pip_runtimes()
    if not runtimes:
        return None
    folder = cache_dir("icd", hashlib.sha256(sys.prefix.encode()).hexdigest()[:16])
    current = os.environ.get("OCL_ICD_VENDORS", "")
    ours = bool(current) and Path(current).resolve() == folder.resolve()
    if ours and all((folder / name).is_file() for name in runtimes):
        return str(folder)  # done already, in this process or a parent (and not cleared since)
    if current and not ours and not os.path.isdir(current):
        return None  # the user picked a single vendor
    # a parent's folder emptied by `netcl cache clear` is filled again from the system's
    source = ((current if not ours else "") or os.environ.get("OPENCL_VENDOR_PATH")
              or _SYSTEM_VENDORS)
    wanted = _existing_vendors(source)
    wanted.update({name: lib + "\n" for name, lib in runtimes.items()})
    for name in os.listdir(folder):
        if name.endswith(".icd") and name not in wanted:
            (folder / name).unlink(missing_ok=True)
    for name, text in wanted.items():
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            atomic_write(path, text.encode())
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    return str(folder)
