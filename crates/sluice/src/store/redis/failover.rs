//! A connection to one writable primary that follows failovers: a single server (`redis://`) or
//! the primary the sentinels name (`redis+sentinel://`).
//!
//! Calls go through one multiplexed [`ConnectionManager`], which re-dials a dropped connection by
//! itself. What it cannot see is a server that answers but no longer takes writes, or a primary
//! that moved. This layer watches the replies and replaces the connection:
//! - on `READONLY`, `LOADING` or `MASTERDOWN` (the server was demoted, is loading, or lost its
//!   primary): a fresh connection, so a name that now points at the new primary is resolved
//!   again; behind sentinels, the sentinels are asked first;
//! - behind sentinels, also on a connection error, and on a burst of calls that did not answer
//!   (timed out at the store's deadline or abandoned by the caller): the primary may be gone.
//!
//! Behind sentinels a relocation keeps asking them (every [`RETRY`]) until one names a server
//! that says `ROLE master`, then swaps it in; calls made meanwhile wait for it (within the
//! caller's deadline and the connect timeout), then fail as transient errors, so the fail policy
//! answers them. At most one relocation runs at a time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, ConnectionInfo, RedisError, RedisResult, TlsCertificates};

/// Pause between two rounds of asking the sentinels.
pub const RETRY: Duration = Duration::from_millis(100);

/// Unanswered calls in a row (with no answer in between) that make the sentinels be asked again.
pub const TIMEOUT_BURST: u32 = 3;

/// Where the primary is.
#[derive(Debug, Clone)]
pub enum Locate {
    /// Always this server.
    Fixed(ConnectionInfo),
    /// Ask these sentinels for `master`; connect with `template`'s credentials and database.
    Sentinel {
        /// The sentinels.
        sentinels: Vec<ConnectionInfo>,
        /// The master name.
        master: String,
        /// Credentials, database and TLS of the data nodes (the address is replaced).
        template: ConnectionInfo,
    },
}

/// Connection settings shared by every server of a deployment.
#[derive(Debug, Clone)]
pub struct Dial {
    /// TLS certificates for `rediss` (none: system roots).
    pub certificates: Option<TlsCertificates>,
    /// Deadline to establish a connection.
    pub connect_timeout: Duration,
    /// Deadline for one reply.
    pub response_timeout: Duration,
}

impl Dial {
    /// A client for `info`, with the configured certificates when it is a TLS address.
    pub fn client(&self, info: ConnectionInfo) -> RedisResult<Client> {
        match (&self.certificates, info.addr()) {
            (Some(certs), ConnectionAddr::TcpTls { .. }) => {
                Client::build_with_tls(info, certs.clone())
            }
            _ => Client::open(info),
        }
    }

    fn manager(&self, info: ConnectionInfo) -> RedisResult<ConnectionManager> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            // Few, short reconnection attempts per call: the limiter's breaker spaces out the
            // calls while Redis is down, and each call starts a fresh attempt.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        ConnectionManager::new_lazy_with_config(self.client(info)?, config)
    }
}

/// A failover-following connection. Cheap to clone (clones share the current connection).
#[derive(Clone)]
pub struct Failover {
    shared: Arc<Shared>,
}

struct Shared {
    current: ArcSwapOption<ConnectionManager>,
    locate: Locate,
    dial: Dial,
    relocating: AtomicBool,
    /// Woken when a relocation swaps a connection in.
    found: tokio::sync::Notify,
    unanswered: AtomicU32,
    db: i64,
}

impl std::fmt::Debug for Failover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.shared.locate {
            Locate::Fixed(_) => "server",
            Locate::Sentinel { .. } => "sentinel",
        };
        f.debug_struct("Failover").field("locate", &kind).finish()
    }
}

impl Failover {
    /// A connection that dials lazily. Behind sentinels it starts asking them at once (in the
    /// background: a Tokio runtime must be running).
    pub fn new(locate: Locate, dial: Dial) -> RedisResult<Failover> {
        let (current, db) = match &locate {
            Locate::Fixed(info) => (
                Some(Arc::new(dial.manager(info.clone())?)),
                info.redis_settings().db(),
            ),
            Locate::Sentinel { template, .. } => (None, template.redis_settings().db()),
        };
        let failover = Failover {
            shared: Arc::new(Shared {
                current: ArcSwapOption::new(current),
                locate,
                dial,
                relocating: AtomicBool::new(false),
                found: tokio::sync::Notify::new(),
                unanswered: AtomicU32::new(0),
                db,
            }),
        };
        if matches!(failover.shared.locate, Locate::Sentinel { .. }) {
            failover.relocate();
        }
        Ok(failover)
    }

