//! WSN → WSN time for a burst of notifications: a WS-N publisher POSTs `N` Notify documents
//! (one NotificationMessage each, one after the other on a keep-alive connection) to the
//! broker endpoint, which pushes each to a subscribed consumer endpoint. Measured from the
//! first Notify sent to the last notification received by the consumer, over real loopback
//! HTTP, everything in one process. The OKSE paper's figure for 100 notifications on a
//! Raspberry Pi 3 is 20.8 s.
//!
//! ```text
//! cargo run --release -p tolk-wsn --example burst [-- COUNT [ROUNDS]]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes as AxumBytes;
use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_wsn::{WsnConfig, WsnFrontEnd};

const SUBSCRIBE: &str = r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Body><wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>CONSUMER</wsa:Address></wsnt:ConsumerReference><wsnt:Filter><wsnt:TopicExpression Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple">burst</wsnt:TopicExpression></wsnt:Filter></wsnt:Subscribe></s:Body></s:Envelope>"#;

fn notify(i: usize) -> String {
    format!(
        r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Body><wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple">burst</wsnt:Topic><wsnt:Message><reading xmlns="urn:example"><seq>{i}</seq><value>21.5</value></reading></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></s:Body></s:Envelope>"#
    )
}

async fn consume(State(tx): State<mpsc::UnboundedSender<Instant>>, _body: AxumBytes) -> StatusCode {
    let _ = tx.send(Instant::now());
    StatusCode::OK
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);

    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    let ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
    let started = Box::new(WsnFrontEnd::new(WsnConfig::default())).start(ctx.clone()).await.unwrap();
    let app = started.routes.expect("WS-N serves routes");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let broker = listener.local_addr().unwrap();
    ctx.http_addr.set(broker).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let (tx, mut rx) = mpsc::unbounded_channel();
    let consumer_app = axum::Router::new().route("/consumer", post(consume)).with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let consumer = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, consumer_app).await.unwrap() });

    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let post_doc = |doc: String| {
        let request = Request::post(format!("http://{broker}/wsn"))
            .header("content-type", "text/xml; charset=utf-8")
            .body(Full::new(Bytes::from(doc)))
            .unwrap();
        let client = client.clone();
        async move {
            let response = client.request(request).await.unwrap();
            let status = response.status();
            let _ = response.into_body().collect().await;
            status
        }
    };
    let status = post_doc(SUBSCRIBE.replace("CONSUMER", &format!("http://{consumer}/consumer"))).await;
    assert_eq!(status, 200);

    let mut times = Vec::new();
    for round in 0..rounds {
        let started = Instant::now();
        for i in 0..count {
            assert_eq!(post_doc(notify(i)).await, 202);
        }
        let mut last = started;
        for _ in 0..count {
            last = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.unwrap().unwrap();
        }
        let elapsed = last - started;
        println!("round {round}: {count} notifications WSN→WSN in {elapsed:?}");
        times.push(elapsed);
    }
    times.sort();
    println!(
        "median of {rounds} rounds: {:?} for {count} notifications ({:?} each); OKSE on a Pi 3: 20.8 s for 100",
        times[times.len() / 2],
        times[times.len() / 2] / count as u32
    );
}
