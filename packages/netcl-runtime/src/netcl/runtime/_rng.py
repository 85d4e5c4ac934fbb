"""Random generators in a captured step: their seed and offset become graph parameters.

# NOTE [ Random streams in a graph ]
# A random op (dropout, uniform, ...) passes its generator's Philox seed, as two uint32 words,
# and the stream offset of its draw, a uint64, to its kernel; the generator's host-side offset
# then advances past the words drawn. A replay that repeated those scalars would draw the same
# mask every step, and eager calls between replays would draw masks a replay had drawn already.
# So each generator a step draws from (netcl.core.recording.drawing tells the trace) becomes
# three implicit graph parameters, ``rng<i>.seed_lo``, ``rng<i>.seed_hi`` and the *affine*
# ``rng<i>.offset``: a draw at offset ``o`` in a step that starts at offset ``b`` is the slot
# ``b + (o - b)``, and ``o - b`` is a constant of the step. The second trace runs with every
# generator at a probe state (another seed in both halves, the offset moved by a multiple of 4
# so no draw's alignment changes), which finds the slots as it finds a Param's; every trace
# leaves the generators as it found them. Each replay reads the generators' current seed and
# offset into the graph and then advances each offset by what one step draws, as eager
# execution would: a replay draws the masks eager execution would draw, bit for bit, and eager
# and replayed calls can take turns (manual_seed between calls is followed too). A step that
# reseeds a generator itself leaves it in the same state after every call: the replay sets
# that state. A generator made inside the step must start alike on both traces (its draws are
# then constants of the step, as eagerly); any other change raises UnstableStepError.
# The random kernels launch one 4-word block more than an aligned draw needs, so their launch
# size does not follow the offset either (netcl.ops._random). The graph owns its generators
# (Graph.streams): every Graph.replay() sets and advances them, whether a CapturedStep calls it
# or user code does, so a direct replay draws fresh masks too.
# The alternative, an offset counter in a device buffer the kernels read and bump, would change
# every random kernel and its eager launch, and the host generator would still have to follow.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import CaptureError, UnstableStepError

__all__ = ["OFFSET_PROBE", "State", "StreamParams", "bind_streams", "probe_state", "set_state",
           "state_of"]

#: How far the second trace moves each generator's offset (times its index + 1): a multiple of
#: 4, so every draw keeps its alignment within Philox's 4-word blocks.
OFFSET_PROBE = 0x5A5A_5A5A_5A50
_MASK = 0xFFFFFFFF

State = tuple[int, int]  # (seed, offset)


def probe_state(index: int, seed: int, offset: int) -> State:
    """The state the second trace gives generator ``index`` (first touched at ``seed``,
    ``offset``): each seed word is flipped by a mask of its own (no two words of any
    generators change alike) and the offset moves by a multiple of 4 unlike any other's."""
    flip = ((0x9E3779B9 + index) << 32) | (0x7F4A7C15 + 3 * index)
    move = OFFSET_PROBE * (index + 1)
    return seed ^ flip, offset + move if offset + move < 2**63 else offset - move


def set_state(stream: Any, state: State) -> None:
    """Put ``stream`` (a :class:`netcl.core.recording.RandomStream`) at ``state``."""
    stream.seed, stream.offset = state


def state_of(stream: Any) -> State:
    """``stream``'s (seed, offset)."""
    return int(stream.seed), int(stream.offset)


