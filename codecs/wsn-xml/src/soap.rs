//! SOAP versions and WS-Addressing versions: namespaces, media types, and how to tell them
//! apart from an envelope or an HTTP `Content-Type`.

use crate::ns::{SOAP11_ENV, SOAP12_ENV, WSA, WSA_2004};

/// The SOAP version of a message. tolk answers in the version the client used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoapVersion {
    /// SOAP 1.1, `text/xml`.
    V11,
    /// SOAP 1.2, `application/soap+xml`.
    V12,
}

impl SoapVersion {
    /// Envelope namespace of this version.
    pub fn namespace(self) -> &'static str {
        match self {
            SoapVersion::V11 => SOAP11_ENV,
            SoapVersion::V12 => SOAP12_ENV,
        }
    }

    /// The version whose envelope namespace is `ns` (the authoritative signal, SOAP 1.2
    /// Part 1 §5.4.7 and Appendix A).
    pub fn from_namespace(ns: &str) -> Option<Self> {
        match ns {
            SOAP11_ENV => Some(SoapVersion::V11),
            SOAP12_ENV => Some(SoapVersion::V12),
            _ => None,
        }
    }

    /// Media type (SOAP 1.1 §6.1.1; RFC 3902 for SOAP 1.2).
    pub fn media_type(self) -> &'static str {
        match self {
            SoapVersion::V11 => "text/xml",
            SoapVersion::V12 => "application/soap+xml",
        }
    }

    /// `Content-Type` header value for a response body written by this crate (always UTF-8).
    pub fn content_type(self) -> &'static str {
        match self {
            SoapVersion::V11 => "text/xml; charset=utf-8",
            SoapVersion::V12 => "application/soap+xml; charset=utf-8",
        }
    }

    /// Guesses the version from an HTTP `Content-Type`, for answering a request whose
    /// envelope could not be read. Case-insensitive, parameters ignored.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        if media.eq_ignore_ascii_case("text/xml") {
            Some(SoapVersion::V11)
        } else if media.eq_ignore_ascii_case("application/soap+xml") {
            Some(SoapVersion::V12)
        } else {
            None
        }
    }
}

/// The `action` parameter of a SOAP 1.2 `Content-Type` (RFC 3902 §1), which plays the role of
/// SOAP 1.1's `SOAPAction` header. tolk dispatches on the body, so this is informational.
pub fn content_type_action(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim().eq_ignore_ascii_case("action").then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// WS-Addressing version of a message's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddressingVersion {
    /// WS-Addressing 1.0 (W3C), what WS-Notification 1.3 specifies.
    #[default]
    W3c,
    /// The 2004/08 member submission, still used by older stacks.
    Submission,
}

impl AddressingVersion {
    /// Header namespace of this version.
    pub fn namespace(self) -> &'static str {
        match self {
            AddressingVersion::W3c => WSA,
            AddressingVersion::Submission => WSA_2004,
        }
    }

    /// The version whose namespace is `ns`.
    pub fn from_namespace(ns: &str) -> Option<Self> {
        match ns {
            WSA => Some(AddressingVersion::W3c),
            WSA_2004 => Some(AddressingVersion::Submission),
            _ => None,
        }
    }

    /// The anonymous address ("reply on the back channel").
    pub fn anonymous(self) -> &'static str {
        match self {
            AddressingVersion::W3c => "http://www.w3.org/2005/08/addressing/anonymous",
            AddressingVersion::Submission => "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous",
        }
    }

    /// Action for a fault with no more specific WSDL action (WS-Addressing 1.0 SOAP Binding
    /// §6; the submission's equivalent).
    pub fn soap_fault_action(self) -> &'static str {
        match self {
            AddressingVersion::W3c => "http://www.w3.org/2005/08/addressing/soap/fault",
            AddressingVersion::Submission => "http://schemas.xmlsoap.org/ws/2004/08/addressing/fault",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(SoapVersion::from_content_type("text/xml; charset=utf-8"), Some(SoapVersion::V11));
        assert_eq!(
            SoapVersion::from_content_type("Application/SOAP+XML;charset=UTF-8;action=\"x\""),
            Some(SoapVersion::V12)
        );
        assert_eq!(SoapVersion::from_content_type("application/json"), None);
        assert_eq!(
            content_type_action(
                "application/soap+xml; charset=utf-8; action=\"http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeRequest\""
            ),
            Some("http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeRequest".to_owned())
        );
        assert_eq!(content_type_action("text/xml"), None);
    }
}
