"""``Sequential`` and ``ModuleList``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from ._module import Module

__all__ = ["Identity", "ModuleDict", "ModuleList", "Sequential"]


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

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end; returns the Sequential (PyTorch's)."""
        self.add_module(str(len(self._modules)), module)
        return self

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


class ModuleDict(Module):
    """Modules by name, registered as children (PyTorch's ``nn.ModuleDict``).

    Examples:
        >>> heads = ModuleDict({"a": Identity()})
        >>> heads["b"] = Identity()
        >>> list(heads.keys()), "a" in heads, len(heads)
        (['a', 'b'], True, 2)
    """

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for name, m in (modules or {}).items():
            self[name] = m

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def __delitem__(self, name: str) -> None:
        delattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> Iterable[str]:
        """The names, in insertion order."""
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        """``(name, module)`` pairs, in insertion order."""
        return self._modules.items()


class Identity(Module):
    """Returns its input."""

    def forward(self, x: Any) -> Any:
        return x
