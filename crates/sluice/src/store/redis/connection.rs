//! The connection a [`RedisStore`](super::RedisStore) talks through, whatever the deployment:
//! one server or a Sentinel-managed primary ([`Failover`]), or a Redis Cluster (the redis crate's
//! async cluster client, which refreshes its slot map when a node fails or is demoted, and
//! [`redirected`], which follows `MOVED` / `ASK` and asks again on `TRYAGAIN` for as long as a
//! reply may take).
//!
//! [`RedisConnection`] is a [`ConnectionLike`], so commands and scripts run on it unchanged; a
//! script call is routed by its first key, and `NOSCRIPT` reloads the script on the node that
//! lacked it (`SCRIPT LOAD` goes to every node).

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisConnectionInfo,
    RedisResult, ServerErrorKind, TlsMode,
};

use super::failover::{Dial, Failover, Locate, primary_role};
use super::url::{RedisUrl, Topology};

/// A connection to the deployment a URL names. Cheap to clone.
#[derive(Clone)]
pub enum RedisConnection {
    /// One primary at a time (a single server, or the one the sentinels name).
    Primary(Failover),
    /// A Redis Cluster.
    Cluster {
        /// The cluster client's connection.
        connection: ClusterConnection,
        /// How long one call keeps asking a slot that answers `TRYAGAIN` (the response
        /// timeout): a resharding in progress, not a failure.
        patience: Duration,
    },
}

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisConnection::Primary(p) => p.fmt(f),
            RedisConnection::Cluster { .. } => f.write_str("ClusterConnection"),
        }
    }
}

impl RedisConnection {
    /// Opens (lazily) a connection to what `url` names.
    pub fn open(url: &RedisUrl, dial: Dial) -> RedisResult<RedisConnection> {
        let node = |host: &str, port: u16| node_info(url, host, port);
        match &url.topology {
            Topology::Single => {
                let (host, port) = &url.nodes[0];
                Ok(RedisConnection::Primary(Failover::new(
                    Locate::Fixed(node(host, *port)?),
                    dial,
                )?))
            }
            Topology::Sentinel { master } => {
                let (host, port) = &url.nodes[0];
                let template = node(host, *port)?;
                // Sentinels are asked without the data nodes' credentials and database, with
                // their own when the URL gives them.
                let mut asked_as = RedisConnectionInfo::default();
                if let Some(user) = &url.sentinel_username {
                    asked_as = asked_as.set_username(user);
                }
                if let Some(password) = &url.sentinel_password {
                    asked_as = asked_as.set_password(password);
                }
                let sentinels = url
                    .nodes
                    .iter()
                    .map(|(h, p)| node(h, *p).map(|i| i.set_redis_settings(asked_as.clone())))
                    .collect::<RedisResult<Vec<_>>>()?;
                Ok(RedisConnection::Primary(Failover::new(
                    Locate::Sentinel {
                        sentinels,
                        master: master.clone(),
                        template,
                    },
                    dial,
                )?))
            }
            Topology::Cluster => {
                let seeds = url
                    .nodes
                    .iter()
                    .map(|(h, p)| node(h, *p))
                    .collect::<RedisResult<Vec<_>>>()?;
                let mut builder = ClusterClientBuilder::new(seeds)
                    .connection_timeout(dial.connect_timeout)
                    .response_timeout(dial.response_timeout)
                    // No retries of the client's own: `redirected` follows `ASK`, `MOVED` and
                    // `TRYAGAIN`; while a primary fails over, the fail policy answers. The slot
                    // map is still refreshed on every failure.
                    .retries(0)
                    .min_retry_wait(10)
                    .max_retry_wait(100);
                if url.tls {
                    builder = builder.tls(TlsMode::Secure);
                    if let Some(certs) = dial.certificates.clone() {
                        builder = builder.certs(certs);
                    }
                }
                let client = builder.build()?;
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(dial.connect_timeout)
                    .set_response_timeout(dial.response_timeout);
                Ok(RedisConnection::Cluster {
                    connection: client.get_pending_async_connection_with_config(config),
                    patience: dial.response_timeout,
                })
            }
        }
    }

