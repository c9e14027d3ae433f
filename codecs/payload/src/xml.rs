//! XML to and from the JSON data model: the W3C XPath 3.1 `json-to-xml` representation both
//! ways, and any other XML one way by the convention in the crate documentation.
//!
//! The reader keeps its open elements on an explicit stack (no recursion on input depth),
//! refuses a DOCTYPE (so no entity is ever expanded) and knows only the five predefined
//! entities and character references.

use std::fmt::Write;

use quick_xml::NsReader;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::name::{Namespace, ResolveResult};
use serde_json::{Map, Number, Value};

use crate::{ConvertError, Format, Limits};

/// The namespace of the W3C representation.
pub(crate) const FN: &str = "http://www.w3.org/2005/xpath-functions";

const W3C_NAMES: [&str; 6] = ["map", "array", "string", "number", "boolean", "null"];

/// Writes a value as the W3C `json-to-xml` representation. The value's depth was checked, so
/// the recursion here is bounded.
pub(crate) fn write(value: &Value, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    let mut out = String::new();
    write_value(&mut out, value, None, true, limits.max_output_bytes)?;
    Ok(out.into_bytes())
}

/// Writes one element. `max` is checked before each element, so that the output stops within
/// one string's length of the bound.
fn write_value(out: &mut String, value: &Value, key: Option<&str>, root: bool, max: usize) -> Result<(), ConvertError> {
    if out.len() > max {
        return Err(ConvertError::TooLarge(max));
    }
    let name = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "map",
    };
    out.push('<');
    out.push_str(name);
    if root {
        let _ = write!(out, " xmlns=\"{FN}\"");
    }
    if let Some(key) = key {
        out.push_str(" key=\"");
        escape(out, key, true)?;
        out.push('"');
    }
    let empty = match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    };
    if empty {
        out.push_str("/>");
        return Ok(());
    }
    out.push('>');
    match value {
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => escape(out, s, false)?,
        Value::Array(items) => {
            for item in items {
                write_value(out, item, None, false, max)?;
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                write_value(out, v, Some(k), false, max)?;
            }
        }
        Value::Null => {}
    }
    let _ = write!(out, "</{name}>");
    Ok(())
}

/// Escapes text for element content or an attribute value, keeping carriage returns (and, in
/// attributes, tabs and newlines) as character references so that a parser gives them back.
fn escape(out: &mut String, text: &str, attribute: bool) -> Result<(), ConvertError> {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\r' => out.push_str("&#xD;"),
            '\t' | '\n' if attribute => {
                let _ = write!(out, "&#x{:X};", c as u32);
            }
            c if is_xml_char(c) => out.push(c),
            c => {
                return Err(ConvertError::encode(Format::Xml, format!("U+{:04X} cannot appear in XML 1.0", c as u32)));
            }
        }
    }
    Ok(())
}

/// XML 1.0 §2.2 `Char`.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// The W3C element kinds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Array,
    String,
    Number,
    Boolean,
    Null,
}

/// An element being read.
enum Frame {
    /// One of the W3C representation's elements.
    W3c { kind: Kind, key: Option<String>, map: Map<String, Value>, items: Vec<Value>, text: String },
    /// Any other element: its attributes and children so far, and its text.
    Other { name: String, fields: Map<String, Value>, text: String },
}

/// Reads an XML document into the JSON data model.
pub(crate) fn read(payload: &[u8], limits: &Limits) -> Result<Value, ConvertError> {
    let bad = |reason: String| ConvertError::decode(Format::Xml, reason);
    let text = std::str::from_utf8(payload).map_err(|e| bad(e.to_string()))?;
    // A byte order mark is allowed before the document (XML 1.0 §4.3.3).
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut w3c: Option<bool> = None;
    let mut result: Option<Value> = None;
    loop {
        let (ns, event) = reader.read_resolved_event().map_err(|e| bad(e.to_string()))?;
        let in_fn = matches!(ns, ResolveResult::Bound(Namespace(uri)) if uri == FN);
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if result.is_some() {
                    return Err(bad("a second root element".into()));
                }
                // One element more than the depth: a string or number inside the deepest
                // container is an element of its own, where JSON's depth counts containers only
                // (a container one level too deep is refused by `convert`'s depth check).
                if stack.len() > limits.max_depth {
                    return Err(ConvertError::TooDeep(limits.max_depth));
                }
                let local = local_name(e);
                let w3c = *w3c.get_or_insert(in_fn && W3C_NAMES.contains(&local.as_str()));
                let frame = open(e, local, in_fn, w3c)?;
                if matches!(event, Event::Empty(_)) {
                    close(frame, &mut stack, &mut result)?;
                } else {
                    stack.push(frame);
                }
            }
            Event::End(_) => {
                let frame = stack.pop().ok_or_else(|| bad("an end tag with no element open".into()))?;
                close(frame, &mut stack, &mut result)?;
            }
            Event::Text(t) => add_text(&mut stack, &t.xml10_content())?,
            Event::CData(c) => add_text(&mut stack, &c.xml10_content())?,
            Event::GeneralRef(r) => add_text(&mut stack, &resolve(&r)?)?,
            Event::DocType(_) => return Err(bad("a DOCTYPE (entities are not expanded)".into())),
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(bad("the document ends inside an element".into()));
    }
    result.ok_or_else(|| bad("no root element".into()))
}

