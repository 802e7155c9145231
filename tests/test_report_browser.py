"""The HTML report in a real browser: headless Chromium (Debian's chromium + chromium-driver,
through selenium) opens it from file://, sorts the leaderboard, follows links, checks that every
image loaded and saves a screenshot. Run with `make test-browser` (installs what it needs);
`make test` leaves it out (marker `browser`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import _report_toy as R
from cbench.cli import main

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (make test-browser)")
    if not (CHROMIUM and DRIVER):
        pytest.skip("chromium and chromedriver are not installed (make test-browser installs them)")
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download a browser
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-browser")
    cases = R.write_cases(root / "cases")
    assert main(R.bench_args(cases, root / "bench")) in (0, None)
    assert main(["report", str(root / "bench"), "--html", str(root / "html")]) in (0, None)
    return root / "html"


def _images_loaded(driver) -> list[str]:
    """The images of the page that did not load (naturalWidth 0)."""
    return driver.execute_script(
        "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src);")


def _column(driver, index: int) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
        f".map(r => r.cells[{index}].getAttribute('data-value'));")


def test_the_report_sorts_links_and_loads_its_images_in_chromium(browser, site):
    from selenium.webdriver.common.by import By

    browser.get((site / "index.html").resolve().as_uri())
    assert "leaderboard" in browser.title
    assert _images_loaded(browser) == [] and browser.execute_script("return document.images.length") >= 1
    headers = browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")
    names = [h.text.replace("▲", "").replace("▼", "").strip() for h in headers]
    method_col, mean_col = names.index("method"), names.index("mean")
    means = [float(v) for v in _column(browser, mean_col)]
    assert means == sorted(means, reverse=True)  # ranked by mean when the page opens
    headers[mean_col].click()  # descending -> ascending
    assert [float(v) for v in _column(browser, mean_col)] == sorted(means)
    assert headers[mean_col].get_attribute("aria-sort") == "ascending"
    headers[method_col].click()
    methods = _column(browser, method_col)
    assert methods == sorted(methods) and set(methods) == {"eap", "acdc", "random"}
    # the comparison method can be changed in the page
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "against")).select_by_value("random")
    assert browser.find_element(By.ID, "p-head").text.startswith("p vs random")
    shot = Path(os.environ.get("CBENCH_SCREENSHOT_DIR", site)) / "leaderboard.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

    browser.find_element(By.LINK_TEXT, "toy3").click()  # a case link in the header
    assert browser.current_url.endswith("/cases/toy3.html")
    assert _images_loaded(browser) == [] and browser.execute_script("return document.images.length") >= 5
    browser.save_screenshot(str(shot.with_name("case-toy3.png")))
    browser.find_element(By.CSS_SELECTOR, "#case-table a[href$='eap.html']").click()
    assert browser.current_url.endswith("/methods/eap.html")
    assert "Mean edge AUROC" in browser.find_element(By.TAG_NAME, "main").text
    browser.find_element(By.ID, "nav-home").click()
    assert browser.current_url.endswith("/index.html")


def test_make_demo_ends_with_the_report_that_opens_in_chromium(browser, tmp_path, monkeypatch, capsys):
    """What `make demo` runs (`cbench demo`, here on two cases and two methods to stay small): its
    last line is the HTML report's path, and that report opens from file:// with every image."""
    from selenium.webdriver.common.by import By

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "demo"
    code = main(["demo", "--cases", "33,20", "--methods", "eap,random", "--n-examples", "20", "--out", str(out)])
    assert code in (0, None)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("HTML report: ")
    index = Path(last.split(": ", 1)[1])
    assert index == (out / "html" / "index.html").resolve() and index.is_file()
    browser.get(index.as_uri())
    assert "leaderboard" in browser.title
    assert _images_loaded(browser) == [] and browser.execute_script("return document.images.length") >= 1
    methods = set(_column(browser, [h.text.replace("▲", "").replace("▼", "").strip()
                                    for h in browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")]
                          .index("method")))
    assert methods == {"eap", "random"}
    browser.find_element(By.CSS_SELECTOR, "a[href$='cases/33.html']").click()
    assert browser.current_url.endswith("/cases/33.html") and _images_loaded(browser) == []
    browser.save_screenshot(str(Path(os.environ.get("CBENCH_SCREENSHOT_DIR", tmp_path)) / "demo-leaderboard.png"))
