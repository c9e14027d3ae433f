// XEP-0060 round trip with xmpp.js (@xmpp/client over TCP), run by interop/test_xmpp.py against
// Prosody and tolk: STARTTLS (the CA comes from NODE_EXTRA_CA_CERTS), SASL PLAIN, resource
// binding, subscribe this full JID to <node> on pubsub.<domain>, publish <payload> (an XML
// element) there with an item id of our own, wait for the event notification, then print one
// JSON line on stdout: the JID, whether the stream is TLS, the subscribe and publish answers, and
// the <item/> of the event as XML. Exit 0, or 1 with the reason on stderr.
//
// usage: node xmpp_roundtrip.mjs <service> <domain> <user> <password> <node> <payload-xml>
//   e.g. node xmpp_roundtrip.mjs xmpp://127.0.0.1:5222 localhost bob secret a/b "<x xmlns='urn:y'/>"

import { client, xml } from '@xmpp/client';

const [service, domain, username, password, node, payloadXml] = process.argv.slice(2);
if (!payloadXml) {
  console.error('usage: node xmpp_roundtrip.mjs <service> <domain> <user> <password> <node> <payload-xml>');
  process.exit(2);
}
const pubsub = `pubsub.${domain}`;
const NS_PUBSUB = 'http://jabber.org/protocol/pubsub';
const NS_EVENT = 'http://jabber.org/protocol/pubsub#event';
const itemId = `xmppjs-${process.pid}`;

function fail(why) {
  console.error(`FAIL: ${why}`);
  process.exit(1);
}

setTimeout(() => fail('timed out after 20 s'), 20000).unref();

// @xmpp/client's own XML parser (ltx), as its stream uses it.
function parse(text) {
  const parser = new xml.Parser();
  let root = null;
  let error = null;
  parser.on('start', (element) => { root = element; });
  parser.on('element', (element) => { root.append(element); });
  parser.on('error', (err) => { error = err; });
  parser.write(text);
  parser.end();
  if (error || !root) fail(`payload is not XML: ${error ?? 'empty'}`);
  return root;
}

let mechanismUsed = null;
const xmpp = client({
  service,
  domain,
  resource: `xmppjs-${process.pid}`,
  // PLAIN, as the tests require of both servers (xmpp.js would prefer SCRAM when offered).
  credentials: async (authenticate, mechanisms) => {
    if (!mechanisms.includes('PLAIN')) fail(`SASL PLAIN not offered (offered: ${mechanisms.join(' ')})`);
    mechanismUsed = 'PLAIN';
    await authenticate({ username, password }, 'PLAIN');
  },
});
xmpp.reconnect.stop();
xmpp.on('error', (err) => fail(`xmpp.js error: ${err?.condition ?? ''} ${err?.message ?? err}`));

let resolveEvent;
const event = new Promise((resolve) => { resolveEvent = resolve; });
xmpp.on('stanza', (stanza) => {
  if (!stanza.is('message')) return;
  const items = stanza.getChild('event', NS_EVENT)?.getChild('items');
  if (!items || items.attrs.node !== node) return;
  const item = items.getChild('item');
  if (item) resolveEvent({ from: stanza.attrs.from, item });
});

xmpp.on('online', async (address) => {
  try {
    const jid = address.toString();
    const secure = xmpp.isSecure();
    const subscribed = await xmpp.iqCaller.request(
      xml('iq', { type: 'set', to: pubsub },
        xml('pubsub', { xmlns: NS_PUBSUB }, xml('subscribe', { node, jid }))),
    );
    const subscription = subscribed.getChild('pubsub', NS_PUBSUB)?.getChild('subscription');
    const published = await xmpp.iqCaller.request(
      xml('iq', { type: 'set', to: pubsub },
        xml('pubsub', { xmlns: NS_PUBSUB },
          xml('publish', { node }, xml('item', { id: itemId }, parse(payloadXml))))),
    );
    const publishedItem = published.getChild('pubsub', NS_PUBSUB)?.getChild('publish')?.getChild('item');
    const { from, item } = await event;
    console.log(JSON.stringify({
      jid,
      secure,
      mechanism: mechanismUsed,
      subscription: subscription?.attrs ?? null,
      published_id: publishedItem?.attrs.id ?? null,
      sent_id: itemId,
      event_from: from,
      item: item.toString(),
    }));
    await xmpp.stop();
    process.exit(0);
  } catch (err) {
    fail(`${err?.condition ?? ''} ${err?.message ?? err}`);
  }
});

xmpp.start().catch((err) => fail(`start: ${err?.condition ?? ''} ${err?.message ?? err}`));
