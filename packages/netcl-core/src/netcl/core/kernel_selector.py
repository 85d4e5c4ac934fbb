"""Choose a kernel variant and its launch parameters by shape, dtype and device.

:class:`KernelSelector` is a generic policy engine over an :class:`ExtendedDeviceProfile`: the
op families and their rules are registered by the op packages (netcl-ops registers matmul,
conv2d, elementwise, reduction and batchnorm; see :mod:`netcl.core.selection`). Each decision
is cached per (family, query key, environment switches), so a shape is decided once per
process. The order of precedence for a decision is:

1. :func:`force_variant` (thread-local) or ``NETCL_FORCE_<FAMILY>=<VARIANT_NAME>``: the
   variant with its default parameters (for tests and benchmarks), where it applies;
2. a winner recorded by :meth:`KernelSelector.autotune` (in memory, and persisted per device),
   where it applies;
3. the winner of the query's shape class, tuned on first use where tuning is on
   (``NETCL_AUTOTUNE``, see :mod:`netcl.core.autotune`) and the family has a tuner;
4. the family's rule, next to the family's kernels in the package that registers it
   (netcl-ops: ``matmul_rule``, ``conv2d_rule``, ``elementwise_rule``, ``reduction_rule``,
   ``batchnorm_rule``, each documenting its thresholds).

The ``select_*`` methods and ``select_*_config`` functions are thin wrappers that resolve
through the registered family; when only this module has been imported, the family is loaded
through the ``netcl.kernel_families`` entry point of the package providing it, and without
that package they raise :class:`KernelFamilyError` naming it. (Examples marked ``+SKIP`` need
netcl-ops, which provides the rules; netcl-ops's tests run them.)

Examples:
    >>> sel = get_kernel_selector()          # the NumPy backend's selector
    >>> sel.select_conv2d_kernel(8, 64, 32, 32, 64, 3, 3, padding=1).variant.name  # doctest: +SKIP
    'CONV2D_IM2COL'
    >>> with force_variant(KernelVariant.MATMUL_TILED):  # doctest: +SKIP
    ...     sel.select_matmul_kernel(4, 4, 4).variant.name
    'MATMUL_TILED'
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from netcl.core import autotune as _autotune
from netcl.core.capabilities import kernel_strategy
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.dtypes import itemsize
from netcl.core.kernels.primitives import KernelSpec as KernelSpec
from netcl.core.selection import (
    FAMILIES,
    AnyVariant,
    Candidate,
    FamilyTuner,
    KernelConfig,
    KernelFamilyError,
    KernelVariant,
    SelectionFamily,
    Tuned,
    Variant,
    apply_params,
    class_op,
    default_config,
    family_named,
    force_variant,
    forced_variant,
    int_arg,
    register_family,
    register_variant,
    registry_generation,
    time_candidate,
    tuner_for,
    variant_applies,
)
from netcl.core.selection._store import (
    Failed,
    TunedKey,
    read_winners,
    timed,
    tuned_path,
    write_winners,
)
from netcl.core.selection.args import json_key

__all__ = [
    "FAMILIES",
    "AnyVariant",
    "KernelConfig",
    "SelectionFamily",
    "KernelFamilyError",
    "KernelSelector",
    "KernelSpec",
    "KernelVariant",
    "Variant",
    "default_config",
    "force_variant",
    "get_kernel_selector",
    "register_family",
    "register_variant",
    "select_conv2d_config",
    "select_matmul_config",
]

IntPair = int | tuple[int, int]
Q = TypeVar("Q")
VT = TypeVar("VT", bound=KernelVariant | Variant)


class KernelSelector:
    """Decide kernel variants and launch parameters for one device.

    Args:
        profile: the device's :class:`ExtendedDeviceProfile` (``extended_profile(device)``).
        device: the PyOpenCL device it selects for (``None``: the NumPy backend, or a
            profile-only selector), handed to the family tuners' benches.

    Examples:
        >>> sel = KernelSelector(extended_profile(None))
        >>> sel.select_matmul_kernel(8, 8, 8).variant.name  # doctest: +SKIP
        'MATMUL_NAIVE'
        >>> sel.select_elementwise_kernel(4096).vector_width  # doctest: +SKIP
        4
    """

    def __init__(self, profile: ExtendedDeviceProfile, device: Any | None = None) -> None:
        if not isinstance(profile, ExtendedDeviceProfile):
            raise TypeError(
                f"KernelSelector: profile must be an ExtendedDeviceProfile, got {profile!r}"
            )
        self.profile = profile
        self.device = device
        self._decisions: dict[tuple[Any, ...], KernelConfig] = {}
        self._tuned: dict[TunedKey, Tuned] = {}
        self._failed: set[Failed] = set()
        self._attempted: set[TunedKey] = set()  # classes tuned (or tried) in this process
        self._volatile: set[TunedKey] = set()  # winners the budget cut short: never stored
        self._tuned_loaded = False
        self._lock = threading.Lock()
        self._generation = 0
        self._registry_seen = registry_generation()

    def clear_cache(self) -> None:
        """Drop every cached decision and in-memory tuned winner (the JSON file stays).

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> sel.clear_cache()
        """
        with self._lock:
            self._decisions.clear()
            self._tuned.clear()
            self._failed.clear()
            self._attempted.clear()
            self._volatile.clear()
            self._tuned_loaded = False
            self._generation += 1

    def epoch(self, family: str) -> tuple[AnyVariant | None, int]:
        """A token that changes whenever ``family``'s decisions may change.

        Forcing (:func:`force_variant`, ``NETCL_FORCE_<FAMILY>``), a new autotune winner,
        :meth:`clear_cache` and (re-)registering a family or variant each change it: callers
        that cache work derived from a ``select_*`` answer (the elementwise ops' launch plans)
        key on it.

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> before = sel.epoch("elementwise")
            >>> with force_variant(KernelVariant.ELEMENTWISE_SCALAR):
            ...     sel.epoch("elementwise") != before
            True
        """
        # both counters only grow, so their sum changes whenever either does
        return forced_variant(family), self._generation + registry_generation()

    # -- the shared decision path --

    def select(self, family: SelectionFamily[Q] | str, query: Q) -> KernelConfig:
        """The config for a checked ``query`` of ``family``: forced -> tuned -> class winner
        (tuned now where tuning is on) -> rule.

        A forced or tuned variant that does not apply to the query (the family's ``applies``
        predicate) gives way to the next step. Decisions after forcing are cached per
        (family, key, switches, kernel strategy, tuned winner), except those made while
        tuning had to wait (a recorder active, a tuning run under way).

        Raises:
            KernelFamilyError: the family is not registered, or its rule returned a variant
                that does not apply to the query.

        Examples:
            >>> one = Variant("SOLO_ONLY")
            >>> solo = register_family(
            ...     SelectionFamily("solo", parse=int, key=lambda n: (n,),
            ...                     rule=lambda profile, n: one,
            ...                     configure=lambda profile, v, n: default_config(v)),
            ...     {one: {"tile_m": 2}})
            >>> KernelSelector(extended_profile(None)).select(solo, 7).tile_m
            2
        """
        fam = family if isinstance(family, SelectionFamily) else family_named(family)
        profile = self.profile
        forced = forced_variant(fam.name)
        if forced is not None and variant_applies(forced, profile, query):
            return self._fit_device(default_config(forced))
        key = fam.key(query)
        self._ensure_tuned_loaded()
        tuned = self._tuned.get((fam.name, key))
        if self._registry_seen != registry_generation():  # a family or variant (re-)registered
            self._decisions.clear()
            self._registry_seen = registry_generation()
        cache_key = (fam.name, key, fam.switches(), kernel_strategy(profile), tuned)
        config = self._decisions.get(cache_key)
        if config is None:
            config, keep = self._decide(fam, query, tuned)
            if keep:
                self._decisions[cache_key] = config
        return config

    def _decide(self, fam: SelectionFamily[Q], query: Q, tuned: Tuned | None
                ) -> tuple[KernelConfig, bool]:
        """(config, whether to cache it) for a query with no cached decision."""
        profile = self.profile
        keep = True
        if tuned is None or not variant_applies(tuned.variant, profile, query):
            tuned, keep = self._class_winner(fam, query)
        if tuned is not None and variant_applies(tuned.variant, profile, query):
            return self._configure(fam, query, Candidate(tuned.variant, tuned.params)), keep
        variant = fam.rule(profile, query)
        if not variant_applies(variant, profile, query):
            raise KernelFamilyError(
                f"KernelSelector: the {fam.name} rule chose {variant.name}, which does "
                f"not apply to {query!r} on {profile.name}")
        return self._fit_device(fam.configure(profile, variant, query)), keep

    def _configure(self, fam: SelectionFamily[Q], query: Q, c: Candidate) -> KernelConfig:
        cfg = fam.configure(self.profile, c.variant, query)
        return self._fit_device(apply_params(cfg, c.params))

    # -- tuning by shape class (NETCL_AUTOTUNE) --

    def _class_winner(self, fam: SelectionFamily[Q], query: Q) -> tuple[Tuned | None, bool]:
        """The winner of ``query``'s shape class, tuning it now if allowed; and whether the
        decision made from it may be cached."""
        tuner = tuner_for(fam.name)
        if tuner is None:
            return None, True
        allowed = _autotune.gate(self.profile)
        if allowed == "off":  # the rule decides: stored class winners are not consulted
            return None, True
        slot = (class_op(fam.name), tuner.shape_class(query))
        known = self._tuned.get(slot)
        if known is not None or slot in self._attempted:
            return known, True
        if allowed != "go":
            return None, allowed != "defer"
        self._attempted.add(slot)
        return self._tune_class(fam, tuner, query, slot), True

    def _tune_class(self, fam: SelectionFamily[Q], tuner: FamilyTuner, query: Q,
                    slot: TunedKey) -> Tuned | None:
        """Time the tuner's candidates for ``query`` within the budget; the fastest wins."""
        fn = "KernelSelector"
        profile = self.profile
        rule = fam.rule(profile, query)
        seen: list[Candidate] = []
        for c in (Candidate(rule), *tuner.candidates(profile, query, rule)):
            if c not in seen and _applies(c.variant, profile, query):
                seen.append(c)
        timings: list[tuple[str, float | None]] = []
        best: tuple[float, Candidate] | None = None
        complete = True
        with _autotune.tuning_run():
            start = time.perf_counter()
            try:
                bench = tuner.bench(self.device, profile, query)
            finally:
                _autotune.spend(time.perf_counter() - start)
            if bench is None:  # nothing can run here: the rule decides
                return None
            for c in seen:
                if (slot[0], slot[1], c.label) in self._failed:
                    timings.append((c.label, None))
                    continue
                if _autotune.budget_left() <= 0.0:
                    complete = False
                    break
                start = time.perf_counter()
                try:
                    elapsed = time_candidate(bench(self._configure(fam, query, c)),
                                             tuner.repeats)
                except Exception as exc:  # a kernel that fails to build or run here loses
                    warnings.warn(f"{fn}: {fam.name} candidate {c.label} failed on "
                                  f"{profile.name} for {fam.key(query)!r}: {exc!r}",
                                  RuntimeWarning, stacklevel=2)
                    self._failed.add((slot[0], slot[1], c.label))
                    timings.append((c.label, None))
                    continue
                finally:
                    _autotune.spend(time.perf_counter() - start)
                timings.append((c.label, elapsed))
                if best is None or elapsed < best[0]:
                    best = (elapsed, c)
        times = dict(timings)
        rule_label = Candidate(rule).label
        _autotune.record(_autotune.TuneRecord(
            fam.name, cast(tuple[Any, ...], slot[1]), fam.key(query), rule_label,
            times.get(rule_label),
            None if best is None else best[1].label, None if best is None else best[0],
            tuple(timings), complete))
        won = None if best is None else Tuned(best[1].variant, best[1].params)
        with self._lock:
            if won is not None:
                self._tuned[slot] = won
                self._decisions.clear()
                self._generation += 1
                if not complete:  # cut short by the budget: tuned again in the next process
                    self._volatile.add(slot)
            self._persist(store=complete and won is not None)
        return won

    def _fit_device(self, cfg: KernelConfig) -> KernelConfig:
        """Shrink work-groups and ``tile_k`` to what the device accepts."""
        if self.profile.local_mem_size == 0:  # the NumPy backend: no work-groups to fit
            return cfg
        max_wg = max(1, self.profile.max_work_group_size)
        d0, d1 = cfg.local_size_2d
        tile_m, tile_n = cfg.tile_m, cfg.tile_n
        while d0 * d1 > max_wg:  # halve the larger side and the tile it covers
            if d0 >= d1:
                d0, tile_n = d0 // 2, max(1, tile_n // 2)
            else:
                d1, tile_m = d1 // 2, max(1, tile_m // 2)
        tile_k = cfg.tile_k
        if cfg.use_local_memory:
            width = itemsize(cfg.extra.get("dtype", "float32"))
            while tile_k > 1 and (tile_m + tile_n) * tile_k * width > self.profile.local_mem_size:
                tile_k //= 2
        return dataclasses.replace(cfg, tile_m=tile_m, tile_n=tile_n, tile_k=tile_k,
                                   local_size_1d=min(cfg.local_size_1d, max_wg),
                                   local_size_2d=(d0, d1))

    # -- the spec's per-family entry points (thin wrappers over the registered families) --

    def select_matmul_kernel(self, M: int, N: int, K: int, dtype: Any = "float32") -> KernelConfig:
        """Choose the matmul kernel for ``(M, K) @ (K, N)`` (family ``"matmul"``).

        The rule (netcl-ops ``matmul_rule``) documents the thresholds; the tuned key is
        ``(M, N, K, dtype)``.

        Examples:
            >>> sel = get_kernel_selector()
            >>> sel.select_matmul_kernel(256, 256, 256).variant.name  # doctest: +SKIP
            'MATMUL_TILED'
        """
        fam = family_named("matmul")
        return self.select(fam, fam.parse(M, N, K, dtype))

    def select_conv2d_kernel(
        self, N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: IntPair = 1,
        padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1, dtype: Any = "float32",
    ) -> KernelConfig:
        """Choose the conv2d kernel for input ``(N, C, H, W)`` and weight ``(K, C/groups, R, S)``.

        The rule (netcl-ops ``conv2d_rule``) documents the classes and the
        ``NETCL_CONV_WINOGRAD`` / ``NETCL_CONV_TILED_LOCAL`` switches;
        ``extra["output_shape"]`` is ``(N, K, OH, OW)``. The tuned key is
        ``(N, C, H, W, K, R, S, stride, padding, dilation, groups, dtype)`` with pairs.

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> cfg = sel.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3)  # doctest: +SKIP
            >>> cfg.extra["output_shape"]  # doctest: +SKIP
            (1, 4, 6, 6)
        """
        fam = family_named("conv2d")
        return self.select(fam, fam.parse(N, C, H, W, K, R, S, stride, padding, dilation,
                                          groups, dtype))

    def select_elementwise_kernel(self, n: int, dtype: Any = "float32") -> KernelConfig:
        """Choose the elementwise kernel for ``n`` elements (family ``"elementwise"``; tuned
        key ``(n, dtype)``).

        Examples:
            >>> get_kernel_selector().select_elementwise_kernel(100).variant.name  # doctest: +SKIP
            'ELEMENTWISE_SCALAR'
        """
        fam = family_named("elementwise")
        return self.select(fam, fam.parse(n, dtype))

    def select_reduction_kernel(self, n: int, kind: str = "sum") -> KernelConfig:
        """Choose the reduction kernel for ``n`` elements and ``kind`` (sum, mean, max, ...;
        family ``"reduction"``, tuned key ``(n, kind)``).

        Examples:
            >>> sel = get_kernel_selector()
            >>> sel.select_reduction_kernel(1000, "max").variant.name  # doctest: +SKIP
            'REDUCTION_PARALLEL'
        """
        fam = family_named("reduction")
        return self.select(fam, fam.parse(n, kind))

    def select_batchnorm_kernel(
        self, N: int, C: int, HW: int, training: bool, fuse_relu: bool = False,
        dtype: Any = "float32",
    ) -> KernelConfig:
        """Choose the batch-norm kernel (family ``"batchnorm"``; tuned key
        ``(N, C, HW, training, fuse_relu, dtype)``).

        Examples:
            >>> sel = get_kernel_selector()
            >>> sel.select_batchnorm_kernel(8, 16, 64, False, True).variant.name  # doctest: +SKIP
            'BATCHNORM_FUSED'
        """
        fam = family_named("batchnorm")
        return self.select(fam, fam.parse(N, C, HW, training, fuse_relu, dtype))

    # -- autotuning --

    def tuned_path(self) -> Path:
        """The file holding this device's winners (named from vendor, name and driver).

        A checksummed cache entry (``netcl.core._paths.write_entry``) whose content is JSON:
        ``{"winners": [{"op": ..., "key": [...], "variant": ...}, ...]}``.

        Raises:
            OSError: the cache folder cannot be created.
        """
        return tuned_path(self.profile)

    def _ensure_tuned_loaded(self) -> None:
        if self._tuned_loaded:
            return
        with self._lock:
            if not self._tuned_loaded:
                stored = read_winners(self.profile, stacklevel=6)
                self._tuned = {**stored.winners, **self._tuned}
                self._failed |= stored.failed
                self._tuned_loaded = True

    def lookup_tuned(self, op: str, key: Any) -> AnyVariant | None:
        """The autotuned winner for ``(op, key)``, from memory or this device's file.

        Examples:
            >>> KernelSelector(extended_profile(None)).lookup_tuned("no-such-op", (1,)) is None
            True
        """
        self._ensure_tuned_loaded()
        won = self._tuned.get((op, key))
        return None if won is None else won.variant

    def lookup_class_winner(self, family: str, query: Any) -> Candidate | None:
        """The tuned winner of ``query``'s shape class in ``family`` (memory or file), as the
        :class:`Candidate` it was timed as; ``None`` without one or without a tuner. Tunes
        nothing.

        Examples:
            >>> KernelSelector(extended_profile(None)).lookup_class_winner("demo", 1) is None
            True
        """
        tuner = tuner_for(family)
        if tuner is None:
            return None
        self._ensure_tuned_loaded()
        won = self._tuned.get((class_op(family), tuner.shape_class(query)))
        return None if won is None else Candidate(won.variant, won.params)

    def autotune(
        self,
        op: str,
        key: tuple[Any, ...],
        candidates: Mapping[VT, Callable[[], None]],
        repeats: int = 3,
        retune: bool = False,
    ) -> VT:
        """Time each candidate, keep the fastest for ``(op, key)`` and persist it per device.

        Each callable runs once to warm up (build, first-launch costs), then ``repeats``
        times under ``time.perf_counter``; it must block until its work is done. The best
        time of each decides. A candidate that raises is skipped with a warning. When
        ``op`` is a family name (``"matmul"``, ``"conv2d"``, ...), ``select_*`` returns the
        winner for the key documented there. Unless ``retune``, a known winner that is
        among the candidates is returned without timing anything.

        Raises:
            TypeError: bad ``op``, ``key`` or candidate types.
            ValueError: no candidates, ``repeats < 1``, or a candidate of another family.
            RuntimeError: every candidate raised.

        Examples:
            >>> import os, tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     os.environ["NETCL_CACHE_DIR"] = d
            ...     sel = KernelSelector(extended_profile(None))
            ...     won = sel.autotune("my-op", (2, "float32"),
            ...                        {KernelVariant.MATMUL_TILED: lambda: None})
            ...     print(won.name, sel.lookup_tuned("my-op", (2, "float32")).name)
            ...     del os.environ["NETCL_CACHE_DIR"]
            MATMUL_TILED MATMUL_TILED
        """
        fn = "KernelSelector.autotune"
        if not isinstance(op, str) or not op:
            raise TypeError(f"{fn}: op must be a non-empty str, got {op!r}")
        json_key(fn, key)
        repeats = int_arg(fn, "repeats", repeats, 1)
        if not candidates:
            raise ValueError(f"{fn}: no candidates for op {op!r}, key {key!r}")
        for v, call in candidates.items():
            if not isinstance(v, (KernelVariant, Variant)) or not callable(call):
                raise TypeError(f"{fn}: candidates must map KernelVariant to a callable, got {v!r}")
            if op in FAMILIES and v.family != op:
                raise ValueError(f"{fn}: candidate {v.name} is not a {op} kernel")
        known = self.lookup_tuned(op, key)
        if known is not None and known in candidates and not retune:
            return cast(VT, known)  # one of the candidates' keys
        best: tuple[float, VT] | None = None
        for variant, call in candidates.items():
            try:
                call()
                elapsed = min(timed(call) for _ in range(repeats))
            except Exception as exc:  # a kernel that fails to build or run here loses
                warnings.warn(f"{fn}: {op} candidate {variant.name} failed: {exc!r}",
                              RuntimeWarning, stacklevel=2)
                continue
            if best is None or elapsed < best[0]:
                best = (elapsed, variant)
        if best is None:
            raise RuntimeError(f"{fn}: every candidate for op {op!r}, key {key!r} raised")
        with self._lock:
            self._tuned[(op, key)] = Tuned(best[1])
            self._volatile.discard((op, key))
            self._decisions.clear()
            self._generation += 1
            self._persist()
        return best[1]

    def _persist(self, store: bool = True) -> None:
        """Merge the winners and failures into the device's file, atomically; never a
        crash. (``store`` is False when only failures are new.)"""
        try:
            stored = read_winners(self.profile, stacklevel=5)  # other processes' too
            merged = {**stored.winners, **self._tuned}
            self._tuned = merged
            self._failed |= stored.failed
            if store or self._failed - stored.failed:
                write_winners(self.profile, {k: v for k, v in merged.items()
                                             if k not in self._volatile}, self._failed)
        except (OSError, TypeError) as exc:
            warnings.warn(f"KernelSelector: could not save autotune winners: {exc!r}",
                          RuntimeWarning, stacklevel=3)


def _applies(variant: AnyVariant, profile: ExtendedDeviceProfile, query: Any) -> bool:
    """``variant_applies``, false for a candidate whose variant is not registered."""
    try:
        return variant_applies(variant, profile, query)
    except KernelFamilyError:
        return False


# --- per-device selectors and the ops-facing shortcuts ---------------------------------


def get_kernel_selector(cl_device: Any | None = None) -> KernelSelector:
    """The process-wide selector of a PyOpenCL device; None gives the NumPy backend's.

    Examples:
        >>> get_kernel_selector() is get_kernel_selector(None)
        True
    """
    return _selector_for(cl_device)


@functools.cache
def _selector_for(cl_device: Any | None) -> KernelSelector:
    return KernelSelector(extended_profile(cl_device), cl_device)


def select_matmul_config(
    M: int, N: int, K: int, dtype: Any = "float32", device: Any | None = None
) -> KernelConfig:
    """``get_kernel_selector(device).select_matmul_kernel(M, N, K, dtype)``.

    Examples:
        >>> select_matmul_config(2048, 2048, 2048).variant.name  # doctest: +SKIP
        'MATMUL_REGISTER_TILED'
    """
    return get_kernel_selector(device).select_matmul_kernel(M, N, K, dtype)


def select_conv2d_config(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: IntPair = 1,
    padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1, dtype: Any = "float32",
    device: Any | None = None,
) -> KernelConfig:
    """``get_kernel_selector(device).select_conv2d_kernel(...)``.

    Examples:
        >>> select_conv2d_config(1, 16, 8, 8, 16, 1, 1).variant.name  # doctest: +SKIP
        'CONV2D_IM2COL'
    """
    return get_kernel_selector(device).select_conv2d_kernel(
        N, C, H, W, K, R, S, stride, padding, dilation, groups, dtype
    )
