"""The dashboard in a real browser: headless Chromium (Debian's chromium and chromium-driver,
installed by ``make deb-tools``) driven by selenium against a live 3-node cluster, the page
loaded from a follower. Screenshots go to ``<tmp_path>/screenshots``."""

from __future__ import annotations

import shutil
import time

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from horologe.client import Client
from testkit.process_cluster import ADMIN, CLIENT

NO_RETRIES = "retry_levels_ms = []\n"  # a nack goes straight to the DLQ
WAIT_S = 30


@pytest.fixture
def browser():
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_bin, "chromium / chromedriver missing: make deb-tools installs them"
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1700"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(driver_bin), options=opts)
    try:
        yield driver
    finally:
        driver.quit()  # chromium and chromedriver with it


def text(driver, css: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def until(driver, what: str, check):
    """Wait for ``check(driver)`` to return something true; else fail naming ``what``."""
    try:
        return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(lambda d: check(d))
    except Exception as e:
        raise AssertionError(f"{what}; page says: {text(driver, '#problem')!r}") from e


def roles(driver) -> dict[str, str]:
    out = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, "#nodes tr"):
        out[tr.get_attribute("data-node")] = tr.find_elements(By.TAG_NAME, "td")[1].text
    return out


def test_dashboard_from_a_follower(make_cluster, browser, tmp_path):
    started = time.monotonic()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    cluster = make_cluster(extra_toml=NO_RETRIES)
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, admin_token=ADMIN, retry_s=20)
    c.produce("reports", "monthly", deliver_after="1h")
    c.produce_batch([{"topic": "orders", "body": f"o{k}", "deliver_after": f"{k}m"} for k in range(1, 13)])
    c.produce("jobs", "resize image 7", tags=["img"])
    (dead,) = c.pull("jobs", "billing", wait_ms=5_000)
    assert c.nack("jobs", "billing", [dead.receipt]) == {"retried": 0, "dead_lettered": 1}

    browser.get(f"{cluster.url(follower)}/ui")
    until(browser, "the page asks for tokens", lambda d: "tokens" in text(d, "#problem"))
    browser.find_element(By.ID, "token-client").send_keys(CLIENT)
    browser.find_element(By.ID, "token-admin").send_keys(ADMIN)
    browser.find_element(By.ID, "token-save").click()

    old = f"n{master + 1}"
    want = {f"n{i + 1}": "master" if i == master else "follower" for i in cluster.indexes}
    until(browser, f"the nodes and roles {want}", lambda d: roles(d) == want)
    assert text(browser, "#master") == old
    assert text(browser, "#served-by") == f"page served by n{follower + 1}"
    pending = '#pending tr[data-topic="reports"] td.num'
    until(browser, "topic reports pending", lambda d: text(d, pending) == "1")
    until(browser, "the lateness histogram", lambda d: "hand-outs on" in text(d, "#lateness-summary"))
    # 12 orders due within 12 minutes and the report in an hour: 13 in the next 48 hours.
    until(browser, "the forecast", lambda d: text(d, "#forecast-status") == "13 due in the next 48 × 1h")
    assert browser.find_elements(By.CSS_SELECTOR, "#forecast-chart canvas")
    browser.save_screenshot(str(shots / "ui-cluster.png"))

    browser.find_element(By.ID, "release-btn").click()
    until(browser, "the release's answer", lambda d: "handed over to" in text(d, "#release-result"))
    new = text(browser, "#release-result").split("handed over to ")[1].split(" ")[0]
    assert new != old and cluster.wait_leader(exclude=master) == int(new[1:]) - 1
    until(browser, f"{new} as master", lambda d: text(d, "#master") == new and roles(d)[new] == "master")
    browser.save_screenshot(str(shots / "ui-released.png"))

    until(browser, "billing's DLQ", lambda d: text(d, '#groups tr[data-group="billing"] td.dlq') == "1")
    browser.find_element(By.CSS_SELECTOR, '#groups tr[data-group="billing"] button.browse').click()
    row = f'#dlq-entries tr[data-id="{dead.id}"]'
    until(browser, "the dead message listed", lambda d: d.find_elements(By.CSS_SELECTOR, row))
    assert "resize image 7" in text(browser, row) and "jobs" in text(browser, row)
    browser.save_screenshot(str(shots / "ui-dlq.png"))
    browser.find_element(By.CSS_SELECTOR, f"{row} input.pick").click()
    browser.find_element(By.ID, "requeue-selected").click()
    until(browser, "the requeue's answer", lambda d: "requeued 1 to jobs" in text(d, "#requeue-result"))
    until(browser, "the DLQ emptied", lambda d: not d.find_elements(By.CSS_SELECTOR, "#dlq-entries tr"))
    browser.save_screenshot(str(shots / "ui-requeued.png"))

    back = c.pull("jobs", "billing", wait_ms=5_000)
    assert [(m.body, m.tags, m.attempt) for m in back] == [(b"resize image 7", ("img",), 0)]
    assert back[0].id != dead.id
    print(f"dashboard test: {time.monotonic() - started:.1f} s; screenshots in {shots}")
