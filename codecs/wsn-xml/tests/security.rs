//! The WS-Security header in the shapes clients send it: zeep's `UsernameToken` (no
//! mustUnderstand, `#PasswordText`), Apache CXF / WSS4J's (mustUnderstand, a Nonce and Created
//! beside the password, a wsu:Timestamp), PasswordDigest, and the headers tolk must refuse
//! (OASIS WSS 1.0 SOAP Message Security §5 and §12, UsernameToken Profile 1.0 §3).

use wsn_xml::ns::WSSE_USERNAME_TOKEN_PROFILE;
use wsn_xml::{Limits, PasswordType, Request, SecurityFault, SecurityHeader, parse_request};

const S11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const S12: &str = "http://www.w3.org/2003/05/soap-envelope";
const WSSE_DECL: &str =
    r#"xmlns:wsse="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd""#;
const WSU_DECL: &str =
    r#"xmlns:wsu="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd""#;

fn envelope(soap: &str, headers: &str) -> String {
    format!(
        r#"<env:Envelope xmlns:env="{soap}"><env:Header>{headers}</env:Header><env:Body><wsnt:CreatePullPoint xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"/></env:Body></env:Envelope>"#
    )
}

fn security_of(xml: &str) -> SecurityHeader {
    let env = parse_request(xml.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(env.request, Request::CreatePullPoint);
    assert!(env.not_understood.is_empty(), "{:?}", env.not_understood);
    env.security
}

fn token_of(xml: &str) -> (String, Option<String>, PasswordType) {
    match security_of(xml) {
        SecurityHeader::UsernameToken(t) => (t.username, t.password, t.password_type),
        other => panic!("no token: {other:?}"),
    }
}

fn refused(xml: &str) -> SecurityFault {
    match security_of(xml) {
        SecurityHeader::Refused { fault, .. } => fault,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn zeep_password_text() {
    // zeep.wsse.username.UsernameToken: wsse declared on each element, no mustUnderstand.
    let header = format!(
        r#"<wsse:Security {WSSE_DECL}><wsse:UsernameToken><wsse:Username>alice</wsse:Username><wsse:Password Type="{WSSE_USERNAME_TOKEN_PROFILE}#PasswordText">wonder land</wsse:Password></wsse:UsernameToken></wsse:Security>"#
    );
    let token = token_of(&envelope(S11, &header));
    assert_eq!(token, ("alice".into(), Some("wonder land".into()), PasswordType::Text), "spaces kept");
}

#[test]
fn cxf_wss4j_with_must_understand_nonce_created_and_timestamp() {
    let header = format!(
        r#"<wsse:Security {WSSE_DECL} {WSU_DECL} env:mustUnderstand="true"><wsu:Timestamp wsu:Id="TS-1"><wsu:Created>2024-06-01T12:00:00Z</wsu:Created><wsu:Expires>2024-06-01T12:05:00Z</wsu:Expires></wsu:Timestamp><wsse:UsernameToken wsu:Id="UsernameToken-2"><wsse:Username>
  bob
</wsse:Username><wsse:Password Type="{WSSE_USERNAME_TOKEN_PROFILE}#PasswordText">b0b!&amp;&lt;</wsse:Password><wsse:Nonce EncodingType="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary">WScqanjCEAC4mQoBE07sAQ==</wsse:Nonce><wsu:Created>2024-06-01T12:00:00Z</wsu:Created></wsse:UsernameToken></wsse:Security>"#
    );
    let token = token_of(&envelope(S12, &header));
    assert_eq!(token, ("bob".into(), Some("b0b!&<".into()), PasswordType::Text), "understood, entities resolved");
}

#[test]
fn password_types() {
    let with_type = |attr: &str| {
        envelope(
            S11,
            &format!(
                r#"<wsse:Security {WSSE_DECL}><wsse:UsernameToken><wsse:Username>carol</wsse:Username><wsse:Password{attr}>x</wsse:Password></wsse:UsernameToken></wsse:Security>"#
            ),
        )
    };
    assert_eq!(token_of(&with_type("")).2, PasswordType::Text, "the profile's default");
    assert_eq!(
        token_of(&with_type(&format!(r#" Type="{WSSE_USERNAME_TOKEN_PROFILE}#PasswordDigest""#))).2,
        PasswordType::Digest
    );
    assert_eq!(token_of(&with_type(r#" Type="wsse:PasswordText""#)).2, PasswordType::Text);
    assert_eq!(token_of(&with_type(r#" Type="urn:other""#)).2, PasswordType::Other("urn:other".into()));
    let no_password = envelope(
        S11,
        &format!(
            r#"<wsse:Security {WSSE_DECL}><wsse:UsernameToken><wsse:Username>carol</wsse:Username></wsse:UsernameToken></wsse:Security>"#
        ),
    );
    assert_eq!(token_of(&no_password), ("carol".into(), None, PasswordType::Text));
}

#[test]
fn headers_for_other_nodes_and_without_a_token_present_nothing() {
    let other_actor = format!(
        r#"<wsse:Security {WSSE_DECL} env:mustUnderstand="1" env:actor="urn:gateway"><wsse:UsernameToken><wsse:Username>alice</wsse:Username></wsse:UsernameToken></wsse:Security>"#
    );
    assert_eq!(security_of(&envelope(S11, &other_actor)), SecurityHeader::Absent);
    let other_role = other_actor.replace("env:actor", "env:role");
    assert_eq!(security_of(&envelope(S12, &other_role)), SecurityHeader::Absent);
    let timestamp_only = format!(
        r#"<wsse:Security {WSSE_DECL} {WSU_DECL}><wsu:Timestamp><wsu:Created>2024-06-01T12:00:00Z</wsu:Created></wsu:Timestamp></wsse:Security>"#
    );
    assert_eq!(security_of(&envelope(S11, &timestamp_only)), SecurityHeader::Absent);
    assert_eq!(security_of(&envelope(S11, "")), SecurityHeader::Absent);
}

#[test]
fn headers_tolk_cannot_process_are_refused_with_their_wss_fault() {
    let token = |name: &str| format!("<wsse:UsernameToken><wsse:Username>{name}</wsse:Username></wsse:UsernameToken>");
    let security = |content: &str| format!("<wsse:Security {WSSE_DECL}>{content}</wsse:Security>");
    let twice = format!("{}{}", security(&token("alice")), security(&token("bob")));
    assert_eq!(refused(&envelope(S11, &twice)), SecurityFault::InvalidSecurity, "two headers for this node");
    let two_tokens = security(&format!("{}{}", token("alice"), token("bob")));
    assert_eq!(refused(&envelope(S11, &two_tokens)), SecurityFault::InvalidSecurity);
    let nameless = security("<wsse:UsernameToken><wsse:Password>x</wsse:Password></wsse:UsernameToken>");
    assert_eq!(refused(&envelope(S11, &nameless)), SecurityFault::InvalidSecurityToken);
    assert_eq!(refused(&envelope(S11, &security(&token(" ")))), SecurityFault::InvalidSecurityToken);
    let two_names = security(
        "<wsse:UsernameToken><wsse:Username>a</wsse:Username><wsse:Username>b</wsse:Username></wsse:UsernameToken>",
    );
    assert_eq!(refused(&envelope(S11, &two_names)), SecurityFault::InvalidSecurityToken);
    let signed =
        security(&format!(r#"{}<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"/>"#, token("alice")));
    assert_eq!(refused(&envelope(S12, &signed)), SecurityFault::UnsupportedSecurityToken, "never ignored silently");
}