fn local_name(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_owned()
}

/// Starts reading an element: its kind or name, and its attributes.
fn open(e: &BytesStart<'_>, local: String, in_fn: bool, w3c: bool) -> Result<Frame, ConvertError> {
    let bad = |reason: String| ConvertError::decode(Format::Xml, reason);
    let mut attributes = Vec::new();
    for attr in e.attributes() {
        let attr = attr.map_err(|e| bad(e.to_string()))?;
        if attr.key.as_namespace_binding().is_some() {
            continue;
        }
        let name = attr.key.local_name().as_ref().to_owned();
        let value = attr.normalized_value(quick_xml::XmlVersion::Implicit1_0).map_err(|e| bad(e.to_string()))?;
        attributes.push((name, value.into_owned()));
    }
    if !w3c {
        let fields = attributes.into_iter().map(|(name, value)| (format!("@{name}"), Value::String(value))).collect();
        return Ok(Frame::Other { name: local, fields, text: String::new() });
    }
    let kind = match (in_fn, local.as_str()) {
        (true, "map") => Kind::Map,
        (true, "array") => Kind::Array,
        (true, "string") => Kind::String,
        (true, "number") => Kind::Number,
        (true, "boolean") => Kind::Boolean,
        (true, "null") => Kind::Null,
        _ => return Err(bad(format!("<{local}> is not an element of the XPath json-to-xml representation"))),
    };
    let key = attributes.into_iter().find(|(name, _)| name == "key").map(|(_, value)| value);
    Ok(Frame::W3c { kind, key, map: Map::new(), items: Vec::new(), text: String::new() })
}

