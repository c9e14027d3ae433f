// The live dashboard in a real browser, run by interop/test_dashboard.py: headless Chromium
// (Debian's package) driven by puppeteer-core loads http://host:port/dashboard and waits until
// the matrix cells of the given pairs show a non-zero rate and latency. It then prints one JSON
// line: every matrix cell by its `data-pair` ({rate, p99, text, empty}), and exits 0; or 1 if
// the wait timed out (the JSON is printed all the same, for the test's message).
//
// usage: node dashboard.mjs <url> <timeout-ms> [screenshot.png] <pair>...
//   e.g. node dashboard.mjs http://127.0.0.1:8080/dashboard 20000 '' mqtt-stomp amqp-mqtt
// (CHROMIUM: the browser, /usr/bin/chromium; a screenshot path of '' takes none; LINGER_MS:
// for screenshots, how long to keep watching once the cells show, so the chart has a history)

import puppeteer from 'puppeteer-core';

const [url, timeout = '20000', screenshot = '', ...pairs] = process.argv.slice(2);

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
let ok = false;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
  page.on('console', (message) => console.error(`page: ${message.text()}`));
  page.on('pageerror', (error) => console.error(`page error: ${error.message}`));
  await page.goto(url, { waitUntil: 'load' });
  try {
    await page.waitForFunction(
      (pairs) =>
        pairs.every((pair) => {
          const td = document.querySelector(`td[data-pair="${pair}"]`);
          return td && Number(td.dataset.rate) > 0 && Number(td.dataset.p99) > 0 && td.textContent.trim() !== '';
        }),
      { timeout: Number(timeout), polling: 200 },
      pairs,
    );
    ok = true;
  } catch (e) {
    console.error(`waiting for ${pairs.join(', ')}: ${e.message}`);
  }
  if (screenshot) {
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.LINGER_MS ?? 0)));
    await page.screenshot({ path: screenshot, fullPage: true });
  }
  const cells = await page.evaluate(() =>
    Object.fromEntries(
      [...document.querySelectorAll('#matrix td')].map((td) => [
        td.dataset.pair,
        {
          rate: td.dataset.rate ?? null,
          p99: td.dataset.p99 ?? null,
          text: td.textContent.trim(),
          empty: td.classList.contains('empty'),
        },
      ]),
    ),
  );
  console.log(JSON.stringify(cells));
} finally {
  await browser.close();
}
process.exit(ok ? 0 : 1);
