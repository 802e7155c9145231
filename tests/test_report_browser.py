"""The HTML report in a real browser: headless Chromium (Debian's chromium + chromium-driver,
through selenium) opens it from file://, sorts the leaderboard, follows links, checks that every
image loaded and that every figure agrees with its table (ROC panels' AUROC against the case
table, the box plot's means against the mean column, the difference plot against the AUROC cells
for whichever entry the selector names), that the filter hides rows, and that the leaderboard
fits the window with its first column in view; saves screenshots. Run with `make test-browser` (installs what it needs);
`make test` leaves it out (marker `browser`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import _report_toy as R
import pytest
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
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1024,900",
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
    assert _images_loaded(browser) == [] and browser.execute_script("return document.querySelectorAll('svg').length") >= 2
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
    assert _images_loaded(browser) == [] and browser.execute_script("return document.images.length") >= 4
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
    assert _images_loaded(browser) == [] and browser.execute_script("return document.querySelectorAll('svg').length") >= 2
    methods = set(_column(browser, [h.text.replace("▲", "").replace("▼", "").strip()
                                    for h in browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")]
                          .index("method")))
    assert methods == {"eap", "random"}
    browser.find_element(By.CSS_SELECTOR, "a[href$='cases/33.html']").click()
    assert browser.current_url.endswith("/cases/33.html") and _images_loaded(browser) == []
    browser.save_screenshot(str(Path(os.environ.get("CBENCH_SCREENSHOT_DIR", tmp_path)) / "demo-leaderboard.png"))


def _table_aurocs(driver) -> dict:
    """{entry: {case: AUROC}} from the leaderboard's per-case cells (their data-value)."""
    return driver.execute_script("""
        const out = {};
        document.querySelectorAll('#leaderboard tbody tr').forEach(tr => {
          const row = out[tr.getAttribute('data-name')] = {};
          tr.querySelectorAll('td.case').forEach(td => {
            const v = td.getAttribute('data-value'); row[td.getAttribute('data-case')] = v === '' ? null : parseFloat(v);
          });
        });
        return out;""")


def _bars(driver) -> dict:
    return driver.execute_script("""
        const out = {};
        document.querySelectorAll('#diff-plot rect.diff-bar').forEach(b => {
          out[b.getAttribute('data-entry') + '|' + b.getAttribute('data-case')] = parseFloat(b.getAttribute('data-value'));
        });
        return out;""")


def _check_diff_plot(driver, against: str) -> dict:
    table = _table_aurocs(driver)
    bars = _bars(driver)
    assert driver.find_element("id", "diff-svg").get_attribute("data-against") == against
    want = {f"{e}|{c}": round(v - table[against][c], 6) for e, row in table.items() if e != against
            for c, v in row.items() if v is not None and table[against][c] is not None}
    assert set(bars) == set(want) and bars, (bars, want)
    for k, v in want.items():
        assert bars[k] == pytest.approx(v, abs=2e-6), k
    return bars