@dataclass(frozen=True)
class StreamParams:
    """A generator the captured step draws from, as three graph parameters.

    ``advance`` is the words one call draws (the offset moves by it after each replay), or
    ``None`` when the step reseeds the generator and leaves it at ``end`` whatever it started at.
    """

    stream: Any
    name: str
    advance: int | None
    end: State

    @property
    def names(self) -> tuple[str, str, str]:
        """The parameter names of the seed's low and high words and of the offset."""
        return f"{self.name}.seed_lo", f"{self.name}.seed_hi", f"{self.name}.offset"

    def values(self, state: State) -> dict[str, int]:
        """The parameters' values for a generator at ``state``."""
        seed, offset = state
        lo, hi, off = self.names
        return {lo: seed & _MASK, hi: seed >> 32, off: offset}

    def current(self) -> tuple[tuple[str, int], ...]:
        """The parameters and their values for the generator as it is now (a replay's hot
        path: no dict, names made once)."""
        seed, offset = int(self.stream.seed), int(self.stream.offset)
        lo, hi, off = self._names
        return (lo, seed & _MASK), (hi, seed >> 32), (off, offset)

    @functools.cached_property
    def _names(self) -> tuple[str, str, str]:
        return self.names

    def after_replay(self) -> None:
        """Leave the generator where eager execution of the step would have."""
        if self.advance is None:
            set_state(self.stream, self.end)
        else:
            self.stream.offset = int(self.stream.offset) + self.advance


def bind_streams(first: Sequence[tuple[Any, int, int]], first_ends: Sequence[State],
                 second: Sequence[tuple[Any, int, int]], second_ends: Sequence[State],
                 taken: Sequence[str]
                 ) -> tuple[list[StreamParams], dict[str, int], dict[str, int]]:
    """The generators of two traces (each as ``Trace.streams``, with their states after the
    trace), as graph parameters (NOTE [ Random streams in a graph ]), and the parameters'
    values in the first trace and in the second.

    ``taken`` are the names of the step's own parameters.

    Raises:
        UnstableStepError: the traces draw from other generators, or leave one in a state a
            replay cannot follow.
        CaptureError: a parameter of the step is named like a generator's.
    """
    if len(first) != len(second):
        raise UnstableStepError(
            f"capture: the step drew from {len(first)} random generator(s) on one call and "
            f"{len(second)} on the next; its work depends on host state a replay cannot repeat"
        )
    bound: list[StreamParams] = []
    values: dict[str, int] = {}
    probes: dict[str, int] = {}
    for i, ((stream, *start1), (other, *start2), end1, end2) in enumerate(
            zip(first, second, first_ends, second_ends)):
        name = f"rng{i}"
        if stream is not other:  # made inside the step: its draws are constants of the step
            if start1 != start2:
                raise UnstableStepError(
                    f"capture: random generator {i} is made inside the step and starts at "
                    f"(seed, offset) {tuple(start1)} on one call and {tuple(start2)} on the next; "
                    "a replay would repeat the first call's draws"
                )
            continue
        if (start2[0], start2[1]) != probe_state(i, start1[0], start1[1]):
            raise UnstableStepError(
                f"capture: random generator {name} ({stream!r}) had its seed or offset set inside "
                "the step before it drew (other than by manual_seed); a replay cannot follow "
                "that. Set it outside the step, or reseed it with manual_seed"
            )
        item = _bind(stream, name, (start1[0], start1[1]), end1, (start2[0], start2[1]), end2)
        clash = [param for param in item.names if param in taken]
        if clash:
            raise CaptureError(f"capture: the parameter name(s) {clash} are those of random "
                               f"generator {name} the step draws from; rename the parameter")
        bound.append(item)
        values.update(item.values((start1[0], start1[1])))
        probes.update(item.values((start2[0], start2[1])))
    return bound, values, probes


def _bind(stream: Any, name: str, start1: State, end1: State, start2: State, end2: State
          ) -> StreamParams:
    if end1 == end2:  # reseeded inside the step: the same state whatever it started at
        return StreamParams(stream, name, None, end1)
    advance = end1[1] - start1[1]
    if end1[0] == start1[0] and end2[0] == start2[0] and end2[1] - start2[1] == advance >= 0:
        return StreamParams(stream, name, advance, end1)
    raise UnstableStepError(
        f"capture: random generator {name} ({stream!r}) goes from (seed, offset) {start1} to "
        f"{end1} on one call and from {start2} to {end2} on the next; a replay can follow a "
        "generator the step draws from, or one it reseeds, not one whose state it sets otherwise"
    )
