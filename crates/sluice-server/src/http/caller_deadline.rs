//! The caller's deadline, read from a request's headers: how long its caller waits for the answer
//! before giving up (and failing open or closed on its side).
//!
//! - `grpc-timeout` (gRPC: Envoy's rate-limit service, `sluice.v1`), as the gRPC protocol
//!   writes it: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`);
//! - `x-envoy-expected-rq-timeout-ms` (Envoy's own, on HTTP), and `sluice-timeout-ms` (Sluice's,
//!   for any HTTP client): whole milliseconds.
//!
//! The deadline counts from the moment the connection handed the request to the service, once
//! its head was read ([`Arrived`]); with several headers the earliest deadline holds. Checks made for the request run under it
//! ([`sluice::limiter::deadline`]): past it, a decision asks no store and is answered by its
//! rule's fail policy with `reason: "deadline"`. A value that is not one of these forms is
//! ignored, as if the header were absent: a deadline is a caller's hint, and a proxy that writes
//! one Sluice cannot read must not turn its requests away.

use std::future::Future;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::future::Either;
use http::{HeaderMap, HeaderName};
use tokio::time::Instant;

/// Sluice's own header: the caller's timeout in whole milliseconds.
pub const SLUICE_TIMEOUT_MS: HeaderName = HeaderName::from_static("sluice-timeout-ms");
/// Envoy's header on the requests it forwards: its route's timeout in whole milliseconds.
pub const ENVOY_TIMEOUT_MS: HeaderName = HeaderName::from_static("x-envoy-expected-rq-timeout-ms");
/// The gRPC protocol's timeout header.
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// How long the caller of a request with `headers` waits, if it says.
pub fn timeout(headers: &HeaderMap) -> Option<Duration> {
    let millis = |name: HeaderName| {
        let text = headers.get(name)?.to_str().ok()?;
        text.parse::<u64>().ok().map(Duration::from_millis)
    };
    let grpc = || grpc_timeout(headers.get(GRPC_TIMEOUT)?.to_str().ok()?);
    [millis(SLUICE_TIMEOUT_MS), millis(ENVOY_TIMEOUT_MS), grpc()]
        .into_iter()
        .flatten()
        .min()
}

/// A `grpc-timeout` value: 1 to 8 digits, then the unit.
fn grpc_timeout(text: &str) -> Option<Duration> {
    let (digits, unit) = text.split_at_checked(text.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The deadline of a request with `headers` that arrived at `arrived`. A timeout too long for
/// the clock to add is no deadline.
pub fn deadline(headers: &HeaderMap, arrived: Instant) -> Option<Instant> {
    timeout(headers).and_then(|t| arrived.checked_add(t))
}

/// When the connection handed a request to the service: the instant its caller's deadline and
/// its wait in the service ([`sluice::limiter::standing_queue`]) count from. Set on the
/// requests that go through the router ([`super::front`]).
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub Instant);

/// Runs `answer` as the work of a request that arrived at `arrived`, under `deadline` if there
/// is one; without an arrival (an in-process store), as it is.
pub fn scoped<F: Future>(
    arrived: Option<Instant>,
    deadline: Option<Instant>,
    answer: F,
) -> impl Future<Output = F::Output> {
    let Some(arrived) = arrived else {
        return Either::Right(answer);
    };
    let answer = match deadline {
        Some(deadline) => Either::Left(sluice::limiter::deadline::within(deadline, answer)),
        None => Either::Right(answer),
    };
    Either::Left(sluice::limiter::standing_queue::arrived(arrived, answer))
}

/// The router's middleware: every request runs under its caller's deadline and with its
/// arrival, when the store is a remote one (`remote`, the middleware's state). A decision on
/// an in-process store is always made, so its requests skip reading the headers.
pub async fn middleware(State(remote): State<bool>, request: Request, next: Next) -> Response {
    if !remote {
        return next.run(request).await;
    }
    let arrived = request
        .extensions()
        .get::<Arrived>()
        .map_or_else(Instant::now, |a| a.0);
    let deadline = deadline(request.headers(), arrived);
    scoped(Some(arrived), deadline, next.run(request)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn grpc_timeouts_read_as_the_protocol_writes_them() {
        let cases = [
            ("1H", Some(Duration::from_secs(3600))),
            ("2M", Some(Duration::from_secs(120))),
            ("20S", Some(Duration::from_secs(20))),
            ("250m", Some(Duration::from_millis(250))),
            ("99999999u", Some(Duration::from_micros(99_999_999))),
            ("5n", Some(Duration::from_nanos(5))),
            ("0m", Some(Duration::ZERO)),
            ("123456789m", None),
            ("m", None),
            ("", None),
            ("10", None),
            ("10x", None),
            ("-1m", None),
            ("1.5S", None),
            ("٣m", None),
        ];
        for (text, want) in cases {
            assert_eq!(grpc_timeout(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_earliest_of_the_headers_holds_and_a_bad_value_counts_as_none() {
        assert_eq!(timeout(&headers(&[])), None);
        assert_eq!(
            timeout(&headers(&[
                (SLUICE_TIMEOUT_MS, "80"),
                (ENVOY_TIMEOUT_MS, "15000")
            ])),
            Some(Duration::from_millis(80))
        );
        assert_eq!(
            timeout(&headers(&[
                (GRPC_TIMEOUT, "20m"),
                (SLUICE_TIMEOUT_MS, "80")
            ])),
            Some(Duration::from_millis(20))
        );
        assert_eq!(
            timeout(&headers(&[
                (SLUICE_TIMEOUT_MS, "soon"),
                (ENVOY_TIMEOUT_MS, "-5")
            ])),
            None
        );
        assert_eq!(
            timeout(&headers(&[(ENVOY_TIMEOUT_MS, "18446744073709551615")])),
            Some(Duration::from_millis(u64::MAX))
        );
    }
}
