//! Users and the access-control list over WS-N, with the broker's real authenticator
//! (`tolk_auth::Users`: the `mosquitto_passwd` fixture of crates/auth, alice / "wonder land" and
//! bob / "b0b!" in PBKDF2-SHA512, carol / "c@rol" in the older SHA-512) and an ACL file:
//! HTTP Basic and WS-Security UsernameTokens logging in or refused (`wsse:FailedAuthentication`,
//! 401 with a challenge for Basic, 500 for a token), PasswordDigest refused, anonymous clients
//! refused, and the ACL on Notify, Subscribe, per-message delivery and subscription ownership.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use tolk_auth::{AuthConfig, Users};
use tolk_core::{CloseReason, Denial, Protocol, SubscriptionOptions};

const WSSE: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
const PROFILE: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0";

/// `Authorization` values: alice / "wonder land", bob / "b0b!", and alice with a wrong password.
const ALICE: &str = "Basic YWxpY2U6d29uZGVyIGxhbmQ=";
const BOB: &str = "Basic Ym9iOmIwYiE=";
const ALICE_WRONG: &str = "Basic YWxpY2U6d29uZGVybGFuZA==";

/// alice reads and writes `sensors/#` but not `sensors/secret/#`; bob reads `sensors/#` and
/// writes `bob/#`; anonymous clients (when allowed) read `public/#`.
const ACL: &str = "topic read public/#\n\
                   user alice\ntopic readwrite sensors/#\ntopic deny sensors/secret/#\n\
                   user bob\ntopic read sensors/#\ntopic write bob/#\n";

fn users(name: &str, allow_anonymous: bool) -> Arc<Users> {
    let passwd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../auth/tests/fixtures/passwd");
    let acl = std::env::temp_dir().join(format!("tolk-wsn-acl-{}-{name}", std::process::id()));
    std::fs::write(&acl, ACL).unwrap();
    let config =
        AuthConfig { password_file: Some(passwd), allow_anonymous: Some(allow_anonymous), acl_file: Some(acl) };
    Arc::new(Users::load(config).unwrap())
}

async fn start(name: &str, allow_anonymous: bool) -> Broker {
    Broker::start_with_auth(test_config(), users(name, allow_anonymous)).await
}

/// A `wsse:Security` header with a UsernameToken, as WSS4J sends it (mustUnderstand).
fn token(user: &str, password: &str, password_type: &str) -> String {
    format!(
        r##"<wsse:Security xmlns:wsse="{WSSE}" s:mustUnderstand="1"><wsse:UsernameToken><wsse:Username>{user}</wsse:Username><wsse:Password Type="{PROFILE}#{password_type}">{password}</wsse:Password></wsse:UsernameToken></wsse:Security>"##
    )
}

fn create_pull_point(soap: &str, headers: &str) -> String {
    envelope(soap, headers, "<wsnt:CreatePullPoint/>")
}

/// Asserts a WS-Security fault with code `wsse:{code}`: SOAP 1.1's faultcode, or SOAP 1.2's
/// Subcode under Sender.
fn assert_security_fault(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert!(reply.body.contains(":Fault>"), "not a fault: {}", reply.body);
    assert!(reply.body.contains(WSSE) && reply.body.contains(&format!(">wsse:{code}<")), "not {code}: {}", reply.body);
    if reply.content_type.starts_with("application/soap+xml") {
        assert!(reply.body.contains(">soap:Sender<"), "{}", reply.body);
    }
}

fn challenge(reply: &Reply) -> Option<&str> {
    reply.headers.get("www-authenticate").map(|v| v.to_str().unwrap())
}

async fn post_as(broker: &Broker, who: &str, address: &str, body: String) -> Reply {
    broker.post_with(address, CT11, &[("authorization", who)], body).await
}

