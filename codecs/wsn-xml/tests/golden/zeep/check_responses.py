"""Reads tolk's responses, faults and outgoing Notify with zeep 4.3.3, as a zeep client would.

Set up the venv and wsdl11/wsdl12 as described in generate.py, then:

    cargo run -p wsn-xml --example sample_documents -- /tmp/wsn-samples
    /tmp/z/bin/python check_responses.py /tmp/wsn-samples

Every response must deserialise, every fault must raise zeep.exceptions.Fault with its code,
subcode and detail, and the Notify must deserialise as NotificationConsumer input.
"""
import sys
from lxml import etree
from zeep import Client, Settings
from zeep.exceptions import Fault

samples = sys.argv[1]
ops = {
    "subscribe": ("NotificationProducerBinding", "Subscribe"),
    "renew": ("PausableSubscriptionManagerBinding", "Renew"),
    "renew_nil": ("PausableSubscriptionManagerBinding", "Renew"),
    "unsubscribe": ("PausableSubscriptionManagerBinding", "Unsubscribe"),
    "pause": ("PausableSubscriptionManagerBinding", "PauseSubscription"),
    "resume": ("PausableSubscriptionManagerBinding", "ResumeSubscription"),
    "get_current_message": ("NotificationProducerBinding", "GetCurrentMessage"),
    "create_pull_point": ("CreatePullPointBinding", "CreatePullPoint"),
    "get_messages": ("PullPointBinding", "GetMessages"),
    "destroy_pull_point": ("PullPointBinding", "DestroyPullPoint"),
}
for ver in ("11", "12"):
    client = Client(f"wsdl{ver}/events.wsdl", settings=Settings(strict=False))
    def binding(name):
        return client.wsdl.bindings["{http://www.onvif.org/ver10/events/wsdl}" + name]
    for name, (b, op) in ops.items():
        doc = etree.parse(f"{samples}/ours-{ver}-{name}.xml").getroot()
        operation = binding(b).get(op)
        result = operation.process_reply(doc)
        if name == "subscribe":
            assert result["SubscriptionReference"]["Address"]["_value_1"] == "http://gw:8080/wsn/subscriptions/abc"
            assert result["TerminationTime"].isoformat() == "2024-06-01T13:00:00+00:00"
        if name == "get_messages":
            assert len(result["NotificationMessage"]) == 2
        print(ver, name, "->", repr(result)[:300].replace("\n", " "))
    for name in ("fault_invalid_filter", "fault_itt", "fault_resource_unknown", "fault_sender"):
        doc = etree.parse(f"{samples}/ours-{ver}-{name}.xml").getroot()
        bnd = binding("NotificationProducerBinding")
        try:
            bnd.process_error(doc, bnd.get("Subscribe"))
        except Fault as f:
            detail = etree.tostring(f.detail[0]).decode()[:120] if f.detail is not None and len(f.detail) else None
            print(ver, name, "-> Fault", repr(f.message), f.code, f.subcodes, detail)
            assert f.message == "it went wrong"
        else:
            raise SystemExit(f"{ver} {name}: zeep raised no Fault")
    # Our outgoing Notify, read by zeep as the NotificationConsumer's input message.
    doc = etree.parse(f"{samples}/ours-{ver}-notify.xml").getroot()
    op = binding("NotificationConsumerBinding").get("Notify")
    notify = op.input.deserialize(doc)
    assert len(notify["NotificationMessage"]) == 2
    print(ver, "notify ->", repr(notify)[:400].replace("\n", " "))
print("all documents accepted by zeep")
