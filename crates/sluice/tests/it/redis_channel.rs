//! The invalidation channel on a real Redis: what one node publishes reaches every subscriber,
//! confirmations vouch for everything published before them, and a subscription that breaks
//! comes back by itself and makes its listener forget everything first.
//!
//! Waits below are for messages (bounded by a generous real-time deadline), never for time.
#![cfg(feature = "redis")]

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use sluice::store::LimitKey;
use sluice::store::invalidation::{Invalidation, InvalidationChannel, InvalidationListener};
use sluice::store::redis::RedisChannel;
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{Clock, Micros, SystemClock};
use sluice_test_support::RedisServer;
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Applied(Invalidation),
    Confirmed(Micros),
}

/// Records what the channel delivers and wakes the test.
struct Recorder {
    events: Mutex<Vec<Event>>,
    changed: watch::Sender<usize>,
}

impl Recorder {
    fn new() -> Arc<Recorder> {
        Arc::new(Recorder {
            events: Mutex::new(Vec::new()),
            changed: watch::channel(0).0,
        })
    }

    fn push(&self, event: Event) {
        let mut events = self.events.lock();
        events.push(event);
        self.changed.send_replace(events.len());
    }

    /// Waits until `done` holds for the events so far (10 s of real time at most).
    async fn until(&self, what: &str, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
        let mut rx = self.changed.subscribe();
        let wait = rx.wait_for(|_| done(&self.events.lock()));
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .unwrap_or_else(|_| panic!("{what}: {:?}", self.events.lock()))
            .expect("the sender lives in the recorder");
        self.events.lock().clone()
    }
}

impl InvalidationListener for Recorder {
    fn now_us(&self) -> Micros {
        SystemClock.now_us()
    }
    fn apply(&self, invalidation: Invalidation) {
        self.push(Event::Applied(invalidation));
    }
    fn confirmed(&self, as_of_us: Micros) {
        self.push(Event::Confirmed(as_of_us));
    }
}

fn confirmed_after(events: &[Event], t: Micros) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::Confirmed(at) if *at > t))
}

async fn channel(server: &RedisServer) -> RedisChannel {
    RedisStore::connect(&server.url(), RedisOptions::default())
        .await
        .expect("a valid URL")
        .channel()
}

fn subscribe(channel: &RedisChannel, recorder: &Arc<Recorder>) {
    let weak: Weak<dyn InvalidationListener> =
        Arc::downgrade(&(recorder.clone() as Arc<dyn InvalidationListener>));
    channel.subscribe(weak, Duration::from_millis(20));
}

#[tokio::test]
async fn published_invalidations_reach_every_node_before_the_next_confirmation() {
    let server = RedisServer::start();
    let (a, b) = (channel(&server).await, channel(&server).await);
    assert_eq!(a.name(), "sluice:denial-cache");
    let (on_a, on_b) = (Recorder::new(), Recorder::new());
    subscribe(&a, &on_a);
    subscribe(&b, &on_b);
    for recorder in [&on_a, &on_b] {
        let events = recorder
            .until("subscribed", |e| {
                e.contains(&Event::Applied(Invalidation::All))
            })
            .await;
        assert_eq!(
            events[0],
            Event::Applied(Invalidation::All),
            "a new subscription forgets everything before anything else"
        );
    }
    let reset = Invalidation::Keys(vec![LimitKey {
        rule: "login".into(),
        limit_id: "ip".into(),
        identity: "ip=203.0.113.9".into(),
    }]);
    b.publish(&reset).await.unwrap();
    // A confirmation vouches for what was published before its PING was sent.
    let published_at = SystemClock.now_us();
    for recorder in [&on_a, &on_b] {
        let events = recorder
            .until("confirmed after the publication", |e| {
                confirmed_after(e, published_at)
            })
            .await;
        let applied = events
            .iter()
            .position(|e| *e == Event::Applied(reset.clone()))
            .expect("the publisher's own subscription gets it too");
        let vouched = events
            .iter()
            .position(|e| matches!(e, Event::Confirmed(at) if *at > published_at))
            .unwrap();
        assert!(applied < vouched, "{events:?}");
    }
    // Something unreadable on the channel makes listeners forget everything.
    let count = on_a.events.lock().len();
    server.cli(&["PUBLISH", "sluice:denial-cache", "garbage"]);
    on_a.until("garbage applied as all", |e| {
        e[count..].contains(&Event::Applied(Invalidation::All))
    })
    .await;
}

#[tokio::test]
async fn a_broken_subscription_resubscribes_and_forgets_everything() {
    let mut server = RedisServer::start();
    let channel = channel(&server).await;
    let recorder = Recorder::new();
    subscribe(&channel, &recorder);
    recorder
        .until("subscribed", |e| confirmed_after(e, Micros::ZERO))
        .await;
    server.restart();
    let before = recorder.events.lock().len();
    let restarted_at = SystemClock.now_us();
    let events = recorder
        .until("resubscribed and confirmed", |e| {
            e[before..].contains(&Event::Applied(Invalidation::All))
                && confirmed_after(e, restarted_at)
        })
        .await;
    let all = events[before..]
        .iter()
        .position(|e| *e == Event::Applied(Invalidation::All))
        .unwrap();
    assert!(
        !events[before..before + all]
            .iter()
            .any(|e| matches!(e, Event::Confirmed(at) if *at > restarted_at)),
        "nothing is vouched for after the restart before everything was forgotten: {events:?}"
    );
}

#[tokio::test]
async fn the_subscription_ends_with_its_listener() {
    let server = RedisServer::start();
    let channel = channel(&server).await;
    let recorder = Recorder::new();
    subscribe(&channel, &recorder);
    recorder
        .until("subscribed", |e| confirmed_after(e, Micros::ZERO))
        .await;
    let subscribers = || {
        server
            .cli(&["PUBSUB", "NUMSUB", "sluice:denial-cache"])
            .lines()
            .nth(1)
            .map(str::to_string)
    };
    assert_eq!(subscribers().as_deref(), Some("1"));
    drop(recorder);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while subscribers().as_deref() != Some("0") {
        assert!(std::time::Instant::now() < deadline, "still subscribed");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
