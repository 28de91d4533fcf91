"""Fixtures of the browser tests: real Jupyter servers, Debian's chromium through Playwright.

These tests run only when ``NBREFINE_BROWSER_TESTS=1`` (``tests/browser/run.sh`` sets it after
installing chromium, the ``browser`` extra and building the extension); otherwise they are
skipped, so a plain ``pytest`` needs none of that. When asked for, a missing prerequisite is
an error, not a skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent

from browser_driver import ARTIFACTS, BUILT_EXTENSION, App, JupyterServer  # noqa: E402
from fakes.anthropic_api import FakeAnthropic  # noqa: E402

ENABLED = os.environ.get("NBREFINE_BROWSER_TESTS", "") in ("1", "true", "yes")
CHROMIUM = os.environ.get("NBREFINE_CHROMIUM", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DUMMY_KEY = "sk-browser-dummy-key"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            if not ENABLED:
                item.add_marker(
                    pytest.mark.skip(
                        reason="browser tests: run tests/browser/run.sh (NBREFINE_BROWSER_TESTS=1)"
                    )
                )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: needs chromium, JupyterLab and the built labextension")


@pytest.fixture(scope="session")
def prerequisites() -> None:
    problems = []
    if not Path(CHROMIUM).exists():
        problems.append(f"no chromium at {CHROMIUM} (apt-get install -y chromium)")
    if not (BUILT_EXTENSION / "package.json").exists():
        problems.append(f"the labextension is not built in {BUILT_EXTENSION} (scripts/build_labextension.sh)")
    try:
        import jupyterlab  # noqa: F401
        import notebook  # noqa: F401
        import playwright  # noqa: F401
    except ImportError as err:
        problems.append(f"{err.name} is not installed (pip install -e '.[browser]')")
    if problems:
        pytest.fail("browser tests cannot run: " + "; ".join(problems), pytrace=False)
    if ARTIFACTS.exists():  # only this run's screenshots and logs
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)


@pytest.fixture(scope="session")
def fake(prerequisites: None) -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def _server_env(fake: FakeAnthropic) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_", "JUPYTER"))}
    env.update(
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY=DUMMY_KEY,
        NBREFINE_PROVIDER="anthropic",
    )
    return env


def _server(
    app: str,
    fake: FakeAnthropic,
    tmp_path_factory: pytest.TempPathFactory,
    name: str = "",
    settings: dict[str, dict[str, Any]] | None = None,
) -> Iterator[JupyterServer]:
    workdir = tmp_path_factory.mktemp(name or f"jupyter-{app}", numbered=False)
    server = JupyterServer(app, workdir, _server_env(fake), ARTIFACTS, settings)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def lab_server(fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("lab", fake, tmp_path_factory)


@pytest.fixture(scope="session")
def notebook_server(fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("notebook", fake, tmp_path_factory)


@pytest.fixture(scope="session")
def lab_doc_undo_server(
    fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JupyterServer]:
    """JupyterLab with the (deprecated) notebook-wide undo history instead of per-cell ones."""
    settings = {"@jupyterlab/notebook-extension:tracker": {"documentWideUndoRedo": True}}
    yield from _server("lab", fake, tmp_path_factory, "jupyter-lab-document-undo", settings)


@pytest.fixture(scope="session")
def chromium(prerequisites: None) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def _app(browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> Iterator[App]:
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    context.set_default_timeout(30_000)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"[{msg.type}] {msg.text}"))
    page.on("pageerror", lambda err: console.append(f"[pageerror] {err}"))
    app = App(page, server)
    app.console = console  # type: ignore[attr-defined]
    try:
        yield app
    finally:
        failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
        if failed:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            name = request.node.name.replace("/", "_")
            with contextlib.suppress(Exception):  # the page may be gone
                page.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"), full_page=True)
            (ARTIFACTS / f"FAILED-{name}.console.txt").write_text("\n".join(console), encoding="utf-8")
        context.close()
        server.shutdown_kernels()


@pytest.fixture
def lab(
    chromium: Any, lab_server: JupyterServer, fake: FakeAnthropic, request: pytest.FixtureRequest
) -> Iterator[App]:
    fake.reset()
    yield from _app(chromium, lab_server, request)


@pytest.fixture
def lab_doc_undo(
    chromium: Any, lab_doc_undo_server: JupyterServer, fake: FakeAnthropic, request: pytest.FixtureRequest
) -> Iterator[App]:
    yield from _app(chromium, lab_doc_undo_server, request)


@pytest.fixture
def nb7(
    chromium: Any, notebook_server: JupyterServer, fake: FakeAnthropic, request: pytest.FixtureRequest
) -> Iterator[App]:
    fake.reset()
    yield from _app(chromium, notebook_server, request)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
