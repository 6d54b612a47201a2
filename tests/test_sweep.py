"""The sweep collector on CPU: Inductor's own config enumeration (fake CUDA device), the kernel
specs that decide which compiled kernels problems share, and seeded sampling.

GPU behaviour (timing, failures, fidelity against Inductor) is in tests/test_sweep_gpu.py.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import replace

import pytest
import torch
from procs import alive

from torch_diode.collect import sweep
from torch_diode.records import Choice, Problem

HAS_TRITON = importlib.util.find_spec("triton") is not None


def mm(m, n, k, dtype="float16", **kw) -> Problem:
    return Problem(op="mm", m=m, n=n, k=k, dtype=dtype, **kw)


# ------------------------------------------------------------------------------------------------
# int_spec / kernel_spec
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [(0, sweep.LIT_ZERO), (1, sweep.LIT_ONE), (3, 1), (6, 2), (12, 4), (24, 8), (1024, 16), (4096, 16), (48, 16)],
)
def test_int_spec(value, code):
    assert sweep.int_spec(value) == code


def test_int_spec_rejects_negative():
    with pytest.raises(ValueError, match="non-negative"):
        sweep.int_spec(-2)


def test_kernel_spec_shared_by_aligned_sizes_and_split_by_what_changes_code():
    base = sweep.kernel_spec(mm(128, 6144, 4096))
    assert sweep.kernel_spec(mm(256, 1024, 2048)) == base  # all multiples of 16: one kernel family
    # fp16: 8 elements are 16 bytes, the widest access, so multiples of 8 share the family too
    assert sweep.kernel_spec(mm(1000, 1000, 1000)) == base
    assert sweep.kernel_spec(mm(1004, 1004, 1004)) != base  # 8-byte aligned rows only
    assert sweep.kernel_spec(mm(1001, 6144, 4096)) == base  # M never changes loads/stores/MMAs
    assert sweep.kernel_spec(mm(1, 6144, 4096)) != base  # ... except M == 1 (a literal)
    assert sweep.kernel_spec(mm(128, 6144, 4096, dtype="bfloat16")) != base
    transposed = sweep.kernel_spec(mm(2048, 1024, 4096, stride_a=(1, 2048)))
    assert transposed != base and dict(transposed.specs)["SAM"] == sweep.LIT_ONE
    addmm = sweep.kernel_spec(Problem(op="addmm", m=128, n=6144, k=4096))
    assert addmm.has_bias and dict(addmm.specs)["SIM"] == sweep.LIT_ZERO and dict(addmm.specs)["SIN"] == sweep.LIT_ONE
    bmm = sweep.kernel_spec(Problem(op="bmm", m=128, n=128, k=64, batch=8))
    assert bmm.kernel == "bmm" and "BATCH_SPEC" in dict(bmm.specs)
    assert base.index_dtype == "tl.int32"
    assert sweep.kernel_spec(mm(65536, 65536, 64)).index_dtype == "tl.int64"


def _choice(bm=64, bn=64, bk=32, stages=3, warps=4, even_k=True, template="triton::mm", **extra) -> Choice:
    return Choice(
        template=template,
        block_m=bm,
        block_n=bn,
        block_k=bk,
        group_m=8,
        num_stages=stages,
        num_warps=warps,
        even_k=even_k,
        allow_tf32=False,
        use_fast_accum=False,
        acc_type="tl.float32",
        extra=tuple(extra.items()),
    )


def test_launch_constexprs_mirror_the_template_branches():
    cx = sweep.launch_constexprs(mm(128, 256, 4096), _choice(), 211)
    assert cx["A_HINT"] and cx["B_HINT"] and cx["EVEN_K"] and cx["TEMPLATE"] == 211 and cx["K_LIT"] == 0
    # M < BLOCK_M: the mm template drops the contiguity hint for A
    cx = sweep.launch_constexprs(mm(16, 256, 4096), _choice(bm=64), 211)
    assert not cx["A_HINT"] and cx["B_HINT"]
    # a strided (sliced) A matches neither contiguity pattern
    cx = sweep.launch_constexprs(mm(128, 256, 4096, stride_a=(8192, 1)), _choice(), 211)
    assert not cx["A_HINT"]
    # the 2.11 bmm template tests the strides alone; 2.13 also wants M >= BLOCK_M
    p = Problem(op="bmm", m=16, n=256, k=512, batch=4)
    c = _choice(bm=64, template="triton::bmm")
    assert sweep.launch_constexprs(p, c, 211)["A_HINT"] and not sweep.launch_constexprs(p, c, 213)["A_HINT"]


def test_k_divisibility_matters_only_with_masks():
    even = sweep.launch_constexprs(mm(128, 256, 4096), _choice(bk=64), 211)
    odd = sweep.launch_constexprs(mm(128, 256, 4100), _choice(bk=64, even_k=False), 211)
    assert even["K_SPEC"] == 1 and odd["K_SPEC"] == 4


def test_short_k_loops_get_a_literal_k():
    cx = sweep.launch_constexprs(mm(128, 256, 64), _choice(bk=64), 211)
    assert cx["K_LIT"] == 64  # one iteration: Inductor's literal K removes the loop
    long = sweep.launch_constexprs(mm(128, 256, 64 * (sweep.LITERAL_K_TILES + 1)), _choice(bk=64), 211)
    assert long["K_LIT"] == 0


def test_launch_constexprs_refuse_unknown_template_kwargs():
    with pytest.raises(ValueError, match="WARP_SPECIALIZE"):
        sweep.launch_constexprs(mm(128, 256, 4096), _choice(WARP_SPECIALIZE=True), 211)
    with pytest.raises(ValueError, match="revision"):
        sweep.launch_constexprs(mm(128, 256, 4096), _choice(), 299)


def test_compile_key_shares_kernels_across_problems():
    c = _choice()
    k1 = sweep.compile_key(mm(128, 6144, 4096), c, 211)
    assert sweep.compile_key(mm(256, 1024, 2048), c, 211) == k1
    assert sweep.compile_key(mm(16, 1024, 2048), c, 211) != k1  # M < BLOCK_M changes the A hint
    assert sweep.compile_key(mm(256, 1024, 2048), _choice(stages=4), 211) != k1


# ------------------------------------------------------------------------------------------------
# Enumeration: Inductor's own heuristic
# ------------------------------------------------------------------------------------------------


def test_template_revision_of_the_installed_torch_is_known():
    assert sweep.template_revision() in sweep.TEMPLATE_HASHES


def test_template_revision_refuses_unknown_sources(monkeypatch):
    monkeypatch.setattr(sweep, "TEMPLATE_HASHES", {211: {"triton_mm": "0" * 64, "triton_bmm": "0" * 64}})
    with pytest.raises(RuntimeError, match="port the template changes"):
        sweep.template_revision()


@pytest.mark.parametrize(
    ("problem", "aten"),
    [
        (mm(128, 6144, 4096, dtype="bfloat16"), {"aten::mm"}),
        (mm(1000, 1000, 1000, stride_a=(1, 1000)), {"aten::mm"}),
        (Problem(op="addmm", m=1023, n=513, k=771, dtype="float32"), {"aten::addmm", "aten::bias_addmm"}),
        (Problem(op="bmm", m=257, n=129, k=65, batch=4, dtype="float32"), {"aten::bmm"}),
        (Problem(op="baddbmm", m=512, n=512, k=64, batch=16), {"aten::baddbmm"}),
    ],
    ids=lambda x: x.key() if isinstance(x, Problem) else None,
)
def test_inductor_choices_are_inductors(fake_cuda, problem, aten):
    default = sweep.inductor_choices(problem, "DEFAULT")
    exhaustive = sweep.inductor_choices(problem, "EXHAUSTIVE")
    assert {it.choice.template for it in default if it.kind == "aten"} == aten
    tri = [it.choice for it in exhaustive if it.kind == "triton"]
    assert len(tri) > 5 * len([it for it in default if it.kind == "triton"]) > 0
    assert len(set(tri)) == len(tri)
    template = "triton::bmm" if problem.op in ("bmm", "baddbmm") else "triton::mm"
    for c in tri:
        assert c.template == template
        # nothing forced: EVEN_K is exactly Inductor's static K % BLOCK_K == 0, TF32 off by default
        assert c.even_k == (problem.k % c.block_k == 0)
        assert c.allow_tf32 is False
        sweep.launch_constexprs(problem, c, sweep.template_revision())  # every config is sweepable


def test_inductor_choices_match_the_inductor_collectors_conversion(fake_cuda):
    """The sweep's choices are choice_from_ktc of the very KTCs Inductor's hook produces."""
    from torch._inductor import config as inductor_config
    from torch._inductor import ir
    from torch._inductor.choices import InductorChoices
    from torch._inductor.graph import GraphLowering
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.virtualized import V

    from torch_diode.inductor.convert import choice_from_ktc

    p = mm(512, 768, 3072, dtype="float32")
    graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x))
    with V.set_graph_handler(graph), inductor_config.patch(max_autotune=True, force_disable_caches=True):
        dev = torch.device("cuda")
        a = ir.InputBuffer(name="a", layout=ir.FixedLayout(dev, torch.float32, [512, 3072], [3072, 1]))
        b = ir.InputBuffer(name="b", layout=ir.FixedLayout(dev, torch.float32, [3072, 768], [768, 1]))
        theirs = [choice_from_ktc(k) for k in InductorChoices().get_ktc(MMKernelInputs([a, b]), mm_template, "mm")]
    ours = [it.choice for it in sweep.inductor_choices(p, "DEFAULT") if it.kind == "triton"]
    assert ours == theirs


def test_inductor_choices_rejects_unknown_space():
    with pytest.raises(ValueError, match="search_space"):
        sweep.inductor_choices(mm(64, 64, 64), "HUGE")


# ------------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------------


def test_sampling_is_seeded_and_order_independent(fake_cuda):
    p, q = mm(1024, 4096, 4096), mm(2048, 1024, 4096)
    items_p = sweep.inductor_choices(p, "EXHAUSTIVE")
    items_q = sweep.inductor_choices(q, "EXHAUSTIVE")
    s1 = sweep.sample_choices(items_p, p, 50, seed=1)
    assert sweep.sample_choices(list(reversed(items_p)), p, 50, seed=1) == s1
    assert sum(it.kind == "triton" for it in s1) == 50 and s1[0].kind == "aten"
    assert sweep.sample_choices(items_p, p, 50, seed=2) != s1
    assert sweep.sample_choices(items_q, q, 50, seed=1) != s1  # independent per problem
    assert sweep.sample_choices(items_p, p, None, seed=1) == sweep.sample_choices(items_p, p, 10**6, seed=1)
    # shared sampling: problems with the same config list draw the same configs
    sp, sq = sweep.sample_shared(items_p, 50, seed=1), sweep.sample_shared(items_q, 50, seed=1)
    assert {it.choice for it in sp} == {it.choice for it in sq}
    assert sweep.sample_shared(items_p, 50, seed=3) != sp
    # a larger shared sample contains the smaller one (raising max_configs is a top-up)
    assert {it.choice for it in sp} <= {it.choice for it in sweep.sample_shared(items_p, 80, seed=1)}


def test_skip_measured_leaves_out_measured_triton_configs_and_keeps_aten(fake_cuda):
    """Top-up: a problem already measured with a 30-config sample and raised to 50 gets only the
    20 new configs, plus ATen again; a problem with nothing missing needs no top-up."""
    p, q = mm(1024, 4096, 4096), mm(2048, 1024, 4096)
    small = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE", max_configs=30, seed=1))
    big = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE", max_configs=50, seed=1))
    have_p = {it.choice for it in small.choices(p)}
    have_q = {it.choice for it in big.choices(q)}
    full_p = big.choices(p)
    big.skip_measured({p: have_p, q: have_q})
    left = big.choices(p)
    assert [it.choice for it in left if it.kind == "aten"] == [it.choice for it in full_p if it.kind == "aten"] != []
    new = {it.choice for it in left if it.kind == "triton"}
    assert len(new) == 20 and not new & have_p and new | have_p >= {it.choice for it in full_p}
    assert big.needs_top_up(p) and not big.needs_top_up(q)
    assert big.needs_top_up(mm(512, 512, 512))  # not measured at all


def test_choice_lists_measure_the_listed_configs_and_aten(fake_cuda, tmp_path):
    """``choice_lists``: each problem gets ATen plus exactly the Triton configs listed for it (in
    the file's order); a listed config Inductor does not enumerate is counted, not measured; an
    unlisted problem and a file of another format are refused with the file named."""
    p, q = mm(1024, 4096, 4096), mm(2048, 1024, 4096)
    full = sweep.inductor_choices(p, "EXHAUSTIVE")
    tri = [it.choice for it in full if it.kind == "triton"]
    foreign = replace(tri[0], block_k=tri[0].block_k * 1024)  # no such config in Inductor's space
    path = tmp_path / "lists.json"
    sweep.write_choice_lists(path, {p: [tri[7], tri[2], foreign], q: []}, note="test")
    c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE", choice_lists=str(path)))
    got = c.choices(p)
    assert [it.choice for it in got if it.kind == "aten"] == [it.choice for it in full if it.kind == "aten"] != []
    assert [it.choice for it in got if it.kind == "triton"] == [tri[7], tri[2]]
    assert c.skipped == {"not_enumerated": 1}
    assert [it.kind for it in c.choices(q)] == ["aten"]
    with pytest.raises(ValueError, match=r"lists\.json: no choice list for .*512"):
        c.choices(mm(512, 512, 512))
    gz = tmp_path / "lists.json.gz"
    sweep.write_choice_lists(gz, {p: [tri[7], tri[2]]})
    assert sweep.read_choice_lists(gz) == {p: [tri[7], tri[2]]}
    path.write_text('{"format": "other", "problems": []}')
    fresh = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE", choice_lists=str(path)))
    with pytest.raises(ValueError, match=r"lists\.json: format 'other'"):
        fresh.choices(p)


# ------------------------------------------------------------------------------------------------
# Options and construction
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"search_space": "ALL"}, "search_space"),
        ({"max_configs": 0}, "max_configs"),
        ({"sample": "random"}, "sample"),
        ({"timing": "wall"}, "timing"),
        ({"min_reps": 5, "max_reps": 2}, "reps"),
        ({"workers": 0}, "workers"),
        ({"compile_timeout_s": 0}, "compile_timeout_s"),
        ({"graph_chunk": 0}, "graph_chunk"),
        ({"max_queued_us": 0.0}, "max_queued_us"),
        ({"choice_lists": ""}, "choice_lists"),
    ],
)
def test_options_validate(kw, match):
    with pytest.raises(ValueError, match=match):
        sweep.SweepOptions(**kw)


def test_collector_from_runner_options():
    from torch_diode.collect.runner import CollectOptions

    opts = CollectOptions(collector="sweep", search_space="DEFAULT", sweep_options={"max_configs": 40, "seed": 3})
    c = sweep.SweepCollector.from_options(opts, hardware="NVIDIA-H100", device="cuda", **dict(opts.sweep_options))
    assert c.options.search_space == "DEFAULT" and c.options.max_configs == 40 and c.options.seed == 3
    with pytest.raises(ValueError, match="unknown option"):
        sweep.SweepCollector.from_options(opts, hardware="NVIDIA-H100", bogus=1)
    with pytest.raises(ValueError, match="CUDA"):
        sweep.SweepCollector("NVIDIA-H100", device="cpu")
    with pytest.raises(ValueError, match="hardware_key"):
        sweep.SweepCollector("")


# ------------------------------------------------------------------------------------------------
# Compile planning: cost estimate (scheduling order) and problem order for reuse
# ------------------------------------------------------------------------------------------------


def _cfg(bm, bn, bk, warps=4, stages=3, **kw) -> Choice:
    return Choice.from_kwargs(
        "triton::mm",
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "EVEN_K": True, "ALLOW_TF32": False,
         "num_warps": warps, "num_stages": stages, **kw},
        strict=False,
    )  # fmt: skip


def test_compile_cost_ranks_what_compiles_slowly_first():
    p16, p32 = mm(1024, 1024, 1024), mm(1024, 1024, 1024, dtype="float32")
    big, small = _cfg(64, 256, 128), _cfg(32, 32, 32)
    assert sweep.compile_cost(p16, big) > sweep.compile_cost(p16, small) > 0
    # fp32 without TF32 lowers tl.dot to FMAs: the same tile costs more than in fp16 ...
    assert sweep.compile_cost(p32, big) > sweep.compile_cost(p16, big)
    # ... but not with TF32 (tensor cores again)
    assert sweep.compile_cost(p32, _cfg(64, 256, 128, ALLOW_TF32=True)) == sweep.compile_cost(p16, big)
    # more warps split the same tile over more threads
    assert sweep.compile_cost(p16, _cfg(64, 256, 128, warps=8)) < sweep.compile_cost(p16, big)
    assert sweep.compile_cost(p16, Choice(template="aten::mm")) == 0.0


def test_order_for_reuse_groups_problems_sharing_kernel_specs():
    a1, a2 = mm(128, 6144, 4096), mm(256, 1024, 2048)  # one spec (all aligned)
    b1, b2 = mm(1001, 1001, 1001), mm(999, 1001, 1001)  # another (odd N, K)
    c1 = mm(128, 6144, 4096, dtype="bfloat16")
    order = [a1, b1, c1, a2, b2]
    out = sweep.order_for_reuse(order)
    assert out == [a1, a2, b1, b2, c1]
    assert sorted(out, key=order.index) == order  # a permutation
    assert sweep.order_for_reuse(out) == out  # stable
    assert sweep.order_for_reuse([]) == []


def test_the_space_without_a_gpu_is_a_gpus(fake_cuda):
    """torch 2.14's register-spill prune reads the warp size from the GPU and prunes nothing
    without one: on this CPU machine 2.14 gave 1,650 Triton configs here, 2.10-2.13 give 1,400
    (``compat.gpu_warp_without_a_gpu``; this fails on 2.14 without it)."""
    items = sweep.inductor_choices(mm(1024, 1024, 2048), "EXHAUSTIVE")
    triton = [it.choice for it in items if it.kind == "triton"]
    assert len(triton) == 1400
    assert not [c for c in triton if c.block_m * c.block_n / (c.num_warps * 32) > 255]  # the prune's rule


def test_gpu_warp_without_a_gpu_reports_32_lanes_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_diode.inductor import compat

    real = torch.cuda.current_device, torch.cuda.get_device_properties
    monkeypatch.setattr(compat, "torch_version", lambda: (2, 14))
    with compat.gpu_warp_without_a_gpu():
        with compat.gpu_warp_without_a_gpu():  # nested (an enumeration inside another): no deadlock
            pass
        if not torch.cuda.is_available():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            assert props.warp_size == 32
            with pytest.raises(AttributeError, match="only warp_size"):
                props.multi_processor_count  # noqa: B018
    assert (torch.cuda.current_device, torch.cuda.get_device_properties) == real
    monkeypatch.setattr(compat, "torch_version", lambda: (2, 13))
    with compat.gpu_warp_without_a_gpu():  # 2.10-2.13 assume 32 lanes themselves: nothing changes
        assert (torch.cuda.current_device, torch.cuda.get_device_properties) == real


def test_max_compile_cost_leaves_out_slow_fp32_fma_tiles_only(fake_cuda):
    cap = 131072.0
    c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE", max_compile_cost=cap))
    full = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(search_space="EXHAUSTIVE"))
    p32 = mm(1024, 1024, 2048, dtype="float32")
    kept = c.choices(p32)
    assert all(sweep.compile_cost(p32, it.choice) <= cap for it in kept if it.kind == "triton")
    assert any(it.kind == "aten" for it in kept)
    n_left_out = len(full.choices(p32)) - len(kept)
    assert n_left_out > 0 and c.skipped == {"compile_cost": n_left_out}
    p16 = mm(1024, 1024, 2048)
    assert c.choices(p16) == full.choices(p16)  # every fp16 tile stays
    assert c.skipped == {"compile_cost": n_left_out}
    with pytest.raises(ValueError, match="max_compile_cost"):
        sweep.SweepOptions(max_compile_cost=0)


def test_literal_mode_specialises_on_every_size_and_stride(fake_cuda) -> None:
    """``literal=True`` passes every size and stride as the literal -value code (Inductor's
    rendering), so two problems of one kernel spec share a compiled kernel only without it."""
    rev = sweep.template_revision()
    a, b = mm(1024, 512, 2048, "float32"), mm(2048, 512, 2048, "float32")
    assert sweep.kernel_spec(a) == sweep.kernel_spec(b)
    c = next(it.choice for it in sweep.inductor_choices(a, "DEFAULT") if it.kind == "triton")
    assert sweep.compile_key(a, c, rev) == sweep.compile_key(b, c, rev)
    assert sweep.compile_key(a, c, rev, literal=True) != sweep.compile_key(b, c, rev, literal=True)
    cx = sweep.launch_constexprs(a, c, rev, literal=True)
    vals = sweep.literal_values(a)
    assert vals == {"M_SPEC": 1024, "N_SPEC": 512, "K_SPEC": 2048, "SAM": 2048, "SAK": 1, "SBK": 512, "SBN": 1,
                    "SCM": 512, "SCN": 1, "SIM": 0, "SIN": 0}  # fmt: skip
    assert all(cx[k] == -v for k, v in vals.items()) and cx["K_LIT"] == 2048
    assert sweep.SweepOptions().literal_sizes is True
    batched = Problem(op="bmm", m=64, n=32, k=16, batch=3, dtype="float16")
    assert sweep.literal_values(batched)["BATCH_SPEC"] == 3 and sweep.literal_values(batched)["SAQ"] == 64 * 16


def test_runner_top_up_reopens_only_problems_that_lack_sampled_configs(fake_cuda, tmp_path, caplog):
    """The runner's side of a top-up, without a GPU: a file holds one problem with half of its
    sampled configs, one with all of them and one that failed as a whole. With ``top_up`` only the
    first is collected again; without it, all three are skipped. (A time budget of 0 stops before
    anything would be measured; the measuring itself is tests/test_sweep_gpu.py's.)"""
    import logging

    from torch_diode.collect.runner import CollectOptions, _run_rank
    from torch_diode.dataset import DatasetWriter
    from torch_diode.records import FailureRecord, Provenance, TimingRecord

    hw = "NVIDIA-H100"
    sweep_options = {"max_configs": 20, "seed": 3, "sample": "shared"}
    planner = sweep.SweepCollector(hw, sweep.SweepOptions(search_space="EXHAUSTIVE", **sweep_options))
    half, full, failed, new = mm(1024, 512, 4096), mm(512, 2048, 1024), mm(384, 384, 384), mm(640, 640, 640)
    path = tmp_path / "train.msgpack"
    with DatasetWriter(path, Provenance(hardware=hw, collector="sweep")) as w:
        items = planner.choices(half)
        for i, it in enumerate(items[: len(items) // 2]):
            w.add(TimingRecord(problem=half, choice=it.choice, time_us=10.0 + i, hardware=hw))
        for i, it in enumerate(planner.choices(full)):
            w.add(TimingRecord(problem=full, choice=it.choice, time_us=20.0 + i, hardware=hw))
        w.add_failure(FailureRecord(problem=failed, choice=None, reason="oom", message="", hardware=hw))

    def run(top_up: bool) -> int:
        opts = CollectOptions(
            collector="sweep",
            search_space="EXHAUSTIVE",
            hardware=hw,
            progress=False,
            top_up=top_up,
            time_budget_s=0.0,
            sweep_options=tuple(sweep_options.items()),
        )
        return _run_rank([half, full, failed, new], opts, path, device="cuda").problems_skipped

    assert run(top_up=False) == 3
    with caplog.at_level(logging.INFO, logger="torch_diode.collect.runner"):
        assert run(top_up=True) == 2  # `full` and `failed`; `half` is reopened, `new` was never there
    assert "1 problem already collected, short of sampled configs: topping up" in caplog.text


def test_settle_partials_completes_finished_problems_and_keeps_the_rest(tmp_path):
    """Checkpointed parts (``OUT.partial`` and a rank's ``OUT.rank0.<ext>.partial``) of a problem
    that ``OUT`` now holds complete move into ``OUT`` with their own provenance; the parts of
    unfinished problems gather in ``OUT.partial``; settling again changes nothing."""
    from torch_diode.collect import partial_path, settle_partials
    from torch_diode.dataset import DatasetWriter, read_dataset
    from torch_diode.records import FailureRecord, Provenance, TimingRecord

    hw = "NVIDIA-H100"
    run1, run2 = (Provenance(hardware=hw, collector="sweep", command=f"run {i}") for i in (1, 2))
    aten = Choice(template="aten::mm")
    configs = [
        Choice(template="triton::mm", block_m=16 * i, block_n=32, block_k=32, num_stages=3, num_warps=4)
        for i in (1, 2, 3)
    ]
    done_p, open_p, rank_p = mm(512, 512, 512), mm(256, 512, 4096), mm(64, 64, 64)
    out = tmp_path / "val.msgpack"

    def rec(p, c, t):
        return TimingRecord(problem=p, choice=c, time_us=t, hardware=hw)

    with DatasetWriter(partial_path(out), run1) as w:  # an earlier run's parts
        for r in (
            rec(done_p, aten, 9.0),
            rec(done_p, configs[0], 5.0),
            rec(open_p, aten, 20.0),
            rec(open_p, configs[0], 30.0),
        ):
            w.add(r)
        w.add_failure(
            FailureRecord(problem=done_p, choice=configs[1], reason="compile_error", message="x", hardware=hw)
        )
    with DatasetWriter(tmp_path / "val.rank0.msgpack.partial", run2, format="msgpack") as w:  # a rank's parts
        w.add(rec(rank_p, configs[2], 1.0))
    with DatasetWriter(out, run2) as w:  # the rest of done_p, finished later
        w.add(rec(done_p, aten, 9.5))
        w.add(rec(done_p, configs[2], 4.0))

    assert settle_partials(out) == 1
    main = read_dataset(out)
    assert set(main.problems) == {done_p}
    rows = zip(main.choice_idx.tolist(), main.time_us.tolist(), main.source_idx.tolist())
    times = sorted(((main.choices[c], t, main.sources[s].command) for c, t, s in rows), key=repr)
    assert times == sorted(
        [(aten, 9.0, "run 1"), (configs[0], 5.0, "run 1"), (aten, 9.5, "run 2"), (configs[2], 4.0, "run 2")], key=repr
    )
    assert main.measured_choices()[done_p] == {aten, *configs}  # the part's failure came along
    side = read_dataset(partial_path(out), format="msgpack")
    assert set(side.problems) == {open_p, rank_p} and len(side) == 3
    assert not (tmp_path / "val.rank0.msgpack.partial").exists()

    assert settle_partials(out) == 0  # nothing new: no duplicates
    assert read_dataset(out) == main and len(read_dataset(partial_path(out), format="msgpack")) == 3


def test_runner_resumes_a_checkpointed_problem_with_the_choices_it_lacks(fake_cuda, tmp_path):
    """``collect()`` settles the parts a killed run left, skips finished problems, and hands the
    sweep the parts' choices so a checkpointed problem is timed only where it lacks them (a time
    budget of 0 stops before measuring: the measuring is tests/test_sweep_gpu.py's)."""
    from torch_diode.collect import CollectOptions, collect, partial_choices, partial_path
    from torch_diode.dataset import DatasetWriter, read_dataset
    from torch_diode.records import Provenance, TimingRecord

    hw = "NVIDIA-H100"
    planner = sweep.SweepCollector(hw, sweep.SweepOptions(search_space="EXHAUSTIVE"))
    finished, halfway = mm(512, 512, 512), mm(384, 640, 1024)
    out = tmp_path / "val.msgpack"
    prov = Provenance(hardware=hw, collector="sweep")
    items = [it for it in planner.choices(halfway) if it.kind == "triton"]
    with DatasetWriter(out, prov) as w:
        for i, it in enumerate(planner.choices(finished)):
            w.add(TimingRecord(problem=finished, choice=it.choice, time_us=10.0 + i, hardware=hw))
    with DatasetWriter(tmp_path / "val.rank1.msgpack.partial", prov, format="msgpack") as w:
        for i, it in enumerate(items[: len(items) // 3]):
            w.add(TimingRecord(problem=halfway, choice=it.choice, time_us=5.0 + i, hardware=hw))
    opts = CollectOptions(
        collector="sweep",
        search_space="EXHAUSTIVE",
        hardware=hw,
        progress=False,
        workers=1,
        time_budget_s=0.0,
        checkpoint_s=30,
    )
    summary = collect([finished, halfway], opts, out)
    assert summary.problems_skipped == 1 and summary.problems_measured == 0
    assert set(read_dataset(out).problems) == {finished}  # halfway stays out of OUT until complete
    have = partial_choices(out)
    assert have == {halfway: {it.choice for it in items[: len(items) // 3]}}
    assert read_dataset(partial_path(out), format="msgpack").hardware == hw
    planner.skip_measured(have)
    left = [it.choice for it in planner.choices(halfway) if it.kind == "triton"]
    assert left == [it.choice for it in items[len(items) // 3 :]]


def test_checkpoint_option_is_for_the_sweep_and_positive():
    from torch_diode.collect import CollectOptions

    with pytest.raises(ValueError, match=r"^checkpoint_s \(--checkpoint\): only the sweep"):
        CollectOptions(collector="inductor", checkpoint_s=60)
    with pytest.raises(ValueError, match=r"^checkpoint_s \(--checkpoint\): must be a positive"):
        CollectOptions(collector="sweep", checkpoint_s=0)
    assert CollectOptions(collector="sweep", checkpoint_s=60).checkpoint_s == 60


def test_time_limit_stops_a_wait_on_a_child_process_and_kills_it():
    """What a compile worker does with ``compile_timeout_s``: Triton waits on ``ptxas`` through
    ``subprocess.run``, which the limit interrupts (and which then kills the child)."""
    import os
    import signal
    import subprocess
    import time

    before = signal.getsignal(signal.SIGALRM)
    t0 = time.perf_counter()
    with pytest.raises(sweep.CompileTimeout, match=r"not compiled within 0.3 s"):
        with sweep.time_limit(0.3):
            subprocess.run(["sleep", "30"], check=True)
    assert time.perf_counter() - t0 < 5
    assert signal.getsignal(signal.SIGALRM) is before  # the worker's handler is put back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # and no alarm is left armed
    out = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "^sleep 30$"], capture_output=True, text=True)
    assert not out.stdout.strip(), "the interrupted child was left running"
    with sweep.time_limit(5):  # a block that ends in time is untouched
        time.sleep(0.05)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with sweep.time_limit(None):
        time.sleep(0.05)


def test_compile_processes_take_the_ptxas_variables_of_the_pool_start(monkeypatch):
    """The pool starts a compile process per submit, each with the environment of that moment; each
    takes the ptxas variables as they were when the pool was made, when the collector aligned its
    own Triton's ptxas version with them (session 77), not as a torch.compile in this process set
    them later: the same cache keys as the process that loads their kernels."""
    import subprocess

    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", "/opt/b/ptxas")
    c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=2))  # the pool needs no GPU
    try:
        pool = c._get_pool()
        monkeypatch.setenv("TRITON_PTXAS_PATH", "/late/ptxas")  # as Inductor sets it, after the pool was made
        monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH")
        show = 'sleep 0.5; echo "${TRITON_PTXAS_PATH-unset}|${TRITON_PTXAS_BLACKWELL_PATH-unset}"'
        futs = [pool.submit(subprocess.check_output, ["sh", "-c", show], text=True) for _ in range(2)]
        assert [f.result(timeout=120) for f in futs] == ["unset|/opt/b/ptxas\n"] * 2
        assert len(pool._processes) == 2  # both started after the change
    finally:
        c.close()


def test_compile_processes_leave_ctrl_c_to_the_parent(tmp_path):
    """`timeout --signal=INT` signals the whole process group (session 7: two chunks hung 30 s
    at their deadline, then were killed): a compile process ignores SIGINT and finishes its
    kernel, the pool stays usable, and the parent's close() stops the processes."""
    import os
    import signal
    import subprocess
    import time

    c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=2))  # the pool needs no GPU
    try:
        pool = c._get_pool()
        # Two tasks that run at the same time, so in both processes, each after its initializer:
        # each marks its start, waits for the other's mark, then stands in for a kernel's compile.
        marks = [tmp_path / "a", tmp_path / "b"]
        wait = f"n=0; while [ ! -e {marks[0]} ] || [ ! -e {marks[1]} ]; do sleep 0.05; n=$((n+1)); [ $n -lt 1200 ] || exit 7; done"
        futs = [pool.submit(subprocess.call, ["sh", "-c", f"touch {m}; {wait}; sleep 1"]) for m in marks]
        deadline = time.monotonic() + 60
        while not all(m.exists() for m in marks) and time.monotonic() < deadline:
            time.sleep(0.05)
        procs = list(pool._processes.values())
        assert len(procs) == 2 and all(m.exists() for m in marks)
        for proc in procs:
            os.kill(proc.pid, signal.SIGINT)
        assert [f.result(timeout=60) for f in futs] == [0, 0]  # finished, not interrupted
        assert pool.submit(sum, [1, 2]).result(timeout=60) == 3  # and the pool is not broken
        procs = list(pool._processes.values())  # it may have started another for that
    finally:
        before = signal.getsignal(signal.SIGINT)
        c.close()
    assert signal.getsignal(signal.SIGINT) is before  # close() puts the handler back
    assert not any(p.is_alive() for p in procs)


def test_close_waits_until_every_compile_process_has_ended():
    """CI failed the test above once: CPython's pool thread reaps the workers too, and a join in
    close() that loses that race returns before the exit status is recorded, so a worker that was
    gone still read as alive. Several rounds, as the race needs some luck to show."""
    import time

    for _ in range(6):
        c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=2))
        pool = c._get_pool()
        assert [f.result(timeout=60) for f in [pool.submit(time.sleep, 0.2) for _ in range(2)]] == [None, None]
        procs = list(pool._processes.values())
        c.close()
        assert not [p.pid for p in procs if p.is_alive()]


_GROUP_SCRIPT = """
import os, subprocess, sys, time
from torch_diode.collect import sweep
c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=1))
pool = c._get_pool()
print("pgrp", os.getpgrp(), pool.submit(os.getpgrp).result(), flush=True)
fut = pool.submit(subprocess.call, ["sleep", "2"])  # a stand-in for the ptxas a compile runs
time.sleep(0.7)
try:  # "ready" inside: the test's SIGINT can land while print is still returning
    print("ready", flush=True)
    time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("child", fut.result(timeout=60), flush=True)
c.close()
"""


def _script(code: str, **kw):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True, **kw
    )


def test_a_signal_to_the_parents_group_does_not_reach_what_a_compile_process_runs():
    """Session 10's chunk s10f: the deadline's SIGINT to the process group killed seven `ptxas`
    (each printed its PTX into the log; a killed `ptxas` reads as the config's compile error).
    A compile process has its own group: the parent is interrupted, the child process runs on."""
    import os
    import signal

    proc = _script(_GROUP_SCRIPT)
    try:
        pgrp, parent_group, worker_group = proc.stdout.readline().split()
        assert pgrp == "pgrp" and worker_group != parent_group
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(int(parent_group), signal.SIGINT)  # what `timeout --signal=INT` does
        out = proc.communicate(timeout=60)[0]
    finally:
        proc.kill()
    assert "interrupted" in out
    assert "child 0" in out, out  # `sleep` finished (a SIGINT would have given -2)


def test_a_killed_ptxas_is_told_apart_from_a_compile_error():
    assert sweep._killed_by_signal("PTXASError: `ptxas` failed with error code -2")
    assert sweep._killed_by_signal("PTXASError: `ptxas` failed with error code -9")
    assert not sweep._killed_by_signal("PTXASError: `ptxas` failed with error code 255")
    assert not sweep._killed_by_signal("OutOfResources: out of resource: shared memory, Required: 262144")
    assert not sweep._killed_by_signal("CompilationError: error code -2 in user code")


def test_a_compile_process_whose_parent_died_while_it_started_ends():
    """The parent's pid comes from the parent: a process that starts after its parent died (a
    SIGKILL during the seconds a spawned interpreter takes to import) ends at once."""
    import os
    import subprocess
    import sys
    import time

    code = (
        "import os, sys, time\nfrom torch_diode.collect import sweep\n"
        "sweep._worker_init(None, parent=os.getppid() + 10**7)\n"  # a pid that is not its parent
        "time.sleep(600); sys.exit(0)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, timeout=120, capture_output=True, text=True)
    assert "Traceback" not in out.stderr, out.stderr  # _worker_init took the parent's pid and ran
    # ended by the watch, not after its sleep (the bound leaves room for importing torch when loaded)
    assert out.returncode == 1 and time.monotonic() - t0 < 100


def test_compile_processes_end_with_their_parent():
    """Out of the parent's group, a compile process would outlive a SIGKILLed parent (the
    deadline's `--kill-after`); it watches the parent and ends with it, even inside a task."""
    import os
    import signal
    import time

    code = (
        "import time\nfrom torch_diode.collect import sweep\n"
        "c = sweep.SweepCollector('NVIDIA-H100', sweep.SweepOptions(workers=1))\n"
        "pool = c._get_pool(); pool.submit(sum, [1]).result()\n"  # started and initialised
        "pool.submit(time.sleep, 60); time.sleep(0.5)\n"
        "print(list(pool._processes), flush=True); time.sleep(60)\n"
    )
    proc = _script(code)
    try:
        (worker,) = eval(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not alive(worker):
                break
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            raise AssertionError("the compile process outlived its parent by 20 s")
    finally:
        proc.kill()


def test_graph_parts_hold_about_the_gpu_time_asked_for():
    assert sweep.graph_part(None, 0, 5e5, 64) == sweep.FIRST_GRAPH_CONFIGS  # times not known yet
    assert sweep.graph_part(None, 0, 5e5, 3) == 3
    cost = [100.0] * 10 + [3e5, 3e5, 9e5, 10.0]
    assert sweep.graph_part(cost, 0, 500.0, 64) == 5  # 5 x 100 µs
    assert sweep.graph_part(cost, 0, 5e5, 4) == 4  # at most `most`
    assert sweep.graph_part(cost, 10, 5e5, 64) == 1  # a second 3e5 would pass 5e5
    assert sweep.graph_part(cost, 12, 5e5, 64) == 1  # one config over the target still goes alone
    assert sweep.graph_part(cost, 13, 5e5, 64) == 1
    assert sweep.graph_part(cost, 14, 5e5, 64) == 0  # nothing left
    parts, pos = [], 0
    while pos < len(cost):
        n = sweep.graph_part(cost, pos, 5e5, 64)
        parts.append(n)
        pos += n
    assert sum(parts) == len(cost) and parts == [11, 1, 1, 1]


class _GpuStandIn:
    """The outside world of :func:`sweep.wait_for_gpu` on a machine without one: a CUDA event
    whose kernels end at ``ends`` (monotonic seconds)."""

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.queries = 0

    def query(self) -> bool:
        self.queries += 1
        return time.monotonic() >= self.ends


def test_waiting_for_the_gpu_returns_when_it_is_done():
    ev = _GpuStandIn(time.monotonic() + 0.3)
    sweep.wait_for_gpu(ev)
    assert time.monotonic() >= ev.ends and ev.queries < 200  # it sleeps between queries


def test_an_interrupt_while_waiting_for_the_gpu_is_handled_at_once():
    """Session 10's chunk s10f: the deadline's SIGINT waited 30 s for a synchronize() on queued
    fp32 kernels, then the run was killed. Waiting in Python, the interrupt lands within a poll."""
    import os
    import signal
    import threading

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.wait_for_gpu(_GpuStandIn(t0 + 60))  # a minute of queued kernels
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 2.0
