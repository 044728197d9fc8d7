"""The kit's compute settings (grader/threads.py): one thread, and torch's AVX2 kernels where the
CPU offers AVX-512; the worker's environment follows the judge's."""
from grader import threads
from grader.sandbox import launch


def cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\n"
                    f"processor\t: 1\nflags\t\t: {flags}\n", encoding="ascii")
    return str(path)


def test_avx2_kernels_are_picked_only_where_the_cpu_has_avx512(tmp_path, monkeypatch):
    monkeypatch.setattr(threads.platform, "machine", lambda: "x86_64")
    both = cpuinfo(tmp_path, "fpu sse2 avx avx2 fma avx512f avx512bw")
    assert threads.kernel_choice(both) == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert threads.kernel_choice(cpuinfo(tmp_path, "fpu sse2 avx avx2 fma")) == {}
    assert threads.kernel_choice(cpuinfo(tmp_path, "fpu sse2 avx512f")) == {}  # no AVX2 kernels
    assert threads.kernel_choice(str(tmp_path / "missing")) == {}
    monkeypatch.setattr(threads.platform, "machine", lambda: "arm64")
    assert threads.kernel_choice(both) == {}  # torch would warn on a name it has no kernels for


def test_the_users_own_kernel_choice_is_kept(monkeypatch):
    monkeypatch.setattr(threads, "kernel_choice", lambda: {threads.KERNELS: "avx2"})
    env = threads.pin_environment({threads.KERNELS: "default", "OMP_NUM_THREADS": "8"})
    assert env[threads.KERNELS] == "default" and env["OMP_NUM_THREADS"] == "1"
    assert threads.pin_environment({})[threads.KERNELS] == "avx2"


def test_the_worker_computes_with_the_judges_kernels(monkeypatch):
    monkeypatch.setattr(threads, "kernel_choice", lambda: {})
    monkeypatch.setenv(threads.KERNELS, "default")
    env = launch.minimal_env("/tmp")
    assert env[threads.KERNELS] == "default" and env["OMP_NUM_THREADS"] == "1"
    monkeypatch.delenv(threads.KERNELS)
    assert threads.KERNELS not in launch.minimal_env("/tmp")
    monkeypatch.setenv("ATTN_JUDGE_SECRET", "x")  # nothing else of the judge's leaks in
    assert "ATTN_JUDGE_SECRET" not in launch.minimal_env("/tmp")
