//! A headless Chromium driven over WebDriver, for tests of the dashboard in a real browser.
//!
//! [`Browser::start`] runs `chromedriver` on a free loopback port; [`Browser::session`] opens a
//! headless `chromium` with a fresh profile and returns a [`fantoccini::Client`]. `chromedriver`
//! runs in its own process group under a small `sh` guard holding a pipe: when the [`Browser`] is
//! dropped, or the test process dies, the pipe closes and the guard kills the whole group, so no
//! browser outlives its test. A missing `chromium` or `chromedriver` is a failure that says what
//! to install.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::member::{fresh_dir, wait_until, which};

/// Start `chromedriver` as the leader of a new process group, print its pid, wait for stdin to
/// close, then kill the group (the driver and every browser process it started).
const GUARD: &str = r#"setsid "$0" "$@" >/dev/null 2>&1 & pid=$!; echo "$pid"; read _; kill -9 -- "-$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null; wait"#;

/// Chromium flags for a quiet, isolated, headless run: no sandbox (tests may run as root), no
/// GPU, and no traffic of its own (updates, sync, QUIC probes) to anything but the page under test.
const FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
];

/// A `chromedriver` on a free port, with a fresh browser profile directory.
#[derive(Debug)]
pub struct Browser {
    port: u16,
    profile: PathBuf,
    guard: Option<(Child, ChildStdin)>,
}

impl Browser {
    /// Starts `chromedriver` and waits until it is ready.
    ///
    /// # Panics
    /// If `chromium` or `chromedriver` is missing, or the driver does not come up within 30 s (a
    /// busy machine can take that long to start it).
    pub fn start() -> Browser {
        which("chromium");
        which("chromedriver");
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = crate::free_port();
            let mut guard = Command::new("sh")
                .arg("-c")
                .arg(GUARD)
                .arg("chromedriver")
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("sh runs");
            let stdin = guard.stdin.take().expect("piped stdin");
            let mut pid = String::new();
            let _ = BufReader::new(guard.stdout.take().expect("piped stdout")).read_line(&mut pid);
            let browser = Browser {
                port,
                profile: fresh_dir("chromium-profile"),
                guard: Some((guard, stdin)),
            };
            if wait_until(Duration::from_secs(30), || browser.ready()) {
                return browser;
            }
            last_error = format!(
                "chromedriver (pid {}) did not answer on port {port}",
                pid.trim()
            );
        }
        panic!("could not start chromedriver: {last_error}");
    }

    /// The driver's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether `GET /status` says the driver is ready.
    fn ready(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        // The driver may keep the connection open: judge what arrived before EOF or the timeout.
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).contains("\"ready\":true")
    }

    /// A new headless Chromium session with a fresh profile.
    ///
    /// # Panics
    /// If the browser cannot be started.
    pub async fn session(&self) -> fantoccini::Client {
        let profile = self.profile.join(format!(
            "session-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": chromium_binary(), "args": args }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        fantoccini::ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url())
            .await
            .unwrap_or_else(|e| panic!("chromium did not start under chromedriver: {e}"))
    }
}

/// Debian's `chromium` is a wrapper script; chromedriver needs the browser binary itself.
fn chromium_binary() -> String {
    ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap_or("chromium")
        .to_string()
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some((mut guard, stdin)) = self.guard.take() {
            drop(stdin);
            let _ = guard.wait();
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
