"""What the benchmarks share: Kite's tools in a build folder, the model set's
seeded inputs (drawn as the tests draw them), the timing loop, and the
virtual environment that holds the peers' packages.

A benchmark imports it from its own folder (Python puts a script's folder
first on sys.path). Importing it needs only the standard library.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_E2E = os.path.join(HERE, "..", "tests", "e2e")


def find_tool(bin_dir, name):
    """The executable NAME under bin_dir (the build folder or one of its tool
    folders); exits with a message when there is none."""
    for sub in ("", "converter", "apps", os.path.join("apps", name)):
        p = os.path.join(bin_dir, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"{name} not found under {bin_dir}")


def core_latency(tool_dir):
    """The line printed by kite-core-latency (found under tool_dir, a build
    folder or its apps folder), e.g. "core-to-core: 28 ns (cpus 0 and 1)";
    "core-to-core: unknown (...)" without the tool. 2-thread timings on a
    2-vCPU cloud host depend on where the hypervisor put the vCPUs (one
    core complex, ~30 ns, or two, ~200 ns and more): print it beside them."""
    for sub in ("", "apps"):
        p = os.path.join(tool_dir, sub, "kite-core-latency")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            r = subprocess.run([p], capture_output=True, text=True)
            return r.stdout.strip() or "core-to-core: unknown (no output)"
    return "core-to-core: unknown (kite-core-latency not built)"


def core_latency_ns(tool_dir):
    """core_latency's nanoseconds as an int, or None where unknown."""
    m = re.search(r"core-to-core: (\d+) ns", core_latency(tool_dir))
    return int(m.group(1)) if m else None


def time_calls(fn, warmup, iterations):
    """p50 in ms of fn() over `iterations` calls after `warmup` calls: wall
    clock around each call. Every engine a benchmark compares is timed by
    this loop, in its own process or in benchmarks/peer_worker.py's."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def ensure_venv(venv, packages):
    """(python, {package: why it is missing}) for a virtual environment of a
    benchmark's own at VENV with the PyPI PACKAGES, made on first use with
    `python3 -m venv --system-site-packages` on Debian's python (whose torch
    satisfies pnnx's, where PyPI's would be a large download) and filled by
    pip. A package that cannot be installed is named with pip's last words.
    python is an absolute path (the venv's tools sit beside it), or None
    when the venv cannot be made."""
    venv = os.path.abspath(venv)
    python = os.path.join(venv, "bin", "python")
    if not os.path.isfile(python):
        print(f"creating {venv} ...", flush=True)
        base = "/usr/bin/python3" if os.path.isfile("/usr/bin/python3") else sys.executable
        p = subprocess.run([base, "-m", "venv", "--system-site-packages", venv],
                           capture_output=True, text=True)
        if p.returncode != 0:
            why = "venv: " + (p.stderr.strip().splitlines() or ["failed"])[-1]
            return None, {pkg: why for pkg in packages}
    need = [pkg for pkg in packages
            if subprocess.run([python, "-m", "pip", "show", "-q", pkg],
                              capture_output=True).returncode != 0]
    why = {}
    if need:
        print(f"installing {' '.join(need)} into {venv} from PyPI ...", flush=True)
        for pkg in need:
            p = subprocess.run([python, "-m", "pip", "install", "-q", pkg],
                               capture_output=True, text=True)
            if p.returncode != 0:
                why[pkg] = "pip: " + (p.stderr.strip().splitlines() or ["failed"])[-1][:200]
    return python, why


def seeded_feeds(onnx_path, seed=0):
    """{input name: array} for the model's graph inputs, as
    tests/e2e/compare_with_ort.py draws them (dynamic dims = 1, integer
    inputs from the kite.input_range.<name> metadata of export_models.py), so
    a benchmark's outputs check runs on the inputs the model set is tested
    with. Needs onnx, onnxruntime and numpy."""
    if TESTS_E2E not in sys.path:
        sys.path.insert(0, TESTS_E2E)
    import onnx
    import compare_with_ort as cwo
    model = onnx.load(onnx_path, load_external_data=False)
    return cwo.make_inputs(model, cwo.graph_inputs(model, {}), seed)


# The ISA extensions a benchmark line names next to the CPU model.
ISA_FLAGS = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
             "amx_int8", "asimd", "sve", "sve2", "asimdhp"]


def describe_cpu():
    """(lscpu's model name, the ISA_FLAGS this CPU has, logical CPUs)."""
    model, flags = "unknown", set()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                model = value.strip()
            elif key.strip() == "Flags":
                flags = set(value.split())
    except OSError:
        pass
    if not flags and os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    have = [f for f in ISA_FLAGS if f in flags]
    return model, have, os.cpu_count()
