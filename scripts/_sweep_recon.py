# Temporary (H6): dump torch 2.11 / triton 3.6 sources and Inductor-generated GEMM kernels.
import os, sys, glob, shutil, tarfile, subprocess
out = sys.argv[1]
rd = "/tmp/recon"; os.makedirs(rd, exist_ok=True)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/ic"
import torch, triton, inspect
tdir = os.path.dirname(torch.__file__); trdir = os.path.dirname(triton.__file__)
with open(f"{rd}/info.txt", "w") as f:
    f.write(f"torch {torch.__version__} triton {triton.__version__} cuda {torch.version.cuda}\n")
    f.write(f"gpu {torch.cuda.get_device_name()} props {torch.cuda.get_device_properties(0)}\n")
    f.write(f"Event sig {inspect.signature(torch.cuda.Event.__new__) if hasattr(torch.cuda.Event,'__new__') else ''}\n")
    try:
        f.write(f"Event init {inspect.signature(torch.cuda.Event.__init__)}\n")
    except Exception as e: f.write(f"Event init err {e}\n")
    f.write(f"cpus {os.cpu_count()}\n")
for rel in ["_inductor/kernel", "_inductor/runtime/benchmarking.py", "_inductor/select_algorithm.py", "_inductor/template_heuristics",
            "_inductor/kernel_inputs.py", "_inductor/choices.py", "_inductor/kernel_template_choice.py", "_inductor/codegen/triton.py", "_inductor/utils.py"]:
    src = os.path.join(tdir, rel)
    dst = os.path.join(rd, "torch", rel)
    if os.path.isdir(src): shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    elif os.path.exists(src): os.makedirs(os.path.dirname(dst), exist_ok=True); shutil.copy(src, dst)
for rel in ["runtime/jit.py", "compiler/compiler.py", "backends/nvidia/driver.py", "language/semantic.py", "testing.py"]:
    src = os.path.join(trdir, rel); dst = os.path.join(rd, "triton", rel)
    if os.path.exists(src): os.makedirs(os.path.dirname(dst), exist_ok=True); shutil.copy(src, dst)
# generated kernels
from torch._inductor import config as icfg
def run(name, fn, *args):
    torch._dynamo.reset()
    with icfg.patch(max_autotune=True, force_disable_caches=True):
        try:
            torch.compile(fn, dynamic=False)(*args)
        except Exception as e:
            print(name, "ERR", e)
    files = [f for f in glob.glob("/tmp/ic/**/*.py", recursive=True) if "tl.dot" in open(f).read()]
    d = f"{rd}/gen/{name}"; os.makedirs(d, exist_ok=True)
    for f in files: shutil.move(f, d)
    print(name, len(files), "kernels")
dev = "cuda"
h = torch.float16; b16 = torch.bfloat16; f32 = torch.float32
run("mm_fp16_1000", lambda a, b: a @ b, torch.randn(1000, 1000, device=dev, dtype=h), torch.randn(1000, 1000, device=dev, dtype=h))
run("mm_fp16_tA", lambda a, b: a @ b, torch.randn(4096, 2048, device=dev, dtype=h).t(), torch.randn(4096, 1024, device=dev, dtype=h))
run("addmm_bf16", lambda c, a, b: torch.addmm(c, a, b), torch.randn(513, device=dev, dtype=b16), torch.randn(1023, 771, device=dev, dtype=b16), torch.randn(771, 513, device=dev, dtype=b16))
run("bmm_f32", lambda a, b: torch.bmm(a, b), torch.randn(4, 257, 65, device=dev, dtype=f32), torch.randn(4, 65, 129, device=dev, dtype=f32))
run("baddbmm_fp16", lambda c, a, b: torch.baddbmm(c, a, b), torch.randn(512, device=dev, dtype=h), torch.randn(16, 512, 64, device=dev, dtype=h), torch.randn(16, 64, 512, device=dev, dtype=h))
with tarfile.open(f"{out}/recon.tgz", "w:gz") as t: t.add(rd, arcname="recon")
print(open(f"{rd}/info.txt").read())
