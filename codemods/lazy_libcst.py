"""LibCST, loaded when a fix is first built: `gradfix check` with nothing to fix never needs
it, and importing it costs about as much CPU as checking ten model files (in gradfix and
again in its fork server, which preloads the rules).

`cst` is the `libcst` module itself, registered as it: its contents are loaded at the first
attribute read (`cst.Name`), by `importlib`'s `LazyLoader`. Where LibCST was imported already,
it is that module.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING


def _lazily_imported(name: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    import libcst as cst
else:
    cst = _lazily_imported("libcst")

__all__ = ["cst"]
