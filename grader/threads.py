"""One compute thread per process wherever the kit runs torch (judges, workers, the zygote).

Every tensor the kit computes is tiny: a pool of compute threads only wakes up, spins and fights
the other processes of a batch for the cores (two judges of a 2-core machine, each with a pool
per core: 1.5 s of judge CPU per submission instead of 0.15 s).  Two settings, both needed:

- the environment, before torch is imported (pin_environment): torch's OpenMP reads
  OMP_NUM_THREADS once, at load, as the default of *every* thread, including the threads the
  kit makes later (the check session runs pytest on a thread of its own, where a
  torch.set_num_threads(1) made on the main thread never applies: OpenMP keeps it per thread);
- torch.set_num_threads(1) on the thread that computes (one_thread_here), for a process where
  torch was imported before the kit could set the environment.

The environment also picks torch's AVX2 kernels where the CPU offers AVX-512 (kernel_choice):
torch dispatches to AVX-512 there, and its AVX-512 softmax over a short last dimension (the
lesson's T = 12) is about 5x slower than its AVX2 one (measured: 450 vs 90 us for [32,4,12,12]),
which made the copy task's training 0.15-0.24 s instead of 0.10-0.14 s.  The same holds on an
AMD EPYC (Zen 4) with AVX-512: 640 vs 190 us for [64,4,12,12], and a worker's training in a fresh
fork 32.9 vs 24.5 ms (2026-12-06).  torch's own default was
AVX2 for this reason in 1.12 (pytorch/pytorch#80252); `make bench` measures both side by side.

Workers get the same environment from launch.minimal_env.  A student's own notebook kernel is
never pinned: only the kit's processes are.
"""
import os
import platform

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
KERNELS = "ATEN_CPU_CAPABILITY"


def kernel_choice(cpuinfo="/proc/cpuinfo"):
    """{"ATEN_CPU_CAPABILITY": "avx2"} on an x86 CPU with AVX-512 and AVX2, else {} (torch's own
    choice: it is AVX2 or less there already, and on other machines the name means nothing)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return {}
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle
                          if line.startswith("flags")), [])
    except OSError:
        return {}
    return {KERNELS: "avx2"} if "avx512f" in flags and "avx2" in flags else {}


def pin_environment(env=None):
    """Set one compute thread (and the kernel choice, unless the user made one) in `env`
    (default: this process's environment, so call it before torch is imported); returns `env`,
    for a child process's environment."""
    env = os.environ if env is None else env
    env.update(ONE_THREAD)
    if KERNELS not in env:
        env.update(kernel_choice())
    return env


def one_thread_here():
    """torch on one compute thread on the calling thread (and, once per process, its inter-op
    pool); returns the count the thread had before: what the environment gave it (1 where
    pin_environment came before torch; the batch reports it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # set already, or parallel work has begun: it can be set only once
        pass
    return before
