//! [`FaultProxy`]: a TCP proxy on a free loopback port between a client and its server (Sluice and
//! Redis), which a test switches between passing bytes through and one [`Fault`] at a time, as
//! toxiproxy does: reset every connection, stall, delay, cut a reply in the middle, swallow
//! everything (a blackhole), or answer one byte at a time.
//!
//! Invariants:
//! - bytes are never reordered, duplicated or altered: a fault delays, withholds or drops them,
//!   and a connection that lost bytes (a cut reply, a blackhole) is closed, never resumed, so a
//!   client can never read a reply that belongs to another request;
//! - a fault applies to the connections already open and to those opened while it holds;
//!   [`FaultProxy::set`] takes effect within one poll tick (10 ms) on every connection;
//! - the proxy's threads end when it is dropped: every connection is closed and nothing is left
//!   listening.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a pump looks at the fault in force while it waits for bytes or for a stall to end.
const TICK: Duration = Duration::from_millis(10);

/// What the proxy does to the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Bytes pass through as they come.
    #[default]
    None,
    /// Every open connection is reset (TCP RST), and every new one as soon as it is accepted.
    Reset,
    /// Nothing moves in either direction; bytes wait in the sockets' buffers and flow, in order,
    /// once the stall ends (a network partition that heals). New connections are accepted and
    /// held the same way.
    Stall,
    /// Every chunk, in either direction, waits this long before it is passed on.
    Delay(Duration),
    /// The next reply on each connection is passed on only in part (its first half, at least one
    /// byte), then the connection is reset.
    CutReply,
    /// Everything sent either way is read and dropped: the server never sees a request, the client
    /// never gets an answer, and the connection stays open. When the fault ends, the connections
    /// that lost bytes are reset (their streams cannot resume).
    Blackhole,
    /// Replies are passed on one byte at a time, this long apart; when the fault ends, the rest
    /// of a reply goes at once.
    Trickle(Duration),
}

/// A proxy from a loopback port of its own to `upstream`, owned by the test that started it.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    fault: Mutex<Fault>,
    changed: Condvar,
    stopping: AtomicBool,
    accepted: AtomicUsize,
    next_id: AtomicU64,
    /// The connections open now.
    open: Mutex<Vec<Connection>>,
}

#[derive(Debug)]
struct Connection {
    id: u64,
    client: TcpStream,
    server: TcpStream,
    lost_bytes: Arc<AtomicBool>,
}

impl Connection {
    /// Resets both sides: no lingering, so the close is an RST, and the pumps wake up and end.
    fn reset(&self) {
        for side in [&self.client, &self.server] {
            let _ = socket2::SockRef::from(side).set_linger(Some(Duration::ZERO));
            let _ = side.shutdown(Shutdown::Both);
        }
    }
}

