"""kite.Model and kite.Session: descriptions, runs, input checks, placement, options."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kite
from helpers import DIGITS_ONNX, ramp


def test_model_describes_inputs_and_outputs(digits_model):
    assert digits_model.inputs == [kite.TensorInfo("image", (450, 1, 8, 8), np.dtype("float32"))]
    assert digits_model.outputs == [kite.TensorInfo("logits", (450, 10), np.dtype("float32"))]
    assert digits_model.format_version[0] == 1
    s = digits_model.session()
    assert s.inputs == digits_model.inputs and s.outputs == digits_model.outputs


def test_digits_accuracy_matches_onnxruntime(digits_model):
    ort = pytest.importorskip("onnxruntime")
    digits = os.path.dirname(DIGITS_ONNX)
    images = np.load(os.path.join(digits, "heldout_images.npy"))
    labels = np.load(os.path.join(digits, "heldout_labels.npy"))
    logits = digits_model.session(threads=2).run({"image": images})["logits"]
    ref = ort.InferenceSession(DIGITS_ONNX, providers=["CPUExecutionProvider"]).run(
        None, {"image": images})[0]
    # Same bound as tests/e2e/compare_with_ort.py (reasoning there).
    assert np.abs(logits - ref).max() <= 1e-4 * np.abs(ref).max()
    assert (logits.argmax(1) == labels).mean() == (ref.argmax(1) == labels).mean()


def test_outputs_are_new_arrays_the_caller_owns(digits_model):
    s = digits_model.session()
    a = ramp((450, 1, 8, 8))
    y1 = s.run({"image": a})["logits"]
    keep = y1.copy()
    assert y1.flags.owndata or y1.base is not None  # a numpy array backed by its own buffer
    assert y1.flags.writeable
    y1[:] = 0  # writing it must not disturb the session
    y2 = s.run({"image": a + 1})["logits"]
    y3 = s.run({"image": a})["logits"]
    np.testing.assert_array_equal(y3, keep)
    assert not np.array_equal(y2, keep)
    assert not np.shares_memory(y2, y3)


def test_any_memory_layout_is_copied_correctly(digits_model):
    s = digits_model.session()
    a = ramp((450, 1, 8, 8))
    ref = s.run({"image": a})["logits"]
    fortran = np.asfortranarray(a)
    transposed = np.ascontiguousarray(a.transpose(3, 2, 1, 0)).transpose(3, 2, 1, 0)
    strided = np.zeros((900, 1, 8, 16), np.float32)[::2, :, :, ::2]
    strided[...] = a
    reversed_ = np.ascontiguousarray(a[::-1])[::-1]
    readonly = a.copy()
    readonly.flags.writeable = False
    for x in (fortran, transposed, strided, reversed_, readonly):
        assert not x.flags.c_contiguous or not x.flags.writeable or x is readonly
        np.testing.assert_array_equal(s.run({"image": x})["logits"], ref)


def test_wrong_dtype_is_refused_naming_input_and_shape(digits_model):
    s = digits_model.session()
    with pytest.raises(kite.Error) as e:
        s.run({"image": np.zeros((450, 1, 8, 8), np.float64)})
    msg = str(e.value)
    assert "input 'image'" in msg and "expected float32 of shape (450, 1, 8, 8)" in msg
    assert "got float64" in msg
    assert e.value.status_name == "invalid argument"
    for dt in (np.float16, np.int16, np.uint64, np.complex64, np.bool_):
        with pytest.raises(kite.Error, match=f"got {np.dtype(dt).name}"):
            s.run({"image": np.zeros((450, 1, 8, 8), dt)})


def test_wrong_shape_is_refused_naming_input_and_shape(digits_model):
    s = digits_model.session()
    with pytest.raises(kite.Error) as e:
        s.run({"image": np.zeros((1, 1, 8, 8), np.float32)})
    msg = str(e.value)
    assert "input 'image'" in msg and "expected float32 of shape (450, 1, 8, 8)" in msg
    assert "got shape (1, 1, 8, 8)" in msg
    with pytest.raises(kite.Error, match=r"got shape \(450, 64\)"):
        s.run({"image": np.zeros((450, 64), np.float32)})


def test_missing_unknown_and_non_array_inputs(digits_model):
    s = digits_model.session()
    with pytest.raises(kite.Error, match=r"missing input\(s\) 'image' \(450, 1, 8, 8\) float32"):
        s.run({})
    with pytest.raises(kite.Error, match=r"no input 'img' \(its inputs: 'image'\)") as e:
        s.run({"img": ramp((450, 1, 8, 8))})
    assert e.value.status_name == "not found"
    with pytest.raises(kite.Error, match="got an object of type list"):
        s.run({"image": [[0.0]]})
    with pytest.raises(kite.Error, match=r"got an array of dtype >f4 .*non-native byte order"):
        s.run({"image": np.zeros((450, 1, 8, 8), ">f4")})
    # A refused call leaves the session usable.
    assert s.run({"image": ramp((450, 1, 8, 8))})["logits"].shape == (450, 10)


def test_placement_says_where_each_node_runs(digits_model):
    s = digits_model.session()
    placement = s.placement()
    assert placement, "no nodes"
    assert {p["backend"] for p in placement} == {"cpu"}
    assert set(placement[0]) == {"node", "op", "backend", "fused", "decomposed", "reason"}
    assert any(p["fused"] for p in placement)
    assert s.transfer_count == 0


def test_unknown_backend_falls_back_or_fails_when_strict(digits_model):
    s = digits_model.session(backends=["nosuch", "cpu"])
    placement = s.placement()
    assert {p["backend"] for p in placement} == {"cpu"}
    assert all("nosuch" in p["reason"] for p in placement), placement[0]["reason"]
    with pytest.raises(kite.Error, match="nosuch") as e:
        digits_model.session(backends=["nosuch", "cpu"], strict=True)
    assert e.value.status != 0


def test_backend_plugin_from_a_folder(digits_model):
    plugin_dir = os.environ.get("KITE_TEST_PLUGIN_DIR")
    if not plugin_dir:
        pytest.skip("KITE_TEST_PLUGIN_DIR not set")
    x = ramp((450, 1, 8, 8))
    ref = digits_model.session().run({"image": x})["logits"]
    s = digits_model.session(backends=["devsim", "cpu"], strict=True, backend_path=[plugin_dir])
    assert {p["backend"] for p in s.placement()} == {"devsim"}
    # devsim (a simulated GPU) computes with the CPU kernels: bit for bit.
    np.testing.assert_array_equal(s.run({"image": x})["logits"], ref)
    # Its memory is not host-visible by default: inputs and outputs cross.
    assert s.transfer_count > 0


def test_backend_options_reach_the_backend(digits_model, tmp_path):
    plugin_dir = os.environ.get("KITE_TEST_PLUGIN_DIR")
    if not plugin_dir:
        pytest.skip("KITE_TEST_PLUGIN_DIR not set")
    x = ramp((450, 1, 8, 8))
    ref = digits_model.session().run({"image": x})["logits"]
    # decline_fused: devsim refuses fused nodes, their bodies run on it instead.
    s = digits_model.session(backends=["devsim", "cpu"], backend_path=[plugin_dir],
                             backend_options={"devsim": {"decline_fused": True, "unified": 1}})
    placement = s.placement()
    assert all(p["backend"] == "devsim" for p in placement), placement
    assert any(p["decomposed"] for p in placement), placement
    np.testing.assert_array_equal(s.run({"image": x})["logits"], ref)
    # unified=1: the arena is host-visible, so nothing is copied.
    assert s.transfer_count == 0
    # An unknown key is refused by the backend, naming the key.
    with pytest.raises(kite.Error, match="nosuch"):
        digits_model.session(backends=["devsim"], strict=True, backend_path=[plugin_dir],
                             backend_options={"devsim": {"nosuch": 1}})
    # A CPU option: fused=0 runs the fused nodes' bodies on the CPU.
    s = digits_model.session(backend_options={"cpu": {"fused": 0}})
    assert any(p["decomposed"] for p in s.placement())
    np.testing.assert_allclose(s.run({"image": x})["logits"], ref, rtol=0, atol=1e-4)
    with pytest.raises(TypeError, match="backend_options"):
        digits_model.session(backend_options=["cpu"])


def test_device_index_precision_cache_dir(digits_model, tmp_path):
    x = ramp((450, 1, 8, 8))
    ref = digits_model.session().run({"image": x})["logits"]
    # The CPU has one device and computes fp32 whatever precision allows
    # (a backend that cannot honour a flag ignores it): same bits.
    s = digits_model.session(device_index={"cpu": 0}, precision=["fp16_storage", "fp16_compute"],
                             cache_dir=tmp_path)
    np.testing.assert_array_equal(s.run({"image": x})["logits"], ref)
    digits_model.session(precision="fp32")
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        digits_model.session(precision="fp8")
    with pytest.raises(kite.Error, match="device"):
        digits_model.session(device_index={"cpu": 3}, strict=True)


def test_profile_times_every_node(digits_model):
    s = digits_model.session(profile=True, threads=1)
    x = ramp((450, 1, 8, 8))
    for _ in range(3):
        s.run({"image": x})
    prof = s.profile()
    assert len(prof) == len(s.placement())
    assert all(p["runs"] == 3 and p["measured"] for p in prof), prof
    assert sum(p["total_ns"] for p in prof) > 0
    # Without profile=True nothing is measured.
    s = digits_model.session()
    s.run({"image": x})
    assert all(p["runs"] == 0 for p in s.profile())


def test_session_options(digits_model):
    with pytest.raises(TypeError, match="unknown option 'thread'"):
        digits_model.session(thread=2)
    with pytest.raises(kite.Error, match="threads is -1"):
        digits_model.session(threads=-1)
    with pytest.raises(kite.Error) as e:
        digits_model.session(memory_limit=1024)
    assert e.value.status_name == "out of memory"
    s = digits_model.session(backends="cpu", threads=1, poison=True, memory_limit=1 << 30)
    x = ramp((450, 1, 8, 8))
    np.testing.assert_array_equal(s.run({"image": x})["logits"],
                                  digits_model.session(threads=1).run({"image": x})["logits"])


def test_bad_model_files(work):
    with pytest.raises(kite.Error) as e:
        kite.Model(os.path.join(work, "does_not_exist.kite"))
    assert e.value.status_name == "I/O error"
    bad = os.path.join(work, "bad.kite")
    with open(bad, "wb") as f:
        f.write(b"not a kite file at all, just some bytes")
    with pytest.raises(kite.Error) as e:
        kite.Model(bad)
    assert e.value.status_name == "invalid model"


DTYPES = [np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


def test_every_dtype_goes_in_and_comes_out(work):
    """One input per Kite dtype, each cast to float32 and back: the values and
    dtypes that come out are the ones that went in."""
    onnx_types = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16,
                  np.int64: TensorProto.INT64, np.int32: TensorProto.INT32,
                  np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8,
                  np.bool_: TensorProto.BOOL}
    inputs, outputs, nodes = [], [], []
    for dt in DTYPES:
        n = np.dtype(dt).name
        inputs.append(helper.make_tensor_value_info(f"x_{n}", onnx_types[dt], [2, 3]))
        outputs.append(helper.make_tensor_value_info(f"y_{n}", onnx_types[dt], [2, 3]))
        nodes.append(helper.make_node("Cast", [f"x_{n}"], [f"f_{n}"], to=TensorProto.FLOAT,
                                      name=f"to_float_{n}"))
        nodes.append(helper.make_node("Cast", [f"f_{n}"], [f"y_{n}"], to=onnx_types[dt],
                                      name=f"back_{n}"))
    graph = helper.make_graph(nodes, "dtypes", inputs, outputs)
    src, out = os.path.join(work, "dtypes.onnx"), os.path.join(work, "dtypes.kite")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    kite.convert(src, out, opt_level=0)
    m = kite.Model(out)
    assert [i.dtype for i in m.inputs] == [np.dtype(d) for d in DTYPES]
    feeds = {}
    for dt in DTYPES:
        v = np.array([[0, 1, 2], [3, 4, 5]]) if dt != np.bool_ else np.array([[0, 1, 0], [1, 1, 0]])
        feeds[f"x_{np.dtype(dt).name}"] = v.astype(dt)
    got = m.session().run(feeds)
    for dt in DTYPES:
        n = np.dtype(dt).name
        assert got[f"y_{n}"].dtype == np.dtype(dt), n
        np.testing.assert_array_equal(got[f"y_{n}"], feeds[f"x_{n}"])
    wrong = dict(feeds, x_int32=feeds["x_int32"].astype(np.int64))
    with pytest.raises(kite.Error, match="input 'x_int32': expected int32 of shape \\(2, 3\\), got int64"):
        m.session().run(wrong)
