//! Test support: real Redis servers on free loopback ports, owned by the tests that start them.
//!
//! # Layout
//! - [`RedisServer`] (this file): one `redis-server`, or one `valkey-server`
//!   ([`RedisServer::start_valkey`]; [`valkey`] says where its binaries are);
//! - [`cluster`]: [`RedisCluster`], 3 primaries and 3 replicas; [`reshard`]: moving its slots
//!   and failing it over as planned;
//! - [`sentinel`]: [`RedisSentinel`], a primary, a replica and three sentinels;
//! - [`tls`]: [`TlsFiles`] (a CA and certificates made on the spot) and [`TlsRedis`];
//! - [`member`]: one process of a multi-process set-up, which tests kill, pause and restart;
//! - [`browser`]: [`Browser`], a `chromedriver` driving headless `chromium` (dashboard tests).
//! - [`nginx`]: [`Nginx`], a real nginx from a generated config, in a prefix of its own;
//! - [`fault_proxy`]: [`FaultProxy`], a TCP proxy that resets, stalls, delays, cuts replies,
//!   swallows or trickles what it carries, for store-fault tests;
//! - [`otlp`]: [`OtlpReceiver`], an OTLP/gRPC trace receiver standing in for a collector;
//! - [`docs`]: README.md and the book's chapters, for tests that hold the docs to the code.
//!
//! [`RedisServer::start`] spawns `redis-server` with persistence off, waits until it answers
//! `PING`, and kills it on drop. Tests that need a store fault call [`RedisServer::stop`] and
//! [`RedisServer::restart`] (same port). A missing `redis-server` is a test failure with a message
//! saying how to install it, never a silent skip.

pub mod browser;
pub mod cluster;
pub mod docs;
pub mod fault_proxy;
pub mod member;
pub mod nginx;
pub mod otlp;
pub mod reshard;
pub mod sentinel;
pub mod tls;
pub mod valkey;

pub use browser::Browser;
pub use cluster::RedisCluster;
pub use fault_proxy::{Fault, FaultProxy};
pub use member::{Credentials, Member, Members, wait_until};
pub use nginx::Nginx;
pub use otlp::{OtlpReceiver, ReceivedSpan};
pub use sentinel::{RedisSentinel, SentinelAuth};
pub use tls::{TlsFiles, TlsRedis};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server a [`RedisServer`] runs: both speak the same protocol and run the same scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `redis-server` from the `PATH`.
    Redis,
    /// `valkey-server` from [`valkey::server`].
    Valkey,
}

impl Flavour {
    fn server(self) -> PathBuf {
        match self {
            Flavour::Redis => PathBuf::from("redis-server"),
            Flavour::Valkey => valkey::server(),
        }
    }

    fn cli(self) -> PathBuf {
        match self {
            Flavour::Redis => PathBuf::from("redis-cli"),
            Flavour::Valkey => valkey::cli(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flavour::Redis => "redis",
            Flavour::Valkey => "valkey",
        }
    }
}

/// A `redis-server` (or `valkey-server`) process started for one test.
#[derive(Debug)]
pub struct RedisServer {
    flavour: Flavour,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    ///
    /// # Panics
    /// If `redis-server` is not installed or does not come up: the test cannot run without it.
    pub fn start() -> RedisServer {
        RedisServer::start_as(Flavour::Redis)
    }

    /// Starts a `valkey-server` (see [`valkey`]) on a free port and waits until it answers.
    ///
    /// # Panics
    /// If the binary is missing or the server does not come up.
    pub fn start_valkey() -> RedisServer {
        RedisServer::start_as(Flavour::Valkey)
    }

