"""The GPU views in a real JupyterLab (headless Chromium): a ScheduleExplorer on a cuda
target, the last thread binding applied through the panel, then the CUDA C tab, the
thread picture with the resources line, and Run (emulated where there is no GPU).
Screenshots go to artifacts/screenshots/gpu_*.png (gitignored)."""
from __future__ import annotations

from pathlib import Path

import pytest

from _lab import Lab

pytestmark = pytest.mark.browser

HERE = Path(__file__).resolve().parent
SHOTS = HERE.parents[1] / "artifacts" / "screenshots"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


@pytest.fixture(scope="module")
def page(tmp_path_factory, chromium):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with Lab(tmp_path_factory.mktemp("lab"), [HERE / "gpu_explorer.ipynb"]) as lab:
        context = chromium.new_context(viewport={"width": 1400, "height": 1100})
        try:
            pg = context.new_page()
            pg.set_default_timeout(90_000)
            pg.goto(lab.url("gpu_explorer.ipynb"))
            pg.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for()
            pg.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            pg.locator(f"{PANEL} .se-code-view").wait_for()
            yield pg
        finally:
            context.close()


def _option(select, starts: str) -> str:
    labels = select.locator("option").all_inner_texts()
    return next(o for o in labels if o.replace("\u00a0", " ").strip().startswith(starts))


def test_bind_in_the_panel_then_cuda_source_thread_picture_and_run(page):
    p = PANEL
    page.locator(f"{p} .se-code-tabs .lm-TabBar-tab", has_text="CUDA C").click()
    page.wait_for_function("document.querySelector('.se-cuda-source') && document"
                           ".querySelector('.se-cuda-source').innerText.includes('__global__')")
    before = page.locator(f"{p} .se-cuda-source").inner_text()
    assert "threadIdx.y" in before and "threadIdx.x" not in before

    tree = page.locator(f"{p} .se-loop-tree select")
    tree.select_option(label=_option(tree, "j_1_0 (4"))
    page.locator(f"{p} .se-bind-axis select").select_option(label="threadIdx.x")
    page.locator(f"{p} .se-btn-bind").click()
    page.wait_for_function("document.querySelector('.se-cuda-source').innerText"
                           ".includes('const int j_1_0 = threadIdx.x')")
    source = page.locator(f"{p} .se-cuda-source").inner_text()
    assert "dim3(4, 4, 1), dim3(4, 4, 1)" in source and "__launch_bounds__(16)" in source
    assert not page.locator(f"{p} .se-error-bind span").count()
    page.locator(f"{p} .se-code-tabs").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "gpu_1_cuda_source.png"), full_page=False)

    page.locator(f"{p} .se-explorer .widget-toggle-button", has_text="pictures").click()
    img = page.locator(f"{p} .se-explorer .se-live-figure")
    img.wait_for()
    page.wait_for_function("document.querySelector('.se-explorer .se-live-figure')"
                           ".naturalWidth > 500")
    page.wait_for_function("document.querySelector('.se-gpu-status').innerText"
                           ".includes('registers')")
    status = page.locator(f"{p} .se-gpu-status").inner_text()
    assert "grid (4, 4, 1), block (4, 4, 1)" in status and "registers" in status
    img.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "gpu_2_thread_picture.png"), full_page=False)

    page.locator(f"{p} .se-run").click()
    page.wait_for_function("document.querySelector('.se-result').innerText"
                           ".includes('matches numpy')", timeout=240_000)
    result = page.locator(f"{p} .se-result").inner_text()
    assert "emulated: correctness only, no GPU time" in result or " ms" in result
    page.locator(f"{p} .se-result").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "gpu_3_run.png"), full_page=False)