def test_every_figure_agrees_with_its_table(browser, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get((site / "index.html").resolve().as_uri())
    # the box plot's means are the mean column
    means = browser.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
        ".map(r => [r.getAttribute('data-name'), r.querySelector('td.mean').getAttribute('data-value')]));")
    boxes = browser.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#auroc-boxplot g.box'))"
        ".map(g => [g.getAttribute('data-name'), g.getAttribute('data-mean')]));")
    assert set(boxes) == set(means) and len(means) == 3
    for name, m in means.items():
        assert float(boxes[name]) == pytest.approx(float(m), abs=1e-6)
    # the MIB AUROC column and the per-tier table of both kinds are the results file's numbers
    import json

    res = json.loads((site.parent / "bench" / "results.json").read_text())["results"]
    shown = browser.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
        ".map(r => [r.getAttribute('data-name'), r.querySelector('td.mib').textContent.trim()]));")
    assert shown == {m: f"{sum(res['auroc_mib'][c][m] for c in ('toy3', 'toy4')) / 2:.3f}" for m in means}
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#auroc-tiers tbody td[data-tier]'))"
        ".filter(td => td.className).map(td => [td.closest('tr').getAttribute('data-name'), td.getAttribute('data-tier'),"
        " td.className, td.textContent.trim()]);")
    want = [[m, t, f"tier-{k}", f"{row[m][k]:.3f}"] for m in means for t, row in res["auroc_by_tier"].items()
            for k in ("rank", "mib")]
    assert sorted(cells) == sorted(want) and len(cells) == 6 * len(res["auroc_by_tier"])
    # the difference plot follows the selector
    first = _check_diff_plot(browser, "acdc")
    Select(browser.find_element(By.ID, "against")).select_by_value("random")
    second = _check_diff_plot(browser, "random")
    assert first != second and browser.find_element(By.ID, "diff-against").text == "random"
    # the filter hides rows, and their bars
    box = browser.find_element(By.ID, "filter")
    box.send_keys("eap")
    shown = browser.execute_script("return Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
                                   ".filter(r => r.offsetParent !== null).map(r => r.getAttribute('data-name'));")
    assert shown == ["eap"]
    assert {k.split("|")[0] for k in _bars(browser)} == {"eap"}
    box.clear()
    box.send_keys(" ")  # an input event with an empty query: every row back
    assert len([r for r in browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr") if r.is_displayed()]) == 3
    # every case page: each ROC panel's AUROC is its row's table cell
    for case in ("toy3", "toy4"):
        browser.get((site / "cases" / f"{case}.html").resolve().as_uri())
        cells = browser.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#case-table tbody tr'))"
            ".map(r => [r.getAttribute('data-name'), r.querySelector('td.auroc').textContent.trim()]));")
        panels = browser.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#roc-panels svg.roc'))"
            ".map(s => [s.getAttribute('data-name'), s.querySelector('text.roc-title').textContent]));")
        assert set(panels) == set(cells) == {"eap", "acdc", "random"}
        for name, text in panels.items():
            assert text == f"{name}: AUROC {cells[name]}"


def test_the_leaderboard_fits_the_window_with_its_first_column_in_view(browser, site):
    browser.get((site / "index.html").resolve().as_uri())
    width = browser.execute_script("return window.innerWidth")
    assert width <= 1024
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no page-wide scroll
    # with many cases the table scrolls inside its box; the entry's name stays where it was
    browser.execute_script("""
        const t = document.getElementById('leaderboard');
        t.querySelectorAll('tr').forEach(tr => { for (let i = 0; i < 30; i++) {
          const c = document.createElement(tr.parentNode.tagName === 'THEAD' ? 'th' : 'td');
          c.textContent = '0.999'; tr.appendChild(c); } });""")
    box = browser.execute_script("return document.querySelector('#leaderboard').parentNode.scrollWidth")
    assert box > width
    before = browser.execute_script("return document.querySelector('#leaderboard tbody td').getBoundingClientRect().left")
    browser.execute_script("document.querySelector('#leaderboard').parentNode.scrollLeft = 400")
    after = browser.execute_script("return document.querySelector('#leaderboard tbody td').getBoundingClientRect().left")
    other = browser.execute_script("return document.querySelector('#leaderboard tbody td.mean').getBoundingClientRect().left")
    assert after == pytest.approx(before, abs=1) and other < before + 50
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width


def test_the_leaderboard_sentence_reads_and_the_difference_legend_lies_inside_its_svg(browser, site):
    """Issue 47: the template's whitespace control ate the space in "method over all"; on two cases
    the difference plot's SVG was 132 px wide with a legend label at x = 209."""
    browser.get((site / "index.html").resolve().as_uri())
    text = browser.execute_script("return document.querySelector('main p, body p').textContent")
    assert "discovery method over all 2 cases" in " ".join(text.split())
    assert "methodover" not in text
    inside = browser.execute_script("""
        const svg = document.getElementById('diff-svg'); const b = svg.getBoundingClientRect();
        return Array.from(svg.querySelectorAll('.legend text, .legend rect')).map(n => {
          const r = n.getBoundingClientRect();
          return [n.textContent, r.left >= b.left - 0.5 && r.right <= b.right + 0.5 && r.top >= b.top - 0.5
                  && r.bottom <= b.bottom + 0.5]; });""")
    assert inside and all(ok for _name, ok in inside), inside
    caption = browser.execute_script("return document.getElementById('diff-plot').parentNode.previousElementSibling.textContent")
    assert "Dots" not in caption and "bar" in caption
