"""WS-Notification interoperability: zeep (driven by the OASIS WS-N WSDLs shipped in the
onvif-zeep-async wheel) for Subscribe / Renew / Unsubscribe / CreatePullPoint / GetMessages,
and raw SOAP 1.1 documents in the shapes Apache CXF WSN and OKSE send, with a real consumer
endpoint (Python's http.server) receiving the Notify the broker pushes.

Needs: zeep, requests, pytest; `pip install --no-deps onvif-zeep-async` (only its WSDL/XSD
files are read).
"""

import http.server
import importlib.util
import os
import queue
import re
import shutil
import threading
import uuid

import pytest
import requests

WSNT = "http://docs.oasis-open.org/wsn/b-2"
WSA = "http://www.w3.org/2005/08/addressing"
NOTIFY_ACTION = "http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify"
ONVIF_EVENTS = "{http://www.onvif.org/ver10/events/wsdl}"
TIMEOUT = 5


def endpoint(broker, path="/wsn"):
    return f"http://{broker.host}:{broker.port('http')}{path}"


def wsdl_dir():
    spec = importlib.util.find_spec("onvif")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("onvif-zeep-async is not installed (pip install --no-deps onvif-zeep-async)")
    return os.path.join(list(spec.submodule_search_locations)[0], "wsdl")


@pytest.fixture(scope="module", params=["soap12", "soap11"])
def zeep_client(request, tmp_path_factory):
    """A zeep client over the WS-N bindings of ONVIF's events.wsdl: as shipped (SOAP 1.2), and a
    copy whose binding namespace is switched to SOAP 1.1 (as the codec's golden files were made)."""
    zeep = pytest.importorskip("zeep")
    from zeep.wsa import WsAddressingPlugin

    source = wsdl_dir()
    if request.param == "soap11":
        copy = tmp_path_factory.mktemp("wsdl11") / "wsdl"
        shutil.copytree(source, copy)
        events = copy / "events.wsdl"
        events.write_text(
            events.read_text().replace(
                'xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap12/"',
                'xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"',
            )
        )
        source = str(copy)
    transport = zeep.transports.Transport(timeout=TIMEOUT, operation_timeout=TIMEOUT)
    return zeep.Client(
        os.path.join(source, "events.wsdl"),
        transport=transport,
        plugins=[WsAddressingPlugin()],
        settings=zeep.Settings(strict=False),
    )


def service(client, binding, address):
    return client.create_service(ONVIF_EVENTS + binding, address)


def address_of(epr):
    """zeep renders wsa:Address (AttributedURIType) as an object with `_value_1`."""
    address = epr.Address
    return getattr(address, "_value_1", address)


