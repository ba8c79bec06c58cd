"""kite.convert: the report, the options, the file it writes, and its errors."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kite
from helpers import DIGITS_ONNX


def test_report_is_a_dict_with_the_converters_figures(work):
    out = os.path.join(work, "digits_report.kite")
    report = kite.convert(DIGITS_ONNX, out, opt_level=2, report=True)
    assert isinstance(report, dict)
    assert report["input"] == DIGITS_ONNX and report["output"] == out
    assert report["opt_level"] == 2
    # The digits CNN: both Conv(+BatchNorm)+Relu chains become one FusedConv.
    assert report["fusions"] == {"Conv+Relu": 2}
    assert report["ops"]["FusedConv"] == 2 and "BatchNormalization" not in report["ops"]
    assert report["kernel_launches_after"] < report["kernel_launches_before"]
    assert report["nodes_after"] == sum(report["ops"].values())
    assert 0 < report["memory"]["lower_bound_bytes"] <= report["memory"]["arena_bytes"]
    assert report["memory"]["arena_bytes"] <= report["memory"]["naive_bytes"]
    assert report["file_bytes"] == os.path.getsize(out)
    assert [p["name"] for p in report["passes"]], "the pass list is empty"
    m = kite.Model(out)
    assert m.producer == f"kite-convert {kite.__version__}"


def test_report_false_returns_none_and_still_writes(work):
    out = os.path.join(work, "digits_noreport.kite")
    if os.path.exists(out):
        os.remove(out)
    assert kite.convert(DIGITS_ONNX, out, report=False) is None
    assert os.path.getsize(out) > 0


def test_opt_levels(work):
    r0 = kite.convert(DIGITS_ONNX, os.path.join(work, "o0.kite"), opt_level=0)
    r2 = kite.convert(DIGITS_ONNX, os.path.join(work, "o2.kite"), opt_level=2)
    assert r0["opt_level"] == 0 and r0["fusions"] == {}
    assert r0["kernel_launches_after"] >= r0["kernel_launches_before"]
    assert r2["kernel_launches_after"] < r0["kernel_launches_after"]
    # Same numbers either way (fusion and folding change rounding only):
    # the digits logits are O(10), float32 sums of <= 576 products.
    x = np.random.RandomState(0).standard_normal((450, 1, 8, 8)).astype(np.float32)
    y0 = kite.Model(os.path.join(work, "o0.kite")).session().run({"image": x})["logits"]
    y2 = kite.Model(os.path.join(work, "o2.kite")).session().run({"image": x})["logits"]
    np.testing.assert_allclose(y2, y0, rtol=0, atol=1e-4 * np.abs(y0).max())


def test_same_bytes_as_kite_convert(work):
    tool = os.environ.get("KITE_TEST_KITE_CONVERT")
    if not tool:
        pytest.skip("KITE_TEST_KITE_CONVERT not set")
    a, b = os.path.join(work, "lib.kite"), os.path.join(work, "tool.kite")
    kite.convert(DIGITS_ONNX, a, report=False)
    subprocess.run([tool, DIGITS_ONNX, "-o", b, "-q"], check=True)
    assert open(a, "rb").read() == open(b, "rb").read()


def dynamic_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_input_shapes_fix_dynamic_dimensions(work):
    src = os.path.join(work, "dynamic.onnx")
    dynamic_model(src)
    out = os.path.join(work, "dynamic.kite")
    kite.convert(src, out, input_shapes={"x": (4, 3)})
    m = kite.Model(out)
    assert m.inputs == [kite.TensorInfo("x", (4, 3), np.dtype("float32"))]
    assert m.outputs[0].shape == (4, 3)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(m.session().run({"x": x})["y"], np.maximum(x, 0))


def test_unset_dynamic_dimension_is_an_error_naming_the_input(work):
    src = os.path.join(work, "dynamic.onnx")
    dynamic_model(src)
    with pytest.raises(kite.Error) as e:
        kite.convert(src, os.path.join(work, "never.kite"))
    assert "'x'" in str(e.value) or "x" in str(e.value).split(), str(e.value)
    assert not os.path.exists(os.path.join(work, "never.kite"))


def test_missing_file_is_an_io_error(work):
    with pytest.raises(kite.Error) as e:
        kite.convert(os.path.join(work, "nope.onnx"), os.path.join(work, "nope.kite"))
    assert e.value.status == 2 and e.value.status_name == "I/O error"
    assert "nope.onnx" in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_unsupported_op_is_unsupported_and_named(work):
    src = os.path.join(work, "unsupported.onnx")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    node = helper.make_node("Det", ["x"], ["y"], name="my_det")
    graph = helper.make_graph([node], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), src)
    with pytest.raises(kite.Error) as e:
        kite.convert(src, os.path.join(work, "unsupported.kite"))
    assert e.value.status_name == "unsupported", str(e.value)
    assert "my_det" in str(e.value) and "Det" in str(e.value)


def test_bad_options_are_errors(work):
    out = os.path.join(work, "bad.kite")
    with pytest.raises(kite.Error, match="unknown pass 'no_such_pass'"):
        kite.convert(DIGITS_ONNX, out, disabled_passes=["no_such_pass"])
    with pytest.raises(kite.Error, match="level 7"):
        kite.convert(DIGITS_ONNX, out, opt_level=7)
    with pytest.raises(kite.Error, match=r"input_shapes\['image'\]"):
        kite.convert(DIGITS_ONNX, out, input_shapes={"image": "1x1x8x8"})
    with pytest.raises(kite.Error, match="dimension 1 is -3"):
        kite.convert(DIGITS_ONNX, out, input_shapes={"image": (1, -3, 8, 8)})


def test_memory_budget_that_cannot_be_met(work):
    with pytest.raises(kite.Error) as e:
        kite.convert(DIGITS_ONNX, os.path.join(work, "budget.kite"), memory_budget=64)
    assert e.value.status_name == "out of memory"
    assert "memory budget 64 bytes not met" in str(e.value)


def test_memory_budget_as_a_ratio_of_the_lower_bound(work):
    out = os.path.join(work, "budget_ratio.kite")
    report = kite.convert(DIGITS_ONNX, out, memory_budget="1x")
    b = report["memory_budget"]
    assert b["ratio"] == 1 and b["met"]
    assert b["budget_bytes"] == b["lower_bound_bytes"] == report["memory"]["lower_bound_bytes"]
    with pytest.raises(kite.Error) as e:
        kite.convert(DIGITS_ONNX, out, memory_budget="0.001x")
    assert e.value.status_name == "out of memory"
    assert "(0.001x the lower bound" in str(e.value)
    with pytest.raises(ValueError, match="ratio such as"):
        kite.convert(DIGITS_ONNX, out, memory_budget="0.6")


def test_precision_mixed_digits_keeps_accuracy_and_halves_the_weights(work):
    # Issue 18: mixed keeps the digits CNN's held-out accuracy within 0.5
    # points of fp32, stores its Conv/Gemm weights in fp16, and the report
    # gives every node's precision and why.
    digits = os.path.dirname(DIGITS_ONNX)
    images = np.load(os.path.join(digits, "heldout_images.npy"))
    labels = np.load(os.path.join(digits, "heldout_labels.npy"))
    f32, mixed = os.path.join(work, "digits_fp32.kite"), os.path.join(work, "digits_mixed.kite")
    r32 = kite.convert(DIGITS_ONNX, f32)
    rmx = kite.convert(DIGITS_ONNX, mixed, precision="mixed", fp16_tolerance=1e-2)
    assert r32["precision"]["mode"] == "fp32" and r32["precision"]["fp16_nodes"] == 0
    p = rmx["precision"]
    assert p["mode"] == "mixed" and p["fp16_nodes"] > 0
    assert all(n["reason"] for n in p["nodes"]), "every node says why"
    assert p["weight_bytes_after"] <= 0.51 * p["weight_bytes_before"]
    a = kite.Model(f32).session(threads=2).run({"image": images})["logits"]
    b = kite.Model(mixed).session(threads=2).run({"image": images})["logits"]
    assert np.abs(b - a).max() <= 1e-2 * np.abs(a).max()
    acc32, accmx = (a.argmax(1) == labels).mean(), (b.argmax(1) == labels).mean()
    assert abs(acc32 - accmx) <= 0.005, (acc32, accmx)


def test_bad_precision_is_an_error(work):
    with pytest.raises(kite.Error, match="expected fp32, fp16 or mixed"):
        kite.convert(DIGITS_ONNX, os.path.join(work, "never.kite"), precision="half")


def test_pack_for_writes_packed_weight_forms_with_the_same_outputs(work):
    # Format 1.1: weights pre-packed for the CPU kernels by default (this
    # machine's level), none with pack_for="none"; the same outputs either way.
    digits = os.path.dirname(DIGITS_ONNX)
    images = np.load(os.path.join(digits, "heldout_images.npy"))
    packed, plain = os.path.join(work, "digits_packed.kite"), os.path.join(work, "digits_plain.kite")
    rp = kite.convert(DIGITS_ONNX, packed)
    rn = kite.convert(DIGITS_ONNX, plain, pack_for="none")
    assert rp["packed"]["forms"] > 0 and len(rp["packed"]["for"]) == 1
    assert rn["packed"] == {"for": [], "forms": 0, "bytes": 0, "source_bytes": 0}
    assert rp["file_bytes"] > rn["file_bytes"]
    a = kite.Model(packed).session(threads=2).run({"image": images})["logits"]
    b = kite.Model(plain).session(threads=2).run({"image": images})["logits"]
    assert np.array_equal(a, b)
    with pytest.raises(kite.Error, match="unknown packing target 'sparc'"):
        kite.convert(DIGITS_ONNX, os.path.join(work, "never.kite"), pack_for="sparc")
