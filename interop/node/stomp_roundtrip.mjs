// STOMP round trip with @stomp/stompjs over raw TCP (@stomp/tcp-wrapper), run by
// interop/test_stomp.py: subscribe (waiting for the receipt), publish a UTF-8 text message and a
// binary message with NULs, receive both, compare byte for byte, exit 0 (pass) or 1 (fail).
//
// usage: node stomp_roundtrip.mjs <host> <port>

import { Client } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';

const host = process.argv[2] ?? '127.0.0.1';
const port = Number(process.argv[3] ?? 61613);
const destination = `/topic/interop/node/${process.pid}`;
const text = 'héllo from stompjs ✓ 世界';
const binary = Uint8Array.from([0, 1, 2, 0, 255, 0x7f, 0, 10, 13, 0]);

function fail(why) {
  console.error(`FAIL: ${why}`);
  process.exit(1);
}

setTimeout(() => fail('timed out after 15 s'), 15000).unref();

const client = new Client({
  webSocketFactory: () => new TCPWrapper(host, port),
  connectHeaders: { host: 'localhost', login: 'node', passcode: 'x' },
  reconnectDelay: 0,
  heartbeatIncoming: 10000,
  heartbeatOutgoing: 10000,
  onStompError: (frame) => fail(`ERROR frame: ${frame.headers.message}`),
  onWebSocketError: (event) => fail(`socket error: ${event?.message ?? event}`),
});

const received = [];

function check() {
  const [first, second] = received;
  if (first.body !== text) fail(`text body ${JSON.stringify(first.body)} != ${JSON.stringify(text)}`);
  if (first.headers['content-type'] !== 'text/plain;charset=utf-8') {
    fail(`text content-type ${first.headers['content-type']}`);
  }
  if (first.headers['x-lang'] !== 'js') fail(`x-lang header ${first.headers['x-lang']}`);
  if (first.headers.destination !== destination) fail(`destination ${first.headers.destination}`);
  if (first.headers.subscription !== 'node-sub') fail(`subscription ${first.headers.subscription}`);
  const got = second.binaryBody;
  if (got.length !== binary.length || !got.every((b, i) => b === binary[i])) {
    fail(`binary body [${Array.from(got)}] != [${Array.from(binary)}]`);
  }
  if (second.headers['content-type'] !== 'application/octet-stream') {
    fail(`binary content-type ${second.headers['content-type']}`);
  }
  console.log('stompjs round trip OK');
  client.deactivate().then(() => process.exit(0));
}

client.onConnect = (connected) => {
  if (connected.headers.version !== '1.2') fail(`negotiated version ${connected.headers.version}`);
  client.watchForReceipt('node-sub-receipt', () => {
    client.publish({
      destination,
      body: text,
      headers: { 'content-type': 'text/plain;charset=utf-8', 'x-lang': 'js' },
    });
    client.publish({ destination, binaryBody: binary, headers: { 'content-type': 'application/octet-stream' } });
  });
  client.subscribe(
    destination,
    (message) => {
      received.push(message);
      if (received.length === 2) check();
    },
    { id: 'node-sub', receipt: 'node-sub-receipt' },
  );
};

client.activate();
