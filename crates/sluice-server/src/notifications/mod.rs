//! Delivery of quota notices: the crossings the limiter finds (`notify` on a quota) posted to
//! their webhooks as CloudEvents ([`event`]), tried again with backoff until a 2xx answer or the
//! last try (the `notifications` section of the rule file).
//!
//! Invariants:
//! - A decision never waits for a delivery: the limiter queues crossings without waiting (a full
//!   queue drops them, counted), and this task drains the queue.
//! - At most `in_flight` events are being tried (or waiting to be tried again) at once; the rest
//!   wait in the bounded queue, so memory is bounded whatever the receivers do.
//! - Every try of one crossing carries the same event id.
//! - Events live in this process: those queued or being retried when it ends are lost (a crossing
//!   is found once, by the node whose decision made it, and is not written to the store).

pub mod event;

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sluice::QuotaCrossing;
use tokio::sync::{Semaphore, mpsc};

use crate::config::NotificationsConfig;
use crate::metrics::NOTIFICATIONS;

/// The longest wait between two tries of one event.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Starts delivering the crossings `queue` receives, until every sender is gone.
pub fn spawn(
    queue: mpsc::Receiver<QuotaCrossing>,
    settings: NotificationsConfig,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(deliver_all(queue, settings))
}

async fn deliver_all(mut queue: mpsc::Receiver<QuotaCrossing>, settings: NotificationsConfig) {
    let client = match reqwest::Client::builder()
        .timeout(settings.timeout)
        .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot start the webhook client: quota notices are off");
            return;
        }
    };
    let settings = Arc::new(settings);
    let slots = Arc::new(Semaphore::new(settings.in_flight));
    while let Some(crossing) = queue.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (client, settings) = (client.clone(), settings.clone());
        tokio::spawn(async move {
            deliver(&client, &crossing, &settings).await;
            drop(slot);
        });
    }
}

/// Tries `crossing` until its webhook answers 2xx or the tries run out.
async fn deliver(
    client: &reqwest::Client,
    crossing: &QuotaCrossing,
    settings: &NotificationsConfig,
) {
    let body = event::of(crossing).to_string();
    let id = crossing.id();
    for attempt in 1..=settings.attempts {
        let sent = client
            .post(&*crossing.webhook)
            .header(reqwest::header::CONTENT_TYPE, event::CONTENT_TYPE)
            .body(body.clone())
            .send()
            .await;
        let failure = match sent {
            Ok(answer) if answer.status().is_success() => {
                metrics::counter!(NOTIFICATIONS, "result" => "delivered").increment(1);
                return;
            }
            Ok(answer) => format!("answered {}", answer.status()),
            Err(error) => error.to_string(),
        };
        if attempt == settings.attempts {
            tracing::warn!(
                id,
                webhook = %crossing.webhook,
                attempt,
                failure,
                "quota notice abandoned after its last try"
            );
            metrics::counter!(NOTIFICATIONS, "result" => "abandoned").increment(1);
            return;
        }
        tracing::debug!(id, webhook = %crossing.webhook, attempt, failure, "quota notice to retry");
        metrics::counter!(NOTIFICATIONS, "result" => "retried").increment(1);
        tokio::time::sleep(backoff(settings.backoff, attempt)).await;
    }
}

/// The wait after try `attempt` (1 for the first): `first` doubled for each try before, at most
/// [`MAX_BACKOFF`], drawn between half of it and all of it, so receivers that failed together
/// are not retried together.
fn backoff(first: Duration, attempt: u32) -> Duration {
    let full = first
        .saturating_mul(1 << (attempt - 1).min(20))
        .min(MAX_BACKOFF);
    full.mul_f64(rand::rng().random_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_within_their_bound() {
        let first = Duration::from_millis(100);
        for attempt in 1..40 {
            let full = first
                .saturating_mul(1 << (attempt - 1).min(20))
                .min(MAX_BACKOFF);
            let wait = backoff(first, attempt);
            assert!(
                wait >= full / 2 && wait <= full,
                "{attempt}: {wait:?} of {full:?}"
            );
        }
        assert!(backoff(Duration::from_secs(1), 30) >= MAX_BACKOFF / 2);
    }
}