    /// Whether every slot (Cluster) or the primary (otherwise) takes writes now: `ROLE` is
    /// `master`, and on a Cluster `cluster_state:ok` and every primary answers.
    pub async fn writable(&self) -> Result<(), String> {
        match self {
            RedisConnection::Primary(p) => {
                let mut conn = p.clone();
                match primary_role(&mut conn).await {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        p.relocate();
                        Err("the Redis server is a replica, not a writable primary".into())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            RedisConnection::Cluster { connection: c, .. } => {
                let mut conn = c.clone();
                let info: String = conn
                    .route_command(
                        redis::cmd("CLUSTER").arg("INFO").clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                    )
                    .await
                    .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                    .map_err(|e| e.to_string())?;
                if !info.contains("cluster_state:ok") {
                    return Err("the Redis Cluster does not serve every slot".into());
                }
                // Every primary of the slot map, each asked directly.
                let primaries = self.cluster_primaries().await.map_err(|e| e.to_string())?;
                let pings = primaries.iter().map(|(host, port)| async move {
                    self.on_node(redis::cmd("PING"), host, *port)
                        .await
                        .map_err(|e| format!("Redis Cluster primary {host}:{port}: {e}"))
                });
                for answer in futures::future::join_all(pings).await {
                    answer?;
                }
                Ok(())
            }
        }
    }

    /// `host:port` of every Cluster primary (empty for a single primary).
    pub async fn cluster_primaries(&self) -> RedisResult<Vec<(String, u16)>> {
        let RedisConnection::Cluster { connection: c, .. } = self else {
            return Ok(Vec::new());
        };
        let mut conn = c.clone();
        let slots = conn
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            )
            .await?;
        // Each entry: [start, end, [host, port, id, …], replicas…].
        let ranges: Vec<Vec<redis::Value>> = redis::from_redis_value(slots)?;
        let mut primaries: Vec<(String, u16)> = ranges
            .into_iter()
            .filter_map(|range| {
                let primary = range.into_iter().nth(2)?;
                let (host, port): (String, u16) =
                    match redis::from_redis_value::<Vec<redis::Value>>(primary) {
                        Ok(fields) if fields.len() >= 2 => (
                            redis::from_redis_value(fields[0].clone()).ok()?,
                            redis::from_redis_value(fields[1].clone()).ok()?,
                        ),
                        _ => return None,
                    };
                Some((host, port))
            })
            .collect();
        primaries.sort();
        primaries.dedup();
        Ok(primaries)
    }

    /// Runs `cmd` on the Cluster node at `host:port`.
    pub async fn on_node(
        &self,
        cmd: redis::Cmd,
        host: &str,
        port: u16,
    ) -> RedisResult<redis::Value> {
        match self {
            RedisConnection::Cluster { connection: c, .. } => {
                c.clone()
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.to_string(),
                            port,
                        }),
                    )
                    .await
            }
            RedisConnection::Primary(p) => cmd.query_async(&mut p.clone()).await,
        }
    }

    /// Whether this is a Cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster { .. })
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            RedisConnection::Primary(p) => p.req_packed_command(cmd),
            RedisConnection::Cluster {
                connection,
                patience,
            } => Box::pin(redirected(connection, cmd, *patience)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            RedisConnection::Primary(p) => p.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster { connection: c, .. } => {
                c.req_packed_commands(pipeline, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Primary(p) => p.get_db(),
            RedisConnection::Cluster { connection: c, .. } => c.get_db(),
        }
    }
}

/// Redirections one try follows at most: a slot on the move answers `ASK` once, a stale slot map
/// `MOVED` once.
const MAX_REDIRECTIONS: u32 = 5;