impl FaultProxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`, passing bytes through.
    ///
    /// # Panics
    /// If no loopback port can be bound: the test cannot run without one.
    pub fn start(upstream_port: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let port = listener.local_addr().expect("a bound address").port();
        let shared = Arc::new(Shared::default());
        let upstream = SocketAddr::from(([127, 0, 0, 1], upstream_port));
        let acceptor = {
            let shared = shared.clone();
            std::thread::spawn(move || accept_loop(&listener, upstream, &shared))
        };
        FaultProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`: the proxied server's URL, for a Redis upstream.
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Puts `fault` in force on every connection, open or to come.
    pub fn set(&self, fault: Fault) {
        let before = std::mem::replace(&mut *lock(&self.shared.fault), fault);
        self.shared.changed.notify_all();
        let open = lock(&self.shared.open);
        for c in open.iter() {
            let lost = before == Fault::Blackhole && c.lost_bytes.load(Ordering::SeqCst);
            if fault == Fault::Reset || lost {
                c.reset();
            }
        }
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        *lock(&self.shared.fault)
    }

    /// Connections accepted since the proxy started: a client that reconnected made more.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        lock(&self.shared.open).len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        for c in lock(&self.shared.open).iter() {
            c.reset();
        }
        // Wakes the acceptor, blocked in accept().
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A pump that panicked leaves plain data behind; the proxy goes on with it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: &TcpListener, upstream: SocketAddr, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let Ok(server) = TcpStream::connect(upstream) else {
            let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let connection = Connection {
            id: shared.next_id.fetch_add(1, Ordering::SeqCst),
            client,
            server,
            lost_bytes: Arc::new(AtomicBool::new(false)),
        };
        if *lock(&shared.fault) == Fault::Reset {
            connection.reset();
            continue;
        }
        let (Ok(requests), Ok(replies)) = (clone_sides(&connection), clone_sides(&connection))
        else {
            connection.reset();
            continue;
        };
        let id = connection.id;
        let lost = connection.lost_bytes.clone();
        lock(&shared.open).push(connection);
        let ((client_r, server_w), (client_w, server_r)) = (requests, replies);
        for (from, to, replies) in [(client_r, server_w, false), (server_r, client_w, true)] {
            let shared = shared.clone();
            let lost = lost.clone();
            std::thread::spawn(move || {
                pump(from, to, replies, &shared, &lost);
                close(&shared, id);
            });
        }
    }
}

fn clone_sides(c: &Connection) -> std::io::Result<(TcpStream, TcpStream)> {
    Ok((c.client.try_clone()?, c.server.try_clone()?))
}

/// Forgets connection `id` once a pump of it ended, resetting both sides so the other pump ends
/// too.
fn close(shared: &Shared, id: u64) {
    let mut open = lock(&shared.open);
    if let Some(i) = open.iter().position(|c| c.id == id) {
        open.swap_remove(i).reset();
    }
}

/// Carries bytes from `from` to `to` under the fault in force until either side closes.
/// `replies` is the server-to-client direction, where cuts and trickles apply.
fn pump(mut from: TcpStream, mut to: TcpStream, replies: bool, shared: &Shared, lost: &AtomicBool) {
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let fault = *lock(&shared.fault);
        if fault == Fault::Stall {
            let guard = lock(&shared.fault);
            let _ = shared.changed.wait_timeout(guard, TICK);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        };
        // The fault may have changed while the read waited: the bytes get the one in force now,
        // and a stall that began meanwhile holds them.
        let chunk = &buf[..n];
        let fault = loop {
            let guard = lock(&shared.fault);
            if *guard != Fault::Stall || shared.stopping.load(Ordering::SeqCst) {
                break *guard;
            }
            let _ = shared.changed.wait_timeout(guard, TICK);
        };
        let sent = match fault {
            Fault::None | Fault::Reset | Fault::Stall => to.write_all(chunk),
            Fault::Delay(wait) => {
                std::thread::sleep(wait);
                to.write_all(chunk)
            }
            Fault::Blackhole => {
                lost.store(true, Ordering::SeqCst);
                Ok(())
            }
            Fault::CutReply if replies => {
                let _ = to.write_all(&chunk[..(n / 2).max(1)]);
                return;
            }
            Fault::CutReply => to.write_all(chunk),
            Fault::Trickle(gap) if replies => trickle(&mut to, chunk, gap, shared),
            Fault::Trickle(_) => to.write_all(chunk),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Writes `chunk` one byte every `gap` while the trickle lasts, and what is left at once when it
/// ends (a slow link that heals).
fn trickle(
    to: &mut TcpStream,
    chunk: &[u8],
    gap: Duration,
    shared: &Shared,
) -> std::io::Result<()> {
    for (i, byte) in chunk.iter().enumerate() {
        if !matches!(*lock(&shared.fault), Fault::Trickle(_)) {
            return to.write_all(&chunk[i..]);
        }
        std::thread::sleep(gap);
        to.write_all(std::slice::from_ref(byte))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
