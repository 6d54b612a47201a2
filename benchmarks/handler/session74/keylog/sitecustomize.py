"""Session 74's Triton cache-key log (a diagnostic, loaded only with this folder on ``PYTHONPATH``):
in every Python process started so, the main process and Inductor's compile workers alike, once
``triton.compiler.compiler`` is imported its ``get_cache_key`` is wrapped to append, for every
Triton compile, the key's parts to ``$DIODE_KEYLOG_DIR/keys-<pid>.jsonl``: the source's hash and
its parts (the JIT function's ``cache_key``, ``attrs``, signature, constants), the backend's hash
(ptxas version and arch), the options' hash, the cache-invalidating environment variables and the
key. Does nothing unless ``DIODE_KEYLOG_DIR`` is set. See ``pool_cache.py``'s ``keys`` report.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
import threading

_DIR = os.environ.get("DIODE_KEYLOG_DIR")
_TARGET = "triton.compiler.compiler"


def _wrap(module) -> None:  # type: ignore[no-untyped-def]
    orig = module.get_cache_key

    def get_cache_key(src, backend, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        key = orig(src, backend, options, *args, **kwargs)
        rec: dict = {"pid": os.getpid(), "main_thread": threading.current_thread() is threading.main_thread()}
        try:
            fn = getattr(src, "fn", None)
            rec.update(
                name=getattr(src, "name", None),
                source_sha=hashlib.sha256(fn.src.encode()).hexdigest()[:16] if fn is not None else None,
                fn_cache_key=getattr(fn, "cache_key", None),
                attrs=str(getattr(src, "attrs", None)),
                signature=str(getattr(src, "signature", None)),
                constants=str(getattr(src, "constants", None)),
                src_hash=src.hash(),
                backend=backend.hash(),
                options=options.hash(),
                env=str(kwargs.get("env_vars", args[0] if args else None)),
                key=hashlib.sha256(key.encode()).hexdigest()[:16],
            )
        except Exception as e:  # a diagnostic: record what failed, never fail the compile
            rec["error"] = f"{type(e).__name__}: {e}"
        with open(os.path.join(_DIR, f"keys-{os.getpid()}.jsonl"), "a") as f:  # type: ignore[arg-type]
            f.write(json.dumps(rec) + "\n")
        return key

    module.get_cache_key = get_cache_key


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module):  # type: ignore[no-untyped-def]
            exec_module(module)
            _wrap(module)

        spec.loader.exec_module = exec_and_wrap  # type: ignore[method-assign]
        return spec


if _DIR and _TARGET not in sys.modules:
    os.makedirs(_DIR, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
