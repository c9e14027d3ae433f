//! Payload re-encoding (`payload_codec::convert`) for every format, on the same ten sensor
//! readings ({sensor, value, time, unit}):
//!
//! * `encode/<format>`: the readings as JSON text converted to the format, which is what the
//!   broker does for a subscriber that asked for it;
//! * `decode/<format>`: the format converted back to JSON text.
//!
//! Both sides of a conversion pass through the JSON data model, so each figure includes one
//! JSON read (encode) or one JSON write (decode). The `json` row measures exactly that part,
//! `serde_json::to_vec` of the value as encode and `serde_json::from_slice` as decode, so that
//! a format's own cost is its row minus the JSON row.
//!
//! The generic formats (JSON, CBOR, XML, Protobuf) carry `{"readings":[{...}, ...]}`; SenML
//! carries the same readings as a pack (`n`, `u`, `v`, `t`), its own shape, converted from and
//! to that pack's JSON. Protobuf uses `tolk.test.Readings` from codecs/payload's test proto.
//! Sizes are printed before the measurements. Each benchmark first checks, untimed, that the
//! decoded JSON is the readings again.
//!
//! `cargo bench -p tolk-benches --bench encodings`; the table is in docs/encodings.md.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use payload_codec::{Format, Limits, Schema, convert};
use serde_json::{Value, json};

/// Ten readings of one greenhouse's sensors, ten seconds apart.
fn readings() -> Vec<(String, f64, i64, &'static str)> {
    (0..10)
        .map(|i| {
            let (unit, base) = if i % 2 == 0 { ("Cel", 21.5) } else { ("%RH", 48.0) };
            (format!("greenhouse-1/sensor-{i}"), base + f64::from(i) * 0.1, 1_764_201_600 + 10 * i64::from(i), unit)
        })
        .collect()
}

/// The readings as the generic formats carry them.
fn generic() -> Value {
    let readings: Vec<Value> = readings()
        .into_iter()
        .map(|(sensor, value, time, unit)| json!({"sensor": sensor, "value": value, "time": time, "unit": unit}))
        .collect();
    json!({ "readings": readings })
}

/// The readings as a SenML pack.
fn pack() -> Value {
    let records: Vec<Value> =
        readings().into_iter().map(|(n, v, t, u)| json!({"n": n, "u": u, "v": v, "t": t})).collect();
    Value::Array(records)
}

/// One format's payload, and the JSON text it is converted from and to.
struct Case {
    format: Format,
    json: Vec<u8>,
    payload: Vec<u8>,
}

fn cases(schema: &Schema, limits: &Limits) -> Vec<Case> {
    let generic = serde_json::to_vec(&generic()).unwrap();
    let pack = serde_json::to_vec(&pack()).unwrap();
    Format::ALL
        .into_iter()
        .map(|format| {
            let json = if matches!(format, Format::SenmlJson | Format::SenmlCbor) { &pack } else { &generic };
            let payload = convert(json, Format::Json, format, Some(schema), limits).unwrap();
            Case { format, json: json.clone(), payload }
        })
        .collect()
}

fn encodings(c: &mut Criterion) {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../codecs/payload/tests/data/reading.proto");
    let schema = Schema::load(&proto, "tolk.test.Readings").unwrap();
    let limits = Limits::default();
    let cases = cases(&schema, &limits);

    println!("payload sizes, ten readings:");
    let json_len = cases[0].payload.len();
    for case in &cases {
        let len = case.payload.len();
        println!("  {:<10} {len:>5} bytes  {:>5.2} x JSON", case.format.label(), len as f64 / json_len as f64);
    }

    let mut group = c.benchmark_group("encodings");
    for case in &cases {
        // Untimed: the payload decodes to the readings it was made from (Protobuf writes 64-bit
        // integers as strings, so it is compared through a second encode instead).
        let back = convert(&case.payload, case.format, Format::Json, Some(&schema), &limits).unwrap();
        let again = convert(&back, Format::Json, case.format, Some(&schema), &limits).unwrap();
        assert_eq!(again, case.payload, "{} does not survive a round trip", case.format.label());
        if case.format != Format::Protobuf {
            let (back, json): (Value, Value) =
                (serde_json::from_slice(&back).unwrap(), serde_json::from_slice(&case.json).unwrap());
            assert_eq!(back, json, "{} decodes to something else", case.format.label());
        }

        let label = case.format.label();
        group.throughput(Throughput::Bytes(case.json.len() as u64));
        if case.format == Format::Json {
            let value: Value = serde_json::from_slice(&case.json).unwrap();
            group.bench_function(format!("encode/{label}"), |b| b.iter(|| serde_json::to_vec(black_box(&value))));
            group.bench_function(format!("decode/{label}"), |b| {
                b.iter(|| serde_json::from_slice::<Value>(black_box(&case.payload)))
            });
            continue;
        }
        group.bench_function(format!("encode/{label}"), |b| {
            b.iter(|| convert(black_box(&case.json), Format::Json, case.format, Some(&schema), &limits))
        });
        group.bench_function(format!("decode/{label}"), |b| {
            b.iter(|| convert(black_box(&case.payload), case.format, Format::Json, Some(&schema), &limits))
        });
    }
    group.finish();
}

/// Short runs, so that the twelve cases take well under a minute (the figures in
/// docs/encodings.md are stable to a few per cent at these settings).
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .nresamples(10_000)
}

criterion_group! {
    name = benches;
    config = config();
    targets = encodings
}
criterion_main!(benches);
