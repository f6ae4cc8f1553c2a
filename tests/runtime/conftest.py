"""The fake driver as a fixture (`fake_driver(**options)` installs one and returns it)."""

from __future__ import annotations

import pytest
from fake_driver import RecordingDriver
from runtime_fakes import FakeCompiler, device_facts_of

from asyncdsl.runtime import driver, launch


@pytest.fixture
def fake_driver(monkeypatch, tmp_path):
    def install(**options):
        fake = RecordingDriver(**options)
        monkeypatch.setattr(driver, "_driver_module", fake)
        monkeypatch.setattr(driver, "_initialized", True)
        monkeypatch.setattr(driver, "_contexts", {0: fake.CUcontext(0x300)})
        monkeypatch.setattr(driver, "_facts", {0: device_facts_of(9, 0)})
        monkeypatch.setattr(driver, "_entry_points", {})
        monkeypatch.setattr(launch, "compiler_for", lambda device: FakeCompiler())
        monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
        launch.clear_loaded_kernels()
        return fake

    yield install
    launch.clear_loaded_kernels()
