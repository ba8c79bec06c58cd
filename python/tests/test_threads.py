"""Sessions used from threads: one session shared (runs are serialised, each
caller gets its own results), a session per thread on one model, and the GIL
released while a run computes."""
import os
import threading
import time

import numpy as np
import pytest

import kite
from helpers import ramp

SHAPE = (450, 1, 8, 8)


def references(model, count):
    s = model.session(threads=1)
    return [s.run({"image": ramp(SHAPE, offset=i)})["logits"] for i in range(count)]


def run_threads(count, target):
    errors = []

    def wrapped(i):
        try:
            target(i)
        except BaseException as e:  # reported below, with the thread's index
            errors.append((i, e))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_one_session_shared_by_threads(digits_model):
    """8 threads x 6 runs on one session: the C session refuses overlapping
    calls, so an unserialised binding fails here with "in use by another
    call"; and each result must be its own input's."""
    refs = references(digits_model, 8)
    s = digits_model.session(threads=1)
    results = {}

    def work(i):
        for _ in range(6):
            y = s.run({"image": ramp(SHAPE, offset=i)})["logits"]
            np.testing.assert_array_equal(y, refs[i])
        results[i] = True

    run_threads(8, work)
    assert len(results) == 8


def test_a_session_per_thread_on_one_model(digits_model):
    refs = references(digits_model, 4)

    def work(i):
        s = digits_model.session(threads=1)
        for _ in range(4):
            np.testing.assert_array_equal(s.run({"image": ramp(SHAPE, offset=i)})["logits"], refs[i])

    run_threads(4, work)


def test_errors_on_threads_carry_their_own_message(digits_model):
    s = digits_model.session(threads=1)

    def work(i):
        bad = np.zeros((i + 1, 1, 8, 8), np.float32)
        try:
            s.run({"image": bad})
        except kite.Error as e:
            assert f"got shape ({i + 1}, 1, 8, 8)" in str(e), str(e)
        else:
            raise AssertionError("a wrong shape was accepted")

    run_threads(6, work)


def test_gil_is_released_while_a_run_computes(digits_model, tmp_path):
    """A run on devsim configured with gate=PATH stops inside the
    backend (creating PATH.waiting) until PATH exists. This thread opens the
    gate only after seeing PATH.waiting, which takes Python code and so the
    GIL: had Session.run kept the GIL while computing, the gate would stay
    shut and the run would fail when the backend gives up (60 s)."""
    plugin_dir = os.environ.get("KITE_TEST_PLUGIN_DIR")
    if not plugin_dir:
        pytest.skip("KITE_TEST_PLUGIN_DIR not set")
    x = ramp(SHAPE)
    ref = digits_model.session().run({"image": x})["logits"]
    gate = tmp_path / "gate"
    waiting = tmp_path / "gate.waiting"
    s = digits_model.session(backends=["devsim"], strict=True, backend_path=[plugin_dir],
                             backend_options={"devsim": {"gate": gate}})
    result = {}

    def worker():
        try:
            result["logits"] = s.run({"image": x})["logits"]
        except kite.Error as e:
            result["error"] = e

    t = threading.Thread(target=worker)
    t.start()
    while not waiting.exists() and t.is_alive():
        time.sleep(0.001)
    gate.touch()
    t.join()
    assert "error" not in result, str(result["error"])
    assert waiting.exists()
    np.testing.assert_array_equal(result["logits"], ref)