fn add_text(stack: &mut [Frame], text: &str) -> Result<(), ConvertError> {
    let blank = text.chars().all(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    match stack.last_mut() {
        Some(Frame::W3c { kind: Kind::Map | Kind::Array | Kind::Null, .. }) | None if !blank => {
            Err(ConvertError::decode(Format::Xml, "text where only elements may be"))
        }
        Some(Frame::W3c { text: own, .. } | Frame::Other { text: own, .. }) => {
            own.push_str(text);
            Ok(())
        }
        None => Ok(()),
    }
}

/// `&name;`: a character reference or one of the five predefined entities; there is no DTD,
/// so any other name is undefined.
fn resolve(r: &BytesRef<'_>) -> Result<String, ConvertError> {
    let bad = |reason: String| ConvertError::decode(Format::Xml, reason);
    if let Some(c) = r.resolve_char_ref().map_err(|e| bad(e.to_string()))? {
        return Ok(c.to_string());
    }
    let name: &str = r;
    quick_xml::escape::resolve_predefined_entity(name)
        .map(str::to_owned)
        .ok_or_else(|| bad(format!("undefined entity &{name};")))
}

/// Finishes an element: its value goes into its parent, or becomes the result.
fn close(frame: Frame, stack: &mut [Frame], result: &mut Option<Value>) -> Result<(), ConvertError> {
    let bad = |reason: &str| ConvertError::decode(Format::Xml, reason);
    match frame {
        Frame::W3c { kind, key, map, items, text } => {
            let value = match kind {
                Kind::Map => Value::Object(map),
                Kind::Array => Value::Array(items),
                Kind::String => Value::String(text),
                Kind::Null => Value::Null,
                Kind::Boolean => match text.trim() {
                    "true" | "1" => Value::Bool(true),
                    "false" | "0" => Value::Bool(false),
                    _ => return Err(bad("a boolean that is not true, false, 1 or 0")),
                },
                Kind::Number => Value::Number(number(text.trim()).ok_or_else(|| bad("a number that is not one"))?),
            };
            match stack.last_mut() {
                None => *result = Some(value),
                Some(Frame::W3c { kind: Kind::Map, map, .. }) => {
                    let key = key.ok_or_else(|| bad("an entry of a map without a key"))?;
                    if map.insert(key, value).is_some() {
                        return Err(bad("a map with a key twice"));
                    }
                }
                Some(Frame::W3c { kind: Kind::Array, items, .. }) => items.push(value),
                Some(_) => return Err(bad("an element inside a string, number, boolean or null")),
            }
        }
        Frame::Other { name, mut fields, text } => {
            let text = text.trim();
            let value = if fields.is_empty() {
                Value::String(text.to_owned())
            } else {
                if !text.is_empty() {
                    fields.insert("#text".into(), Value::String(text.to_owned()));
                }
                Value::Object(fields)
            };
            match stack.last_mut() {
                None => *result = Some(Value::Object(Map::from_iter([(name, value)]))),
                Some(Frame::Other { fields, .. }) => match fields.get_mut(&name) {
                    Some(Value::Array(repeated)) => repeated.push(value),
                    Some(first) => *first = Value::Array(vec![first.take(), value]),
                    None => {
                        fields.insert(name, value);
                    }
                },
                // Not reached: a document is read in one mode. An error all the same, never a
                // panic.
                Some(Frame::W3c { .. }) => return Err(bad("an element outside the json-to-xml representation")),
            }
        }
    }
    Ok(())
}

/// An `xs:double` as a JSON number: JSON's own syntax, else a float (`1E3`, `+5`, `.5`).
fn number(text: &str) -> Option<Number> {
    serde_json::from_str::<Number>(text).ok().or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert;

    fn to_xml(json: &str) -> String {
        String::from_utf8(convert(json.as_bytes(), Format::Json, Format::Xml, None, &Limits::default()).unwrap())
            .unwrap()
    }

    fn to_json(xml: &str) -> Result<String, ConvertError> {
        convert(xml.as_bytes(), Format::Xml, Format::Json, None, &Limits::default())
            .map(|json| String::from_utf8(json).unwrap())
    }

    #[test]
    fn json_becomes_the_w3c_representation_and_comes_back() {
        let json = r#"{"a":[1,"x<&\"",true,null],"b":{},"c":"","d\"":-2.5e-7}"#;
        let xml = to_xml(json);
        assert_eq!(
            xml,
            r#"<map xmlns="http://www.w3.org/2005/xpath-functions"><array key="a"><number>1</number><string>x&lt;&amp;"</string><boolean>true</boolean><null/></array><map key="b"/><string key="c"/><number key="d&quot;">-2.5e-7</number></map>"#
        );
        assert_eq!(to_json(&xml).unwrap(), json);
    }

    #[test]
    fn the_w3c_example_is_written_exactly() {
        assert_eq!(
            to_xml(r#"{"a":[1,"x",true,null]}"#),
            r#"<map xmlns="http://www.w3.org/2005/xpath-functions"><array key="a"><number>1</number><string>x</string><boolean>true</boolean><null/></array></map>"#
        );
        assert_eq!(to_xml("2.5"), r#"<number xmlns="http://www.w3.org/2005/xpath-functions">2.5</number>"#);
        assert_eq!(
            to_xml(r#"{"k\t\n":"\t"}"#),
            format!(r#"<map xmlns="{FN}"><string key="k&#x9;&#xA;">	</string></map>"#)
        );
        assert_eq!(to_json(&to_xml(r#"{"k\t\n":"\t"}"#)).unwrap(), r#"{"k\t\n":"\t"}"#);
    }

    #[test]
    fn w3c_numbers_and_booleans_read_by_value() {
        let doc = |body: &str| format!(r#"<array xmlns="{FN}">{body}</array>"#);
        assert_eq!(
            to_json(&doc("<number> 21.50 </number><number>1E3</number><boolean>0</boolean>")).unwrap(),
            "[21.5,1000.0,false]"
        );
        assert!(to_json(&doc("<number>INF</number>")).is_err());
        assert!(to_json(&doc("<number>1e400</number>")).is_err());
        assert!(to_json(&doc("<boolean>yes</boolean>")).is_err());
        assert!(to_json(&doc("<string><null/></string>")).is_err());
        assert!(to_json(&doc("<map><number>1</number></map>")).is_err());
        assert!(to_json(&doc("<map><null key='a'/><null key='a'/></map>")).is_err());
        assert!(to_json(&doc("text")).is_err());
        assert!(to_json(&doc("<other/>")).is_err());
    }

    #[test]
    fn a_prefixed_w3c_document_reads_the_same() {
        let xml = r#"<fn:map xmlns:fn="http://www.w3.org/2005/xpath-functions">
            <fn:number key="t">21.5</fn:number><fn:boolean key="ok">1</fn:boolean></fn:map>"#;
        assert_eq!(to_json(xml).unwrap(), r#"{"t":21.5,"ok":true}"#);
    }

    #[test]
    fn other_xml_maps_by_the_convention() {
        let xml = r#"<?xml version="1.0"?><g:reading xmlns:g="urn:g" unit="C"><g:sensor>g1</g:sensor>
            <t>21.5</t><t>21.7</t><note lang="en">warm &amp; dry</note><empty/></g:reading>"#;
        assert_eq!(
            to_json(xml).unwrap(),
            r##"{"reading":{"@unit":"C","sensor":"g1","t":["21.5","21.7"],"note":{"@lang":"en","#text":"warm & dry"},"empty":""}}"##
        );
    }

    #[test]
    fn the_sensor_example_and_references_bom_cdata_and_mixed_text() {
        assert_eq!(
            to_json(r#"<reading unit="C"><t>21.5</t></reading>"#).unwrap(),
            r#"{"reading":{"@unit":"C","t":"21.5"}}"#
        );
        assert_eq!(to_json("\u{FEFF}<a>&#x41;&#66;&lt;<![CDATA[<x>]]></a>").unwrap(), r#"{"a":"AB<<x>"}"#);
        assert_eq!(
            to_json(r#"<a b="&lt;&#x41;">x<c>1</c>y</a>"#).unwrap(),
            r##"{"a":{"@b":"<A","c":"1","#text":"xy"}}"##
        );
        assert_eq!(to_json("<a>\n  <b/>\n</a>").unwrap(), r#"{"a":{"b":""}}"#);
        assert!(to_json("<a>x</b>").is_err());
        assert!(to_json("<a>").is_err());
        assert!(to_json("").is_err());
        assert!(to_json("text<a/>").is_err());
        assert!(to_json("<a>&#0;</a>").is_err());
        assert!(convert(b"<a>\xff</a>", Format::Xml, Format::Json, None, &Limits::default()).is_err());
    }

    #[test]
    fn hostile_documents_are_refused() {
        // Billion laughs: ten levels of ten references, 10^9 "lol"s if expanded. Refused at
        // the DOCTYPE, before any expansion.
        let mut laughs = String::from(r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol0 "lol">"#);
        for level in 1..10 {
            let refs = format!("&lol{};", level - 1).repeat(10);
            laughs.push_str(&format!(r#"<!ENTITY lol{level} "{refs}">"#));
        }
        laughs.push_str("]><lolz>&lol9;</lolz>");
        let started = std::time::Instant::now();
        assert!(matches!(to_json(&laughs), Err(ConvertError::Decode { .. })));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // External entities never get a chance either.
        assert!(to_json(r#"<!DOCTYPE a SYSTEM "file:///etc/passwd"><a>&x;</a>"#).is_err());
        assert!(to_json("<a>&undefined;</a>").is_err());
        assert!(to_json(r#"<a b="&undefined;"/>"#).is_err());
        let deep = "<a>".repeat(100_000);
        assert!(matches!(to_json(&deep), Err(ConvertError::TooDeep(32))));
        let deep_w3c = format!("<array xmlns=\"{FN}\">{}", "<array>".repeat(100_000));
        assert!(matches!(to_json(&deep_w3c), Err(ConvertError::TooDeep(32))));
        assert!(to_json("<a/><b/>").is_err());
        assert!(to_json("<map xmlns=\"http://www.w3.org/2005/xpath-functions\"><number>1</number></map>").is_err());
    }

    #[test]
    fn text_that_xml_cannot_hold_does_not_convert() {
        assert!(convert(br#"["\u0001"]"#, Format::Json, Format::Xml, None, &Limits::default()).is_err());
        assert_eq!(
            to_xml(r#"["a\r\nb"]"#),
            format!(
                r#"<array xmlns="{FN}"><string>a&#xD;
b</string></array>"#
            )
        );
    }
}
