//! The server as a library: the caller supplies the listener (port 0) and the shutdown signal.

use std::sync::Arc;

use sluice_server::config::{Config, Format};
use sluice_server::{self as server, AppState, store_url};

#[tokio::test]
async fn serves_on_a_caller_listener_until_the_caller_stops_it() {
    let config = Config::parse(
        "rules:\n  one:\n    limits:\n      - { by: [id], rate: 1/1m }\n",
        Format::Yaml,
    )
    .unwrap();
    let store = store_url::open("memory://", &config.store).await.unwrap();
    let state: Arc<AppState> = AppState::new(config, None, &store, None).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/check", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(listener, state, async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let body = r#"{"rule":"one","attributes":{"id":"a"}}"#;
    let first = client.post(&url).body(body).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = client.post(&url).body(body).send().await.unwrap();
    assert_eq!(second.status(), 429);
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    assert!(client.post(&url).body(body).send().await.is_err());
}
