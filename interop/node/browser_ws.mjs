// A real browser on tolk's WebSocket endpoints, run by interop/test_browser.py: headless
// Chromium (Debian's package) driven by puppeteer-core loads mqtt.js and @stomp/stompjs from
// node_modules into a page, connects to ws://host:port/mqtt and /stomp, and:
//   - subscribes over MQTT to `<prefix>/in`, then prints `ready`;
//   - for the first message there, publishes `echo:<payload>` over MQTT to `<prefix>/out` and
//     sends the payload over STOMP to `/topic/<prefix>/stomp-out`, then prints `done <payload>`.
// Native clients of other protocols (in the Python test) feed `<prefix>/in` and check the rest.
//
// usage: node browser_ws.mjs <host> <http-port> <prefix>   (CHROMIUM: the browser, /usr/bin/chromium)

import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const local = (path) => fileURLToPath(new URL(`./node_modules/${path}`, import.meta.url));
const [host = '127.0.0.1', port = '8080', prefix = 'browser'] = process.argv.slice(2);

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const fail = async (why) => {
  console.error(`FAIL: ${why}`);
  await browser.close();
  process.exit(1);
};
const timer = setTimeout(() => fail('timed out after 20 s'), 20000);

try {
  const page = await browser.newPage();
  page.on('console', (message) => console.error(`page: ${message.text()}`));
  await page.addScriptTag({ path: local('mqtt/dist/mqtt.min.js') });
  await page.addScriptTag({ path: local('@stomp/stompjs/bundles/stomp.umd.min.js') });
  await page.exposeFunction('report', (line) => console.log(line));
  await page.evaluate(
    ({ host, port, prefix }) =>
      new Promise((resolve, reject) => {
        const stomp = new StompJs.Client({ brokerURL: `ws://${host}:${port}/stomp`, reconnectDelay: 0 });
        stomp.onStompError = (frame) => reject(new Error(`STOMP ERROR ${frame.headers.message}`));
        stomp.onConnect = () => {
          const client = mqtt.connect(`ws://${host}:${port}/mqtt`, { protocolVersion: 5, reconnectPeriod: 0 });
          client.on('error', (e) => reject(e));
          client.on('message', (topic, payload) => {
            const text = new TextDecoder().decode(payload);
            client.publish(`${prefix}/out`, `echo:${text}`, { qos: 1 }, () => {
              // Done once the broker has the STOMP message too (its RECEIPT).
              stomp.watchForReceipt('sent', () => window.report(`done ${text}`).then(resolve));
              stomp.publish({ destination: `/topic/${prefix}/stomp-out`, body: text, headers: { receipt: 'sent' } });
            });
          });
          client.on('connect', () =>
            client.subscribe(`${prefix}/in`, { qos: 1 }, (err) => (err ? reject(err) : window.report('ready'))),
          );
        };
        stomp.activate();
      }),
    { host, port, prefix },
  );
  clearTimeout(timer);
  await browser.close();
} catch (e) {
  await fail(e.message ?? String(e));
}
