"""Session 72, rule 4: is session 71's likely cause the cause? In one process, a warm-up compile
and then three stock cold compiles, each inside ``fresh_cache()`` (the old method), counting
``make_cubin`` (``ptxas``) calls per thread (``session71/compile_method.py``); with ``shutdown``,
Inductor's compile workers are shut down inside each ``fresh_cache()`` before the compile, so
that the workers the compile starts inherit its cache folders. If the workers' stale folder is
the cause, ``shutdown`` should remove the main-thread recompiles and the slow compiles.

    python benchmarks/handler/session72/cause.py {plain|shutdown} MODEL OUT.json
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
sys.path.insert(0, str(HERE.parent / "session71"))

import check_handler_gpu as chg  # noqa: E402
import compile_method as cm  # noqa: E402

CASES = ("llm_mlp_up:stock", "odd_small:stock", "vit_b_mlp:stock")


def main() -> int:
    variant, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    from slow_compile import old_cold_compile_state as plain
    from slow_compile import use_old_method

    use_old_method()  # the one-process method as it was when this ran (cold_compile_state shuts
    # the workers down itself since this rule's finding)
    if variant == "shutdown":

        @contextlib.contextmanager
        def with_new_workers(**kw):  # type: ignore[no-untyped-def]
            with plain(**kw):
                from torch._inductor.async_compile import shutdown_compile_workers

                shutdown_compile_workers()
                yield

        chg.cold_compile_state = with_new_workers
    from torch_diode.bench.measure import environment

    cm.count_cubins()
    chg.warm_up_compile()
    result = {"environment": environment(), "variant": variant, "rows": []}
    for case in CASES:
        result["rows"].append(cm.compile_case(model, case, cold=True))
        out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
