"""``Sequential`` and ``ModuleList``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, overload

from ._module import Module

__all__ = ["ModuleList", "Sequential"]


class Sequential(Module):
    """Children called in order, each on the previous one's output.

    Examples:
        >>> s = Sequential(Identity(), Identity())
        >>> len(s), s(3)
        (2, 3)
    """

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, item in enumerate(modules):
                if not isinstance(item, Module):
                    raise TypeError(f"Sequential: item {i} must be a Module, got "
                                    f"{type(item).__name__}")
                self.add_module(str(i), item)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module | Sequential:
        items = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*items[index])
        return items[index]


class ModuleList(Module):
    """A list of modules whose parameters the parent sees.

    Examples:
        >>> ml = ModuleList([Identity()])
        >>> ml.append(Identity())
        >>> len(ml)
        2
    """

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> None:
        """Add ``module`` at the end."""
        self.add_module(str(len(self._modules)), module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]


class Identity(Module):
    """Returns its input."""

    def forward(self, x: Any) -> Any:
        return x
