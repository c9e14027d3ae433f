"""WS-Notification with users and the access-control list, with zeep: a WS-Security
UsernameToken (zeep.wsse.username, #PasswordText) and HTTP Basic (the requests Session under
zeep's transport) logging in or refused with wsse:FailedAuthentication, PasswordDigest refused,
and the ACL's refusals answered with typed faults. The broker reads the mosquitto_passwd file and
the Mosquitto-syntax ACL of crates/auth/tests/fixtures as they are:

alice: readwrite sensors/#
bob:   read sensors/# but not sensors/secret/#, write sensors/bob/#

Needs what interop/test_wsn.py needs (zeep, onvif-zeep-async's WSDLs), whose zeep client fixture
(SOAP 1.2 and SOAP 1.1) is used here with credentials set per call.
"""

import uuid

import pytest
import requests
from lxml import etree
from test_wsn import WSNT, address_of, endpoint, service, zeep_client  # noqa: F401 (zeep_client is a fixture)

from conftest import ROOT, Broker

FIXTURES = ROOT / "crates" / "auth" / "tests" / "fixtures"
WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
CONCRETE = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete"
FULL = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full"
TIMEOUT = 10

zeep = pytest.importorskip("zeep")
from zeep.exceptions import Fault  # noqa: E402
from zeep.wsse.username import UsernameToken  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Named `broker` so that test_wsn's fixtures run against this one."""
    b = Broker(
        tmp_path_factory.mktemp("tolk-wsn-auth"),
        extra=f'[auth]\npassword_file = "{FIXTURES / "passwd"}"\nacl_file = "{FIXTURES / "acl"}"\n',
    )
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


def log_in(client, token=None, basic=None, digest=False):
    """Credentials for the client's next calls: a UsernameToken `(user, password)`, HTTP Basic
    `(user, password)`, or neither."""
    client.wsse = UsernameToken(*token, use_digest=digest) if token else None
    client.transport.session.auth = basic


def assert_wsse(fault, code):
    """A WS-Security fault: SOAP 1.1's faultcode, or SOAP 1.2's Subcode under Sender."""
    subcodes = [q.text for q in (fault.subcodes or [])]
    if subcodes:
        assert fault.code.endswith(":Sender"), fault.code
        assert subcodes == [f"{{{WSSE}}}{code}"], subcodes
    else:
        assert fault.code == f"wsse:{code}", fault.code


def assert_wsn_fault(fault, name):
    assert name in etree.tostring(fault.detail).decode(), fault.detail


def create_pull_point(client, broker):
    created = service(client, "CreatePullPointBinding", endpoint(broker)).CreatePullPoint()
    return address_of(created.PullPoint)


def subscribe(client, broker, consumer, expression):
    te = client.get_element(f"{{{WSNT}}}TopicExpression")
    producer = service(client, "NotificationProducerBinding", endpoint(broker))
    return producer.Subscribe(
        ConsumerReference={"Address": consumer},
        Filter={"_value_1": [zeep.xsd.AnyObject(te, te(_value_1=expression, Dialect=FULL))]},
    )


def notify(client, broker, topic, text):
    consumer = service(client, "NotificationConsumerBinding", endpoint(broker))
    consumer.Notify(
        NotificationMessage=[
            {
                "Topic": {"_value_1": f"tns1:{topic}", "Dialect": CONCRETE},
                "Message": {"_value_1": etree.fromstring(f'<reading xmlns="urn:test">{text}</reading>')},
            }
        ]
    )


def test_username_token_right_password_accepted_wrong_and_digest_refused(broker, zeep_client):
    log_in(zeep_client, token=("alice", "wonder land"))
    pull_point = create_pull_point(zeep_client, broker)
    assert pull_point.startswith(endpoint(broker, "/wsn/pullpoints/"))

    log_in(zeep_client, token=("alice", "wonderland"))
    with pytest.raises(Fault) as refused:
        create_pull_point(zeep_client, broker)
    assert_wsse(refused.value, "FailedAuthentication")
    assert "wonderland" not in refused.value.message

    # PasswordDigest cannot be checked against salted PBKDF2 hashes: refused, saying what works.
    log_in(zeep_client, token=("alice", "wonder land"), digest=True)
    with pytest.raises(Fault) as digest:
        create_pull_point(zeep_client, broker)
    assert_wsse(digest.value, "UnsupportedSecurityToken")
    assert "PasswordText" in digest.value.message

    log_in(zeep_client, token=("alice", "wonder land"))
    service(zeep_client, "PullPointBinding", pull_point).DestroyPullPoint()


def test_http_basic_right_password_accepted_wrong_and_none_refused_with_401(broker, zeep_client):
    log_in(zeep_client, basic=("bob", "b0b!"))
    pull_point = create_pull_point(zeep_client, broker)
    service(zeep_client, "PullPointBinding", pull_point).DestroyPullPoint()

    for wrong in [("bob", "bob"), None]:
        log_in(zeep_client, basic=wrong)
        with pytest.raises(Fault) as refused:
            create_pull_point(zeep_client, broker)
        assert_wsse(refused.value, "FailedAuthentication")

    # In HTTP terms: 401 with a challenge, so that HTTP clients know to send Basic.
    create = f'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><CreatePullPoint xmlns="{WSNT}"/></s:Body></s:Envelope>'
    r = requests.post(
        endpoint(broker),
        data=create,
        auth=("bob", "bob"),
        headers={"Content-Type": "text/xml; charset=utf-8"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == 'Basic realm="tolk"'
    assert "FailedAuthentication" in r.text


def test_acl_denials_are_typed_faults_and_a_deny_inside_a_filter_withholds(broker, zeep_client):
    run = f"r{uuid.uuid4().hex[:8]}"  # a topic level is an NCName in the Concrete dialect
    log_in(zeep_client, token=("bob", "b0b!"))
    pull_point = create_pull_point(zeep_client, broker)

    # bob may read cmd/bob/# only, not cmd/#.
    with pytest.raises(Fault) as denied:
        subscribe(zeep_client, broker, pull_point, "tns1:cmd//.")
    assert_wsn_fault(denied.value, "SubscribeCreationFailedFault")
    subscribe(zeep_client, broker, pull_point, "tns1:sensors//.")

    # bob may write sensors/bob/# only.
    with pytest.raises(Fault) as refused:
        notify(zeep_client, broker, f"sensors/{run}", "denied")
    assert_wsse(refused.value, "FailedAuthentication")
    assert "not authorized to publish" in refused.value.message
    notify(zeep_client, broker, f"sensors/bob/{run}", "mine")

    # alice publishes where bob's deny rule is, and where it is not.
    log_in(zeep_client, basic=("alice", "wonder land"))
    notify(zeep_client, broker, f"sensors/secret/{run}", "secret")
    notify(zeep_client, broker, f"sensors/{run}", "open")
    # Nor may alice pull from bob's pull point: to her it does not exist.
    with pytest.raises(Fault) as unknown:
        service(zeep_client, "PullPointBinding", pull_point).GetMessages(MaximumNumber=10)
    assert_wsn_fault(unknown.value, "ResourceUnknownFault")

    log_in(zeep_client, token=("bob", "b0b!"))
    pull = service(zeep_client, "PullPointBinding", pull_point)
    got = pull.GetMessages(MaximumNumber=10).NotificationMessage
    assert [m.Message._value_1.text for m in got] == ["mine", "open"]
    pull.DestroyPullPoint()
