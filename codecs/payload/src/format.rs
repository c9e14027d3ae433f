//! The formats, and how content types name them.

/// A payload encoding the broker converts between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JSON (RFC 8259).
    Json,
    /// CBOR (RFC 8949).
    Cbor,
    /// XML; JSON travels as the W3C XPath 3.1 `json-to-xml` representation.
    Xml,
    /// SenML in JSON (RFC 8428).
    SenmlJson,
    /// SenML in CBOR (RFC 8428).
    SenmlCbor,
    /// Protobuf, read and written by a [`crate::Schema`].
    Protobuf,
}

impl Format {
    /// Every format, so that tables and metrics can list them without missing one.
    pub const ALL: [Format; 6] =
        [Format::Json, Format::Cbor, Format::Xml, Format::SenmlJson, Format::SenmlCbor, Format::Protobuf];

    /// The format a MIME content type names, parameters and case ignored; `None` for the
    /// content types the broker does not convert. Structured-syntax suffixes count
    /// (`application/ld+json` is JSON), so that publishers need not use the bare types.
    pub fn from_content_type(content_type: &str) -> Option<Format> {
        let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/json" | "text/json" => Some(Format::Json),
            "application/cbor" => Some(Format::Cbor),
            "application/xml" | "text/xml" => Some(Format::Xml),
            "application/senml+json" => Some(Format::SenmlJson),
            "application/senml+cbor" => Some(Format::SenmlCbor),
            "application/x-protobuf" | "application/protobuf" | "application/vnd.google.protobuf" => {
                Some(Format::Protobuf)
            }
            other if other.ends_with("+json") => Some(Format::Json),
            other if other.ends_with("+cbor") => Some(Format::Cbor),
            other if other.ends_with("+xml") => Some(Format::Xml),
            _ => None,
        }
    }

    /// The content type a converted payload is labelled with, so that a subscriber (and an
    /// MQTT 5 client's content type property) can tell what it received.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Cbor => "application/cbor",
            Format::Xml => "application/xml",
            Format::SenmlJson => "application/senml+json",
            Format::SenmlCbor => "application/senml+cbor",
            Format::Protobuf => "application/x-protobuf",
        }
    }

    /// A short lowercase name for metrics labels and error messages: stable, unlike the
    /// content types, which have aliases.
    pub fn label(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Cbor => "cbor",
            Format::Xml => "xml",
            Format::SenmlJson => "senml_json",
            Format::SenmlCbor => "senml_cbor",
            Format::Protobuf => "protobuf",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_name_formats_whatever_their_case_and_parameters() {
        assert_eq!(Format::from_content_type("Application/JSON; charset=utf-8"), Some(Format::Json));
        assert_eq!(Format::from_content_type("application/ld+json"), Some(Format::Json));
        assert_eq!(Format::from_content_type("application/senml+json"), Some(Format::SenmlJson));
        assert_eq!(Format::from_content_type("application/senml+cbor"), Some(Format::SenmlCbor));
        assert_eq!(Format::from_content_type("image/svg+xml"), Some(Format::Xml));
        assert_eq!(Format::from_content_type("application/vnd.google.protobuf"), Some(Format::Protobuf));
        assert_eq!(Format::from_content_type(" TEXT/XML ;charset=utf-8"), Some(Format::Xml));
        assert_eq!(Format::from_content_type("application/foo+cbor"), Some(Format::Cbor));
        assert_eq!(Format::from_content_type("application/SenML+CBOR; x=y"), Some(Format::SenmlCbor));
        assert_eq!(Format::from_content_type("application/protobuf"), Some(Format::Protobuf));
        assert_eq!(Format::from_content_type("text/plain"), None);
        assert_eq!(Format::from_content_type("application/jsonx"), None);
        assert_eq!(Format::from_content_type(""), None);
        let labels: Vec<_> = Format::ALL.iter().map(|f| f.label()).collect();
        assert_eq!(labels, ["json", "cbor", "xml", "senml_json", "senml_cbor", "protobuf"]);
        for format in Format::ALL {
            assert_eq!(Format::from_content_type(format.content_type()), Some(format));
        }
    }
}