    /// Starts a server of `flavour` on a free port and waits until it answers.
    ///
    /// # Panics
    /// If its binary is missing or it does not come up.
    pub fn start_as(flavour: Flavour) -> RedisServer {
        let mut last_error = String::new();
        // A free port can be taken by someone else between probing and binding; retry.
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "sluice-{}-{}-{port}",
                flavour.name(),
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("the temp dir is writable");
            let mut server = RedisServer {
                flavour,
                port,
                dir,
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start {}-server: {last_error}", flavour.name());
    }

    fn spawn(&mut self) -> Result<(), String> {
        let program = self.flavour.server();
        let name = self.flavour.name();
        let child = Command::new(&program)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    panic!(
                        "redis-server is not installed; tests that need Redis cannot run. \
                         Run scripts/test (it installs it) or `apt-get install redis-server`."
                    )
                }
                format!("spawning {}: {e}", program.display())
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "{name}-server exited with {status} on port {}",
                    self.port
                ));
            }
            if self.ping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        Err(format!(
            "{name}-server did not answer PING on port {} within 10 s",
            self.port
        ))
    }

    /// Whether the server answers `PING` right now.
    pub fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut buf).is_ok()
            && &buf == b"+PONG\r\n"
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (as a crash would) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server from running (`SIGSTOP`), as a hung host would: connections stay open
    /// and nothing is answered until [`RedisServer::resume`].
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Lets a paused server run again (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, name: &str) {
        let pid = self.pid().expect("the server is running");
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Starts the server again on the same port (empty: persistence is off).
    ///
    /// # Panics
    /// If it does not come back within 10 s.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("could not restart {}-server: {e}", self.flavour.name());
        }
    }

    /// Runs `redis-cli -p PORT ARGS...` (`valkey-cli` for Valkey) and returns its output, for
    /// tests that inspect keys.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(self.flavour.cli())
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli is installed with redis-server (package redis-tools), valkey-cli beside valkey-server");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl RedisServer {
    /// How many times Redis has run `command` (lower case, e.g. `evalsha`) since it started (or
    /// since `CONFIG RESETSTAT`), from `INFO commandstats`: whether a test's request reached Redis
    /// at all.
    pub fn command_calls(&self, command: &str) -> u64 {
        self.command_stat(command, "calls")
    }

    /// One figure of `command`'s line in `INFO commandstats` (`calls`, `usec`, …); 0 when it has
    /// not run.
    pub fn command_stat(&self, command: &str, field: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:");
        let field = format!("{field}=");
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|stats| {
                stats
                    .split(',')
                    .find_map(|f| f.strip_prefix(field.as_str()))
            })
            .map_or(0, |n| {
                n.parse().expect("INFO commandstats figures are numbers")
            })
    }

    /// How many decisions Redis has run: the scripts (`EVALSHA`) and the function (`FCALL`).
    pub fn decision_calls(&self) -> u64 {
        self.command_calls("evalsha") + self.command_calls("fcall")
    }

    /// The time Redis spent running decisions, in µs (wall time inside the calls, so a call
    /// during which the machine stopped Redis counts that pause too).
    pub fn decision_usec(&self) -> u64 {
        self.command_stat("evalsha", "usec") + self.command_stat("fcall", "usec")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The keys a limiter's decisions wrote, from the lines of a `SCAN` (`redis-cli --scan`): every
/// key but the key format's marker, `{prefix}:format`, which a store writes once per prefix and
/// never expires.
pub fn decision_keys(scan: &str) -> Vec<String> {
    scan.lines()
        .filter(|key| !key.ends_with(":format"))
        .map(str::to_string)
        .collect()
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral loopback port")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_stops_and_restarts() {
        let mut server = RedisServer::start();
        assert_ne!(server.port(), 6379);
        assert!(server.ping());
        assert_eq!(server.cli(&["SET", "k", "v"]), "OK");
        server.stop();
        assert!(!server.ping());
        server.restart();
        assert!(server.ping());
        assert_eq!(server.cli(&["GET", "k"]), "", "restarted empty");
    }

    #[test]
    fn starts_valkey_and_says_so() {
        let server = RedisServer::start_valkey();
        assert!(server.ping());
        let info = server.cli(&["INFO", "server"]);
        assert!(info.contains("valkey_version:"), "{info}");
    }
}
