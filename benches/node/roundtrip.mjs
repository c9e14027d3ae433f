// Request/reply round trips with mqtt.js (Babovic et al.'s web-IoT test): a responder
// subscribes to `<topic>/req` and answers each request on `<topic>/resp`; a requester sends
// one request, waits for its answer, and sends the next. Round trips per second and latency
// percentiles, and how many requests got no answer (lost). One JSON line on stdout.
//
// usage: node roundtrip.mjs URL [ROUND_TRIPS] [PAYLOAD_BYTES]
//   URL: mqtt://host:port, mqtts://host:port, ws://host:port/mqtt or wss://host:port/mqtt
//   CA_FILE: the CA to trust for mqtts/wss. QOS (default 1). NODELAY (default 1): turn Nagle off
//   on mqtt.js's TCP and TLS sockets, as the ws library does for WebSocket; with NODELAY=0 each
//   round trip waits for the client's own delayed ACK (about 40 ms) whatever the broker.

import { readFileSync } from 'node:fs';
import mqtt from 'mqtt';

const [url, roundTrips = '2000', payloadBytes = '64'] = process.argv.slice(2);
const total = Number(roundTrips);
const qos = Number(process.env.QOS ?? 1);
const noDelay = (process.env.NODELAY ?? '1') !== '0';
const ca = process.env.CA_FILE ? readFileSync(process.env.CA_FILE) : undefined;
const topic = `rt/${process.pid}`;
const payload = Buffer.alloc(Number(payloadBytes), 0x61);
const options = { ca, protocolVersion: 4, reconnectPeriod: 0, clean: true };
const PER_REQUEST_TIMEOUT_MS = 5000;

function connect(id) {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(url, { ...options, clientId: `${id}-${process.pid}` });
    if (noDelay) client.stream?.setNoDelay?.(true);
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
}

const subscribe = (client, filter) =>
  new Promise((resolve, reject) => client.subscribe(filter, { qos }, (e) => (e ? reject(e) : resolve())));

const responder = await connect('responder');
responder.on('message', (_, message) => responder.publish(`${topic}/resp`, message, { qos }));
await subscribe(responder, `${topic}/req`);
const requester = await connect('requester');
await subscribe(requester, `${topic}/resp`);

let pending = null;
requester.on('message', (_, message) => pending?.(message));
const latencies = [];
let lost = 0;
const started = process.hrtime.bigint();
for (let i = 0; i < total; i++) {
  const sent = process.hrtime.bigint();
  const answered = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), PER_REQUEST_TIMEOUT_MS);
    pending = (message) => {
      clearTimeout(timer);
      resolve(message.equals(payload));
    };
    requester.publish(`${topic}/req`, payload, { qos });
  });
  if (answered) latencies.push(Number(process.hrtime.bigint() - sent) / 1000);
  else lost++;
}
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
latencies.sort((a, b) => a - b);
const pct = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null);
console.log(
  JSON.stringify({
    url,
    qos,
    no_delay: noDelay,
    round_trips: total,
    answered: latencies.length,
    lost,
    seconds: Number(seconds.toFixed(3)),
    per_second: Number((latencies.length / seconds).toFixed(1)),
    p50_us: pct(0.5) && Math.round(pct(0.5)),
    p99_us: pct(0.99) && Math.round(pct(0.99)),
  }),
);
responder.end();
requester.end();
