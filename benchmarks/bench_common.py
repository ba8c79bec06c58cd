"""What the benchmarks share: Kite's tools in a build folder, and the model
set's seeded inputs (drawn as the tests draw them).

A benchmark imports it from its own folder (Python puts a script's folder
first on sys.path). Importing it needs only the standard library.
"""
import os
import subprocess
import sys

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
