"""Running our code right after another package's module is imported,
without importing it ourselves (importing Dynamo or accelerate at
`import torch` would cost start-up time every user pays)."""

import importlib.abc
import importlib.util
import sys


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of each module in `hooks` so
    that its hook runs right after the module's own code."""

    def __init__(self, hooks):
        self.hooks = hooks
        self.waiting = set(hooks) - set(sys.modules)

    def find_spec(self, name, path, target=None):
        if name not in self.waiting:
            return None
        self.waiting.discard(name)
        if not self.waiting:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        hook = self.hooks[name]

        def exec_module(module):
            run(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


def install(hooks) -> None:
    """Runs each hook of `hooks` ({module name: fn(module)}) on its module:
    now if it is imported already, else right after its import. Idempotent
    for one `hooks` dict."""
    for name, hook in hooks.items():
        if name in sys.modules:
            hook(sys.modules[name])
    if any(isinstance(f, _Finder) and f.hooks is hooks for f in sys.meta_path):
        return
    finder = _Finder(hooks)
    if finder.waiting:
        sys.meta_path.insert(0, finder)


# Marks what we wrapped, so that a second install (or a module imported
# again) never wraps a wrapper.
_WRAPPED = "_torch_tpu_wrapped"


def mark(fn):
    """`fn`, marked as our wrapper."""
    setattr(fn, _WRAPPED, True)
    return fn


def is_marked(fn) -> bool:
    return getattr(fn, _WRAPPED, False)
