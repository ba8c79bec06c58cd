"""The model set (scripts/export_models.py) converted with kite.convert and run
with kite.Session, against onnxruntime on the same seeded inputs."""
import os

import numpy as np
import pytest

import kite

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

MODEL_SET = os.environ.get("KITE_TEST_MODEL_SET", "")
MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
          "shufflenet_v2_x1_0", "convnext_tiny", "vit_small", "text_transformer", "unet_small"]


def seeded_inputs(model, seed=0):
    """Like tests/e2e/compare_with_ort.py: normal floats, integer inputs in the
    range the export recorded in metadata_props."""
    meta = {p.key: p.value for p in model.metadata_props}
    inits = {i.name for i in model.graph.initializer}
    rs = np.random.RandomState(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = tuple(d.dim_value for d in tt.shape.dim)
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.floating):
            feeds[vi.name] = rs.standard_normal(shape).astype(dt)
        else:
            lo, hi = (int(v) for v in meta.get(f"kite.input_range.{vi.name}", "0,10").split(","))
            feeds[vi.name] = rs.randint(lo, hi, size=shape).astype(dt)
    return feeds


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_onnxruntime(name, work):
    if not MODEL_SET:
        pytest.skip("KITE_TEST_MODEL_SET not set (export with scripts/export_models.py --models all)")
    src = os.path.join(MODEL_SET, name + ".onnx")
    assert os.path.exists(src), f"{src} missing from the exported model set"
    out = os.path.join(work, name + ".kite")
    report = kite.convert(src, out, opt_level=2)
    assert report["nodes_after"] > 0

    model = onnx.load(src, load_external_data=False)
    feeds = seeded_inputs(model)
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    refs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))

    m = kite.Model(out)
    assert {i.name for i in m.inputs} == set(feeds)
    got = m.session(threads=2).run(feeds)
    assert set(got) == set(refs)
    for key, ref in refs.items():
        assert got[key].shape == ref.shape and got[key].dtype == ref.dtype, key
        if np.issubdtype(ref.dtype, np.floating):
            # max|kite - ort| <= 1e-4 * max|ort|: float32 sums in another order
            # and folded BatchNorm; tests/e2e/compare_with_ort.py has the arithmetic.
            diff = float(np.abs(got[key].astype(np.float64) - ref).max())
            bound = 1e-4 * float(np.abs(ref).max())
            assert diff <= bound, f"{name} {key}: max|diff| {diff:.3g} > {bound:.3g}"
        else:
            np.testing.assert_array_equal(got[key], ref)