    /// Starts replacing the connection (unless a replacement is already under way).
    pub fn relocate(&self) {
        if self.shared.relocating.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.shared.relocating.store(false, Ordering::Release);
            return;
        };
        let weak = Arc::downgrade(&self.shared);
        runtime.spawn(relocate(weak));
    }

    /// The current connection. While no primary is known, waits (at most the connect timeout)
    /// for the relocation to find one, then fails as a transient error.
    async fn connection(&self) -> RedisResult<ConnectionManager> {
        if let Some(current) = self.shared.current.load_full() {
            return Ok((*current).clone());
        }
        let found = self.shared.found.notified();
        tokio::pin!(found);
        found.as_mut().enable();
        self.relocate();
        if self.shared.current.load().is_none() {
            let _ = tokio::time::timeout(self.shared.dial.connect_timeout, found).await;
        }
        match self.shared.current.load_full() {
            Some(current) => Ok((*current).clone()),
            None => Err(no_primary()),
        }
    }

    /// Looks at a call's result: relocates on the replies and failures listed in the module docs.
    fn observe<T>(&self, watch: Unanswered<'_>, result: &RedisResult<T>, code: Option<&str>) {
        watch.answered();
        let sentinel = matches!(self.shared.locate, Locate::Sentinel { .. });
        match result {
            Err(e) if e.is_timeout() => self.unanswered(),
            Err(e) if sentinel && (e.is_io_error() || e.is_connection_dropped()) => self.relocate(),
            _ => self.shared.unanswered.store(0, Ordering::Relaxed),
        }
        let code = code.or_else(|| result.as_ref().err().and_then(RedisError::code));
        if let Some(code @ ("READONLY" | "LOADING" | "MASTERDOWN")) = code {
            tracing::warn!(code, "Redis is not a writable primary; reconnecting");
            self.relocate();
        }
    }

    fn unanswered(&self) {
        let n = self.shared.unanswered.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= TIMEOUT_BURST && matches!(self.shared.locate, Locate::Sentinel { .. }) {
            self.shared.unanswered.store(0, Ordering::Relaxed);
            self.relocate();
        }
    }
}

/// Counts a call dropped before its answer (the caller's deadline passed) as unanswered.
struct Unanswered<'a>(&'a Shared, bool);

impl Unanswered<'_> {
    fn answered(mut self) {
        self.1 = false;
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.1 {
            let n = self.0.unanswered.fetch_add(1, Ordering::Relaxed) + 1;
            if n >= TIMEOUT_BURST && matches!(self.0.locate, Locate::Sentinel { .. }) {
                // Flagged here; the next call (or this one's caller) starts the relocation.
                self.0.current.store(None);
                self.0.unanswered.store(0, Ordering::Relaxed);
            }
        }
    }
}

fn no_primary() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "no writable Redis primary known yet (asking the sentinels)",
    ))
}

/// The relocation task: find a writable primary and swap it in.
async fn relocate(weak: Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let found = match &shared.locate {
            Locate::Fixed(info) => shared.dial.manager(info.clone()).ok(),
            Locate::Sentinel {
                sentinels,
                master,
                template,
            } => match ask_sentinels(&shared.dial, sentinels, master).await {
                Some((host, port)) => writable(&shared.dial, template, host, port).await,
                None => None,
            },
        };
        if let Some(conn) = found {
            shared.current.store(Some(Arc::new(conn)));
            shared.unanswered.store(0, Ordering::Relaxed);
            shared.relocating.store(false, Ordering::Release);
            shared.found.notify_waiters();
            return;
        }
        drop(shared);
        tokio::time::sleep(RETRY).await;
    }
}

/// The first answer of a sentinel to `SENTINEL get-master-addr-by-name`.
async fn ask_sentinels(
    dial: &Dial,
    sentinels: &[ConnectionInfo],
    master: &str,
) -> Option<(String, u16)> {
    for sentinel in sentinels {
        let Ok(client) = dial.client(sentinel.clone()) else {
            continue;
        };
        let ask = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(master)
                .query_async::<Option<(String, u16)>>(&mut conn)
                .await
        };
        if let Ok(Ok(Some(address))) = tokio::time::timeout(dial.connect_timeout, ask).await {
            return Some(address);
        }
    }
    tracing::warn!(master, "no sentinel named a primary");
    None
}

/// A connection to `host:port` if it answers `ROLE` as a primary.
async fn writable(
    dial: &Dial,
    template: &ConnectionInfo,
    host: String,
    port: u16,
) -> Option<ConnectionManager> {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: None,
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    let info = template.clone().set_addr(addr);
    let mut conn = dial.manager(info).ok()?;
    let role = tokio::time::timeout(dial.connect_timeout, primary_role(&mut conn)).await;
    matches!(role, Ok(Ok(true))).then_some(conn)
}

/// Whether the server behind `conn` says it is a primary (`ROLE`).
pub async fn primary_role(conn: &mut impl ConnectionLike) -> RedisResult<bool> {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(conn).await?;
    Ok(matches!(role.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
}

fn server_code(value: &redis::Value) -> Option<&str> {
    match value {
        redis::Value::ServerError(e) => Some(e.code()),
        _ => None,
    }
}

impl ConnectionLike for Failover {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let watch = Unanswered(&self.shared, true);
            let result = conn.req_packed_command(cmd).await;
            let code = result.as_ref().ok().and_then(server_code);
            self.observe(watch, &result, code);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let watch = Unanswered(&self.shared, true);
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            let code = result
                .as_ref()
                .ok()
                .and_then(|values| values.iter().find_map(server_code));
            self.observe(watch, &result, code);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.db
    }
}
