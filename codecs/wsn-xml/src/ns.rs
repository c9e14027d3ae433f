//! Namespace URIs of every vocabulary this crate reads or writes, and the expanded-name type
//! used wherever a document names an element by namespace + local name.
//!
//! Dispatch in this crate always compares expanded names (namespace URI + local name), never
//! prefixes: a client may bind any prefix, on any ancestor, or use a default namespace.

/// SOAP 1.1 envelope namespace (SOAP 1.1 §4.1.2, W3C Note 08 May 2000).
pub const SOAP11_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
/// SOAP 1.2 envelope namespace (SOAP 1.2 Part 1 §5.1).
pub const SOAP12_ENV: &str = "http://www.w3.org/2003/05/soap-envelope";
/// WS-Addressing 1.0 (W3C Recommendation 2006), the version WS-Notification 1.3 is built on.
pub const WSA: &str = "http://www.w3.org/2005/08/addressing";
/// WS-Addressing member submission (2004/08). Still sent by older stacks; accepted on input
/// and answered in kind.
pub const WSA_2004: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing";
/// WS-BaseNotification 1.3 schema namespace (`wsnt`).
pub const WSNT: &str = "http://docs.oasis-open.org/wsn/b-2";
/// WS-BaseNotification 1.3 WSDL namespace (`wsntw`); default WS-Addressing actions live under it.
pub const WSNT_WSDL: &str = "http://docs.oasis-open.org/wsn/bw-2";
/// WS-BrokeredNotification 1.3 schema namespace (`wsn-br`).
pub const WSN_BR: &str = "http://docs.oasis-open.org/wsn/br-2";
/// WS-BrokeredNotification 1.3 WSDL namespace (`wsn-brw`).
pub const WSN_BR_WSDL: &str = "http://docs.oasis-open.org/wsn/brw-2";
/// WS-Topics 1.3 namespace (`wstop`); the dialect URIs are built on it.
pub const WSTOP: &str = "http://docs.oasis-open.org/wsn/t-1";
/// WS-ResourceFramework BaseFaults 1.2 (`wsrf-bf`): every WS-N fault detail extends its
/// `BaseFaultType`.
pub const WSRF_BF: &str = "http://docs.oasis-open.org/wsrf/bf-2";
/// WS-Resource 1.2 (`wsrf-r`): home of `ResourceUnknownFault`, which WS-N operations declare.
pub const WSRF_R: &str = "http://docs.oasis-open.org/wsrf/r-2";
/// WS-Security 1.0 SOAP Message Security "secext" (`wsse`): the `Security` header, the
/// `UsernameToken`, and the fault codes of WSS 1.0 §12.
pub const WSSE: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
/// WS-Security 1.0 utility (`wsu`): `Timestamp`, `Created`.
pub const WSU: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd";
/// WSS UsernameToken Profile 1.0; the password `Type` URIs are built on it (`#PasswordText`,
/// `#PasswordDigest`).
pub const WSSE_USERNAME_TOKEN_PROFILE: &str =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0";
/// XML Schema instance namespace, for `xsi:nil` on nillable WS-N elements.
pub const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";
/// The `xml:` prefix namespace (Namespaces in XML 1.0 §3), always bound.
pub const XML: &str = "http://www.w3.org/XML/1998/namespace";
/// tolk's own namespace: the payload wrapper element (see [`crate::XmlElement`]) and the
/// `Path` header of bridged notifications.
pub const TOLK: &str = "urn:tolk:wsn:1";

/// An expanded name: the pair that identifies an element or attribute independently of the
/// prefix a document happened to use (Namespaces in XML 1.0 §1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QName {
    /// Namespace URI; `None` for a name in no namespace.
    pub namespace: Option<String>,
    /// The local part of the name.
    pub local_name: String,
}

impl QName {
    /// Builds a namespaced name, the common case for every WS-N element.
    pub fn new(namespace: &str, local_name: &str) -> Self {
        QName { namespace: Some(namespace.to_owned()), local_name: local_name.to_owned() }
    }

    /// True when this is `{namespace}local_name`; used to match without allocating.
    pub fn is(&self, namespace: &str, local_name: &str) -> bool {
        self.namespace.as_deref() == Some(namespace) && self.local_name == local_name
    }
}

impl std::fmt::Display for QName {
    /// Clark notation `{ns}local`, the prefix-free way to show an expanded name in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{{{ns}}}{}", self.local_name),
            None => f.write_str(&self.local_name),
        }
    }
}