/// The first pause before a call answered "try again" is asked again; each next one doubles, up
/// to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Runs `cmd` on the Cluster, following redirections.
///
/// The cluster client follows `ASK` itself, but it sends `ASKING` as a request of its own and the
/// command only once that has been answered; on a connection shared by concurrent calls another
/// call's command can come in between, take the `ASKING`, and leave this one to a `MOVED` back to
/// the node that no longer has the key (under load, most calls on a migrating slot failed that
/// way, and some hung until the response timeout). Here `ASKING` and the command go in one
/// pipeline, written as one piece, so nothing comes between them. `MOVED` goes to the node it
/// names (the client refreshes its slot map meanwhile).
///
/// `TRYAGAIN` is asked again, after a pause that grows, for up to `patience`. Redis answers
/// `TRYAGAIN` to a call naming several keys of a slot on the move when some of them are on the
/// other node or do not exist yet: the general decision names a limit's state,
/// block and violations keys, so on a migrating slot every such call gets it from the first
/// `SETSLOT … MIGRATING` until the last `SETSLOT … NODE`, however long the operator (or a busy
/// machine) takes between the steps. A planned move must not fail decisions, and the answer is
/// not a failure of the store: a fixed number of tries failed them once a step took longer than
/// the tries' pauses added up. The limiter's own deadline still ends the wait.
///
/// A redirection to a node with no connection yet is asked again the same way. A `MOVED` or
/// `ASK` is followed to the node it names by address, and the client does not connect to a node
/// on such a route: after a failover, or a move to a node it has not connected to, it answers
/// "connection not found" until the slot-map refresh the redirection set off has connected the
/// node (a planned `CLUSTER FAILOVER` under load once failed every decision of a process that
/// way, its breaker open).
async fn redirected(
    c: &mut ClusterConnection,
    cmd: &redis::Cmd,
    patience: Duration,
) -> RedisResult<redis::Value> {
    let started = tokio::time::Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        let (answer, unconnected) = followed(c, cmd).await;
        let moving = unconnected
            || matches!(
                &answer,
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::TryAgain)
            );
        if !moving || started.elapsed() + pause > patience {
            return answer;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// One try of `cmd`: sent where the slot map says, then to where `ASK` and `MOVED` answers send
/// it; and whether it ended at a node the client has no connection to.
async fn followed(
    c: &mut ClusterConnection,
    cmd: &redis::Cmd,
) -> (RedisResult<redis::Value>, bool) {
    let mut answer = c.req_packed_command(cmd).await;
    let mut redirected = false;
    for _ in 0..MAX_REDIRECTIONS {
        let error = match &answer {
            Err(error) => error,
            Ok(_) => break,
        };
        let to = error
            .redirect_node()
            .and_then(|(node, _slot)| node.rsplit_once(':'))
            .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)));
        answer = match (error.kind(), to) {
            (ErrorKind::Server(ServerErrorKind::Ask), Some((host, port))) => {
                let mut pipeline = redis::pipe();
                pipeline.cmd("ASKING").add_command(cmd.clone());
                let route = SingleNodeRoutingInfo::ByAddress { host, port };
                match c.route_pipeline(pipeline, 1, 1, route).await {
                    Ok(mut answers) => answers
                        .pop()
                        .map_or_else(|| Err(error.clone()), redis::Value::extract_error),
                    Err(e) => Err(e),
                }
            }
            (ErrorKind::Server(ServerErrorKind::Moved), Some((host, port))) => {
                let route = SingleNodeRoutingInfo::ByAddress { host, port };
                c.route_command(cmd.clone(), RoutingInfo::SingleNode(route))
                    .await
            }
            _ => break,
        };
        redirected = true;
    }
    let unconnected =
        redirected && matches!(&answer, Err(e) if e.kind() == ErrorKind::ClusterConnectionNotFound);
    (answer, unconnected)
}

/// How to reach one node of the deployment `url` names: its TLS, credentials and database.
pub fn node_info(url: &RedisUrl, host: &str, port: u16) -> RedisResult<ConnectionInfo> {
    let addr = if url.tls {
        ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host.to_string(), port)
    };
    let mut redis = RedisConnectionInfo::default().set_db(url.db);
    if let Some(user) = &url.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &url.password {
        redis = redis.set_password(password);
    }
    Ok(addr.into_connection_info()?.set_redis_settings(redis))
}
