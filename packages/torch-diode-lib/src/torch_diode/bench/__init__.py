"""``diode bench``: torch-diode against stock Inductor on real GEMMs and whole modules (needs a CUDA GPU).

- :mod:`torch_diode.bench.suite`: the cases (GEMMs of real layers, awkward shapes, whole modules)
  and the modes (default, max-autotune, EXHAUSTIVE, torch-diode top-1 and top-3);
- :mod:`torch_diode.bench.measure`: cold compile time and kernel time of one case in one mode (GPU);
- :mod:`torch_diode.bench.run`: the resumable, time-boxed runner;
- :mod:`torch_diode.bench.report`: the results file, the goal checks, the markdown report and the
  plots: pure functions of the results, so they run anywhere.

Importing this package imports neither torch nor Inductor; measuring does, when it starts.
"""
