"""Shared fixtures of the kite package's tests.

Run after `pip install ./python`:  python3 -m pytest python/tests
Environment (ctest's python_pytest sets all of them):
  KITE_TEST_WORK          folder for converted models (default: a pytest temp dir)
  KITE_TEST_MODEL_SET     folder of the exported model set (scripts/export_models.py
                          --models all); the model-set tests skip without it
  KITE_TEST_PLUGIN_DIR    folder of libkite_backend_devsim.so; its tests skip without it
  KITE_TEST_KITE_CONVERT  kite-convert of the same build, to compare files with
"""
import os

import pytest

from helpers import DIGITS_ONNX


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    path = os.environ.get("KITE_TEST_WORK")
    if path:
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path_factory.mktemp("kite"))


@pytest.fixture(scope="session")
def digits_kite(work):
    import kite

    path = os.path.join(work, "digits.kite")
    kite.convert(DIGITS_ONNX, path, report=False)
    return path


@pytest.fixture(scope="session")
def digits_model(digits_kite):
    import kite

    return kite.Model(digits_kite)

