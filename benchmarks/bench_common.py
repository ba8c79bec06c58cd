"""What the benchmarks share: Kite's tools in a build folder, and the model
set's seeded inputs (drawn as the tests draw them).

A benchmark imports it from its own folder (Python puts a script's folder
first on sys.path). Importing it needs only the standard library.
"""
import os
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
