"""Regenerates the zeep golden requests in this directory.

These are the exact bytes zeep 4.3.3 (the version pinned in interop/requirements.txt) writes
for each WS-BaseNotification operation, with its WS-Addressing plugin, using the WS-N
bindings of the ONVIF events.wsdl shipped in onvif-zeep-async 4.3.0 (SOAP 1.2), and a copy of
that WSDL with the binding namespace switched to SOAP 1.1. Nothing is sent anywhere:
`create_message` only serialises.

    python3 -m venv /tmp/z && /tmp/z/bin/pip install zeep==4.3.3
    /tmp/z/bin/pip install --no-deps onvif-zeep-async==4.3.0
    W=$(/tmp/z/bin/python -c 'import onvif,os;print(os.path.dirname(onvif.__file__))')/wsdl
    cp -r $W wsdl12 && cp -r $W wsdl11
    sed -i 's#xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap12/"#xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"#' wsdl11/events.wsdl
    /tmp/z/bin/python generate.py .

Message IDs are random, so regenerated files differ in wsa:MessageID only.
"""
import sys, os
from lxml import etree
from zeep import Client, Settings, xsd
from zeep.wsa import WsAddressingPlugin
from zeep.transports import Transport

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for ver in ("11", "12"):
    client = Client(f"wsdl{ver}/events.wsdl", plugins=[WsAddressingPlugin()], settings=Settings(strict=False))
    def svc(binding, addr):
        return client.create_service("{http://www.onvif.org/ver10/events/wsdl}" + binding, addr)
    producer = svc("NotificationProducerBinding", "http://192.168.1.10:8080/wsn")
    manager = svc("PausableSubscriptionManagerBinding", "http://192.168.1.10:8080/wsn/subscriptions/5f0c")
    pull = svc("PullPointBinding", "http://192.168.1.10:8080/wsn/pullpoints/p1")
    create = svc("CreatePullPointBinding", "http://192.168.1.10:8080/wsn")
    consumer = svc("NotificationConsumerBinding", "http://192.168.1.10:8080/wsn")
    msgs = {}
    te = client.get_element("{http://docs.oasis-open.org/wsn/b-2}TopicExpression")
    addr_type = client.get_type("{http://www.w3.org/2005/08/addressing}EndpointReferenceType")
    msgs["subscribe"] = client.create_message(producer, "Subscribe",
        ConsumerReference={"Address": "http://192.168.1.20:9000/consumer"},
        Filter={"_value_1": [xsd.AnyObject(te, te(_value_1="tns1:RuleEngine//.", Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full"))]},
        InitialTerminationTime="PT1H")
    msgs["get_current_message"] = client.create_message(producer, "GetCurrentMessage",
        Topic={"_value_1": "tns1:Device/Trigger", "Dialect": "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete"})
    msgs["renew"] = client.create_message(manager, "Renew", TerminationTime="PT10M")
    msgs["unsubscribe"] = client.create_message(manager, "Unsubscribe")
    msgs["pause"] = client.create_message(manager, "PauseSubscription")
    msgs["resume"] = client.create_message(manager, "ResumeSubscription")
    msgs["create_pull_point"] = client.create_message(create, "CreatePullPoint")
    msgs["get_messages"] = client.create_message(pull, "GetMessages", MaximumNumber=10)
    msgs["destroy_pull_point"] = client.create_message(pull, "DestroyPullPoint")
    payload = etree.fromstring('<m:reading xmlns:m="urn:example:meter"><m:kwh>12.5</m:kwh></m:reading>')
    msgs["notify"] = client.create_message(consumer, "Notify", NotificationMessage=[{
        "Topic": {"_value_1": "tns1:meter/kwh", "Dialect": "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete"},
        "Message": {"_value_1": payload},
    }])
    for name, node in msgs.items():
        with open(f"{out}/zeep-soap{ver}-{name}.xml", "wb") as f:
            f.write(etree.tostring(node, xml_declaration=True, encoding="utf-8"))
print("ok")