class Consumer:
    """A NotificationConsumer: a real HTTP server recording each POST."""

    def __init__(self):
        self.received = queue.Queue()
        received = self.received

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                received.put((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def next(self):
        return self.received.get(timeout=TIMEOUT)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def consumer():
    c = Consumer()
    yield c
    c.close()


def topic_name(prefix="t"):
    return f"{prefix}{uuid.uuid4().hex[:12]}"


# Apache CXF WSN (JAXB): default namespaces, an xmlns on each WS-Addressing header.
CXF_NOTIFY = """<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Header><Action xmlns="http://www.w3.org/2005/08/addressing">http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify</Action><MessageID xmlns="http://www.w3.org/2005/08/addressing">urn:uuid:{mid}</MessageID><To xmlns="http://www.w3.org/2005/08/addressing">{to}</To></soap:Header><soap:Body><Notify xmlns="http://docs.oasis-open.org/wsn/b-2" xmlns:ns2="http://www.w3.org/2005/08/addressing"><NotificationMessage><Topic Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple">{topic}</Topic><Message>{message}</Message></NotificationMessage></Notify></soap:Body></soap:Envelope>"""

CXF_SUBSCRIBE = """<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Header><Action xmlns="http://www.w3.org/2005/08/addressing">http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeRequest</Action><MessageID xmlns="http://www.w3.org/2005/08/addressing">urn:uuid:{mid}</MessageID><To xmlns="http://www.w3.org/2005/08/addressing">{to}</To><ReplyTo xmlns="http://www.w3.org/2005/08/addressing"><Address>http://www.w3.org/2005/08/addressing/anonymous</Address></ReplyTo></soap:Header><soap:Body><Subscribe xmlns="http://docs.oasis-open.org/wsn/b-2" xmlns:ns2="http://www.w3.org/2005/08/addressing"><ConsumerReference><ns2:Address>{consumer}</ns2:Address></ConsumerReference><Filter><TopicExpression Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple">{topic}</TopicExpression></Filter>{policy}</Subscribe></soap:Body></soap:Envelope>"""

# OKSE / WS-Nu: `s:` and `ns2:` prefixes, no WS-Addressing headers, a namespaced Concrete topic.
OKSE_SUBSCRIBE = """<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header/><s:Body><ns2:Subscribe xmlns:ns2="http://docs.oasis-open.org/wsn/b-2" xmlns:ns3="http://www.w3.org/2005/08/addressing"><ns2:ConsumerReference><ns3:Address>{consumer}</ns3:Address></ns2:ConsumerReference><ns2:Filter><ns2:TopicExpression Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete" xmlns:okse="http://okse.default.topic">okse:{topic}/oslo</ns2:TopicExpression></ns2:Filter><ns2:InitialTerminationTime>PT10M</ns2:InitialTerminationTime></ns2:Subscribe></s:Body></s:Envelope>"""

OKSE_NOTIFY = """<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header/><s:Body><ns2:Notify xmlns:ns2="http://docs.oasis-open.org/wsn/b-2" xmlns:ns3="http://www.w3.org/2005/08/addressing"><ns2:NotificationMessage><ns2:Topic Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete" xmlns:okse="http://okse.default.topic">okse:{topic}/oslo</ns2:Topic><ns2:ProducerReference><ns3:Address>http://producer.example:8080</ns3:Address></ns2:ProducerReference><ns2:Message>{message}</ns2:Message></ns2:NotificationMessage></ns2:Notify></s:Body></s:Envelope>"""


def post11(url, body):
    return requests.post(
        url,
        data=body.encode(),
        headers={"Content-Type": "text/xml; charset=utf-8", "SOAPAction": '""'},
        timeout=TIMEOUT,
    )


def soap_text(xml, local):
    """Text of the first element with this local name, whatever its prefix."""
    m = re.search(rf"<(?:[\w.-]+:)?{local}(?:\s[^>]*)?>(.*?)</(?:[\w.-]+:)?{local}>", xml, re.S)
    assert m, f"no {local} in {xml}"
    return m.group(1)


def test_zeep_subscribe_renew_unsubscribe(broker, zeep_client, consumer):
    producer = service(zeep_client, "NotificationProducerBinding", endpoint(broker))
    te = zeep_client.get_element(f"{{{WSNT}}}TopicExpression")
    from zeep import xsd

    topic = topic_name()
    response = producer.Subscribe(
        ConsumerReference={"Address": consumer.url("zeep")},
        Filter={
            "_value_1": [
                xsd.AnyObject(
                    te, te(_value_1=f"tns1:{topic}//.", Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full")
                )
            ]
        },
        InitialTerminationTime="PT1H",
    )
    address = address_of(response.SubscriptionReference)
    assert address.startswith(endpoint(broker, "/wsn/subscriptions/"))
    assert response.TerminationTime is not None

    # A CXF-shaped producer publishes; the zeep subscriber's consumer gets the Notify.
    payload = '<reading xmlns="urn:example:meter"><kwh>12.5</kwh></reading>'
    r = post11(endpoint(broker), CXF_NOTIFY.format(mid=uuid.uuid4(), to=endpoint(broker), topic=f"{topic}", message=payload))
    assert r.status_code == 202, r.text
    _, headers, body = consumer.next()
    text = body.decode()
    assert payload in text
    assert NOTIFY_ACTION in text
    assert f"<wsa:Address>{address}</wsa:Address>" in text

    manager = service(zeep_client, "PausableSubscriptionManagerBinding", address)
    renewed = manager.Renew(TerminationTime="PT10M")
    assert renewed.TerminationTime is not None
    manager.PauseSubscription()
    manager.ResumeSubscription()
    manager.Unsubscribe()
    from zeep.exceptions import Fault

    with pytest.raises(Fault) as fault:
        manager.Unsubscribe()
    assert "no subscription" in fault.value.message


def test_zeep_pull_point_get_messages(broker, zeep_client):
    create = service(zeep_client, "CreatePullPointBinding", endpoint(broker))
    pull_point = address_of(create.CreatePullPoint().PullPoint)
    assert pull_point.startswith(endpoint(broker, "/wsn/pullpoints/"))

    # Subscribe the pull point with a raw CXF-shaped Subscribe, then publish OKSE-style.
    topic = topic_name()
    r = post11(endpoint(broker), CXF_SUBSCRIBE.format(mid=uuid.uuid4(), to=endpoint(broker), consumer=pull_point, topic=topic, policy=""))
    assert r.status_code == 200, r.text
    for i in range(3):
        r = post11(endpoint(broker), CXF_NOTIFY.format(mid=uuid.uuid4(), to=endpoint(broker), topic=topic, message=f"<n>{i}</n>"))
        assert r.status_code == 202, r.text

    pull = service(zeep_client, "PullPointBinding", pull_point)
    got = pull.GetMessages(MaximumNumber=2)
    messages = got.NotificationMessage
    assert len(messages) == 2
    # `<n>` sits in CXF's default namespace (wsnt), and keeps it on the way through.
    got = [(m.Message._value_1.tag, m.Message._value_1.text) for m in messages]
    assert got == [(f"{{{WSNT}}}n", "0"), (f"{{{WSNT}}}n", "1")]
    # CXF's unprefixed topic is in the default namespace in scope (wsnt), so it comes back prefixed.
    assert messages[0].Topic._value_1.endswith(f":{topic}")
    rest = pull.GetMessages(MaximumNumber=10).NotificationMessage
    assert len(rest) == 1
    pull.DestroyPullPoint()
    from zeep.exceptions import Fault

    with pytest.raises(Fault):
        pull.GetMessages(MaximumNumber=1)


def test_cxf_subscribe_raw_and_wrapped_notify_reach_a_consumer(broker, consumer):
    topic = topic_name()
    r = post11(
        endpoint(broker),
        CXF_SUBSCRIBE.format(mid=uuid.uuid4(), to=endpoint(broker), consumer=consumer.url("cxf"), topic=topic, policy=""),
    )
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/xml")
    raw_topic = topic_name()
    r = post11(
        endpoint(broker),
        CXF_SUBSCRIBE.format(
            mid=uuid.uuid4(),
            to=endpoint(broker),
            consumer=consumer.url("cxf-raw"),
            topic=raw_topic,
            policy="<SubscriptionPolicy><UseRaw/></SubscriptionPolicy>",
        ),
    )
    assert r.status_code == 200, r.text

    payload = '<foo xmlns="" xmlns:ns6="urn:x">bar</foo>'
    r = post11(endpoint(broker), CXF_NOTIFY.format(mid=uuid.uuid4(), to=endpoint(broker), topic=topic, message=payload))
    assert r.status_code == 202 and r.text == ""
    path, headers, body = consumer.next()
    assert path == "/cxf"
    assert headers["content-type"].startswith("text/xml")
    assert headers["soapaction"] == f'"{NOTIFY_ACTION}"'
    text = body.decode()
    assert soap_text(text, "Topic").endswith(f":{topic}")
    assert soap_text(text, "Message") == payload

    r = post11(endpoint(broker), CXF_NOTIFY.format(mid=uuid.uuid4(), to=endpoint(broker), topic=raw_topic, message="<raw>1</raw>"))
    assert r.status_code == 202
    path, _, body = consumer.next()
    assert path == "/cxf-raw"
    text = body.decode()
    assert "Notify>" not in text
    # The default namespace in scope at the producer (CXF's wsnt) travels with the element.
    assert soap_text(text, "Body") == f'<raw xmlns="{WSNT}">1</raw>'


def test_okse_subscribe_and_notify_with_namespaced_topics(broker, consumer):
    topic = topic_name("weather")
    r = post11(endpoint(broker), OKSE_SUBSCRIBE.format(consumer=consumer.url("okse"), topic=topic))
    assert r.status_code == 200, r.text
    assert "SubscribeResponse" in r.text
    payload = '<ns3:weather xmlns:ns3="urn:weather"><ns3:temp>4</ns3:temp></ns3:weather>'
    r = post11(endpoint(broker), OKSE_NOTIFY.format(topic=topic, message=payload))
    assert r.status_code == 202, r.text
    _, _, body = consumer.next()
    text = body.decode()
    assert soap_text(text, "Message") == payload
    # Re-emitted in the subscriber's namespace.
    assert soap_text(text, "Topic").endswith(f":{topic}/oslo")
    assert 'xmlns:tns="http://okse.default.topic"' in text


def test_faults_are_soap_faults(broker):
    # Not SOAP at all: 400 (with a fault body); every SOAP fault is 500, in SOAP 1.2 too.
    r = post11(endpoint(broker), "not xml")
    assert r.status_code == 400
    assert "soap:Client" in r.text
    unknown = """<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><ns2:Unsubscribe xmlns:ns2="http://docs.oasis-open.org/wsn/b-2"/></s:Body></s:Envelope>"""
    r = post11(endpoint(broker, "/wsn/subscriptions/does-not-exist"), unknown)
    assert r.status_code == 500
    assert "ResourceUnknownFault" in r.text
    unknown12 = unknown.replace("http://schemas.xmlsoap.org/soap/envelope/", "http://www.w3.org/2003/05/soap-envelope")
    r = requests.post(
        endpoint(broker, "/wsn/subscriptions/does-not-exist"),
        data=unknown12.encode(),
        headers={"Content-Type": "application/soap+xml; charset=utf-8"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 500, "CXF reads typed SOAP 1.2 faults only from a 500"
    assert "soap:Sender" in r.text and "ResourceUnknownFault" in r.text