async fn pull_point_as(broker: &Broker, who: &str) -> String {
    let reply = post_as(broker, who, &broker.url("/wsn"), create_pull_point(SOAP11, "")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.text_of("wsa:Address").to_owned()
}

async fn subscribe_as(broker: &Broker, who: &str, consumer: &str, filter: &str) -> Reply {
    post_as(broker, who, &broker.url("/wsn"), subscribe_doc(SOAP11, consumer, filter, "")).await
}

fn auth_failures(broker: &Broker) -> u64 {
    broker.metrics().protocol(Protocol::Wsn).closed_count(CloseReason::AuthFailed)
}

fn denied(broker: &Broker, what: Denial) -> u64 {
    broker.metrics().protocol(Protocol::Wsn).denied_count(what)
}

#[tokio::test]
async fn http_basic_logs_in_and_a_wrong_password_is_401_with_a_challenge() {
    let broker = start("basic", false).await;
    let url = broker.url("/wsn");
    let ok = post_as(&broker, ALICE, &url, create_pull_point(SOAP11, "")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let carol =
        broker.post_with(&url, CT12, &[("authorization", "Basic Y2Fyb2w6Y0Byb2w=")], create_pull_point(SOAP12, ""));
    assert_eq!(carol.await.status, 200, "carol's older $6$ hash");

    let wrong = post_as(&broker, ALICE_WRONG, &url, create_pull_point(SOAP11, "")).await;
    assert_security_fault(&wrong, 401, "FailedAuthentication");
    assert_eq!(challenge(&wrong), Some(r#"Basic realm="tolk""#));
    assert!(!wrong.body.contains("wonderland"), "the password is never echoed");
    let wrong12 = broker.post_with(&url, CT12, &[("authorization", ALICE_WRONG)], create_pull_point(SOAP12, "")).await;
    assert_security_fault(&wrong12, 401, "FailedAuthentication");
    assert!(wrong12.content_type.starts_with("application/soap+xml"), "answered in SOAP 1.2");
    let bearer = broker.post_with(&url, CT11, &[("authorization", "Bearer abc")], create_pull_point(SOAP11, "")).await;
    assert_security_fault(&bearer, 401, "FailedAuthentication");
    assert_eq!(auth_failures(&broker), 3);
    broker.stop().await;
}

#[tokio::test]
async fn a_username_token_logs_in_and_a_wrong_password_is_a_500_fault() {
    let broker = start("token", false).await;
    let ok = broker.post("/wsn", CT12, create_pull_point(SOAP12, &token("bob", "b0b!", "PasswordText"))).await;
    assert_eq!(ok.status, 200, "{}", ok.body);

    let wrong = broker.post("/wsn", CT12, create_pull_point(SOAP12, &token("bob", "bob-guess", "PasswordText"))).await;
    assert_security_fault(&wrong, 500, "FailedAuthentication");
    assert_eq!(challenge(&wrong), None, "the client logs in in SOAP, not HTTP");
    assert!(!wrong.body.contains("bob-guess"), "the password is never echoed");
    let unknown = broker.post("/wsn", CT11, create_pull_point(SOAP11, &token("mallory", "x", "PasswordText"))).await;
    assert_security_fault(&unknown, 500, "FailedAuthentication");
    assert!(unknown.body.contains("<faultcode"), "SOAP 1.1: the WS-Security code is the faultcode");
    assert_eq!(auth_failures(&broker), 2);
    broker.stop().await;
}

#[tokio::test]
async fn a_password_digest_is_refused_as_unsupported() {
    let broker = start("digest", true).await;
    let digest = token("alice", "weYI3nXd8LjMNVksCKFV8t3rgHh3Rw==", "PasswordDigest");
    let reply = broker.post("/wsn", CT11, create_pull_point(SOAP11, &digest)).await;
    assert_security_fault(&reply, 500, "UnsupportedSecurityToken");
    assert!(reply.body.contains("PasswordText"), "says what works: {}", reply.body);
    assert_eq!(auth_failures(&broker), 1);
    broker.stop().await;
}

#[tokio::test]
async fn anonymous_requests_follow_allow_anonymous() {
    let closed = start("anonymous-closed", false).await;
    let refused = closed.post("/wsn", CT11, create_pull_point(SOAP11, "")).await;
    assert_security_fault(&refused, 401, "FailedAuthentication");
    assert_eq!(challenge(&refused), Some(r#"Basic realm="tolk""#));
    assert!(refused.body.contains("anonymous"), "{}", refused.body);
    closed.stop().await;

    let open = start("anonymous-open", true).await;
    assert_eq!(open.post("/wsn", CT11, create_pull_point(SOAP11, "")).await.status, 200);
    // ...within the anonymous section's rules: `public/#` only.
    let denied = open.post("/wsn", CT11, subscribe_doc(SOAP11, "http://127.0.0.1:9/c", "", "")).await;
    denied.assert_fault(500, "SubscribeCreationFailedFault");
    open.stop().await;
}

#[tokio::test]
async fn a_notify_to_a_denied_topic_is_faulted_and_nothing_of_it_is_routed() {
    let broker = start("notify", false).await;
    let mqtt = broker.mqtt_session();
    mqtt.subscribe("#", 1, SubscriptionOptions::default()).unwrap();
    let url = broker.url("/wsn");

    // alice may write sensors/#, not bob/#: the whole Notify is refused.
    let mixed = notify_doc(SOAP11, &[("tns:sensors/a", "<m>1</m>"), ("tns:bob/x", "<m>2</m>")]);
    let refused = post_as(&broker, ALICE, &url, mixed).await;
    assert_security_fault(&refused, 500, "FailedAuthentication");
    assert!(refused.body.contains("bob/x"), "{}", refused.body);
    assert_eq!(challenge(&refused), None, "logged in; only not allowed");
    assert_eq!(denied(&broker, Denial::Publish), 1);
    assert_eq!(auth_failures(&broker), 0, "an ACL refusal is not a failed login");

    let allowed = post_as(&broker, ALICE, &url, notify_doc(SOAP11, &[("tns:sensors/b", "<m>3</m>")])).await;
    assert_eq!(allowed.status, 202, "{}", allowed.body);
    // Routing is synchronous, so everything routed is queued by now: only sensors/b.
    let mut got = Vec::new();
    let _ = mqtt.receiver().try_drain(&mut got, 10);
    let topics: Vec<&str> = got.iter().map(|d| &*d.message.topic).collect();
    assert_eq!(topics, ["sensors/b"]);
    broker.stop().await;
}

#[tokio::test]
async fn a_subscribe_to_a_denied_filter_is_faulted() {
    let broker = start("subscribe", false).await;
    let pull_point = pull_point_as(&broker, BOB).await;
    // No Filter is `#`, more than bob may read.
    subscribe_as(&broker, BOB, &pull_point, "").await.assert_fault(500, "SubscribeCreationFailedFault");
    let secret = subscribe_as(&broker, BOB, &pull_point, &topic_filter(FULL, "tns:bob//.")).await;
    secret.assert_fault(500, "SubscribeCreationFailedFault");
    assert_eq!(denied(&broker, Denial::Subscribe), 2);
    let ok = subscribe_as(&broker, BOB, &pull_point, &topic_filter(FULL, "tns:sensors//.")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    broker.stop().await;
}

#[tokio::test]
async fn a_deny_rule_inside_a_granted_filter_withholds_those_messages() {
    let broker = start("withheld", false).await;
    let pull_point = pull_point_as(&broker, ALICE).await;
    let subscribed = subscribe_as(&broker, ALICE, &pull_point, &topic_filter(FULL, "tns:sensors//.")).await;
    assert_eq!(subscribed.status, 200, "{}", subscribed.body);
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "sensors/secret/key", b"hidden");
    broker.publish_mqtt(&mqtt, "sensors/temp", b"21.5");

    let pulled = post_as(&broker, ALICE, &pull_point, envelope(SOAP11, "", "<wsnt:GetMessages/>")).await;
    assert_eq!(pulled.status, 200, "{}", pulled.body);
    assert_eq!(pulled.body.matches("<wsnt:NotificationMessage>").count(), 1, "{}", pulled.body);
    assert!(pulled.body.contains("21.5") && !pulled.body.contains("hidden"), "{}", pulled.body);
    assert_eq!(denied(&broker, Denial::Read), 1);

    // GetCurrentMessage: a retained message on a denied topic is not there for alice.
    let origin = tolk_core::Origin { protocol: Protocol::Mqtt, session: mqtt.id(), client_id: "m".into() };
    let mut retained = tolk_core::Message::new("sensors/secret/key", &b"hidden"[..], origin);
    retained.retain = true;
    mqtt.publish(Arc::new(retained));
    let withheld = denied(&broker, Denial::Read);
    let current = |topic: &str| get_current_message_doc(SOAP11, CONCRETE, &format!("tns:{topic}"));
    let hidden = post_as(&broker, ALICE, &broker.url("/wsn"), current("sensors/secret/key")).await;
    hidden.assert_fault(500, "NoCurrentMessageOnTopicFault");
    assert!(!hidden.body.contains("hidden"));
    assert_eq!(denied(&broker, Denial::Read), withheld + 1);
    broker.stop().await;
}

#[tokio::test]
async fn only_the_subscriber_manages_its_subscription_and_pull_point() {
    let broker = start("owner", false).await;
    let pull_point = pull_point_as(&broker, ALICE).await;
    let subscribed = subscribe_as(&broker, ALICE, &pull_point, &topic_filter(FULL, "tns:sensors//.")).await;
    assert_eq!(subscribed.status, 200, "{}", subscribed.body);
    let subscription = subscribed.text_of("wsa:Address").to_owned();

    // bob, logged in, is told neither exists.
    post_as(&broker, BOB, &subscription, simple_doc("Unsubscribe")).await.assert_fault(500, "ResourceUnknownFault");
    post_as(&broker, BOB, &subscription, simple_doc("PauseSubscription"))
        .await
        .assert_fault(500, "ResourceUnknownFault");
    post_as(&broker, BOB, &pull_point, simple_doc("GetMessages")).await.assert_fault(500, "ResourceUnknownFault");
    post_as(&broker, BOB, &pull_point, simple_doc("DestroyPullPoint")).await.assert_fault(500, "ResourceUnknownFault");
    // Nor may he feed alice's pull point from his own subscription.
    let into = subscribe_as(&broker, BOB, &pull_point, &topic_filter(FULL, "tns:sensors//.")).await;
    into.assert_fault(500, "SubscribeCreationFailedFault");

    // alice's subscription still delivers, and she may end it.
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "sensors/temp", b"21.5");
    let pulled = post_as(&broker, ALICE, &pull_point, simple_doc("GetMessages")).await;
    assert_eq!(pulled.body.matches("<wsnt:NotificationMessage>").count(), 1, "{}", pulled.body);
    assert_eq!(post_as(&broker, ALICE, &subscription, simple_doc("Unsubscribe")).await.status, 200);
    assert_eq!(post_as(&broker, ALICE, &pull_point, simple_doc("DestroyPullPoint")).await.status, 200);
    broker.stop().await;
}
