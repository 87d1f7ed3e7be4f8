//! Test helpers: a temp directory, the real `sluice` binary started on a free port with a given
//! config and store URL, and bounded polling.
//!
//! The server is started with `--listen 127.0.0.1:0`; its log line "listening on http://ADDR"
//! gives the port. Every wait polls with a deadline, never a fixed sleep.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-cli-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes a file in the directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("the temp dir is writable");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The variables `sluice serve` reads (besides the file's `admin_token_env`): a test sets the ones
/// it means, none leaks in from the caller's environment.
pub const SERVE_VARIABLES: [&str; 6] = [
    "SLUICE_CONFIG",
    "SLUICE_LISTEN",
    "SLUICE_GRPC_LISTEN",
    "SLUICE_STORE",
    "SLUICE_SHUTDOWN_TIMEOUT",
    "SLUICE_LOG_FORMAT",
];

/// The OpenTelemetry variables a server could inherit: cleared (empty is unset to it) unless a
/// test sets them.
pub const OTEL_VARS: [&str; 4] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// The binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// How to start a server.
pub struct Options<'a> {
    /// `--store`, when set (the store URL is a parameter so the suite can run on Redis too).
    pub store: Option<&'a str>,
    /// Admin token in SLUICE_ADMIN_TOKEN (the configs name that variable).
    pub admin_token: Option<&'a str>,
    /// A file in the config's directory that also gets every log line, as `2>> dir/sluice.log`
    /// would (the watcher sees each write).
    pub log_file: Option<&'a str>,
    /// `--listen`, when set (without it the environment or the file says).
    pub listen: Option<&'a str>,
    /// Whether `--config` names the file written (else `SLUICE_CONFIG` in `env` names one).
    pub config_flag: bool,
    /// More arguments after `serve`'s own.
    pub args: &'a [&'a str],
    /// Environment variables to set; the service's own (`SLUICE_*`) and the OpenTelemetry ones
    /// are otherwise removed.
    pub env: Vec<(&'a str, String)>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            store: None,
            admin_token: Some(ADMIN_TOKEN),
            log_file: None,
            listen: Some("127.0.0.1:0"),
            config_flag: true,
            args: &[],
            env: Vec::new(),
        }
    }
}

/// A running `sluice serve`, killed on drop.
pub struct Server {
    child: Child,
    pub base: String,
    pub config: PathBuf,
    pub dir: TempDir,
    log: Arc<Mutex<Vec<String>>>,
    pub http: reqwest::Client,
}

impl Server {
    /// Starts the binary on `config` (YAML) with defaults: memory store, admin token set.
    pub fn start(config: &str) -> Server {
        Server::start_with(config, "sluice.yaml", Options::default())
    }

    /// Starts the binary on `config` (YAML) with the store at `store` (`--store`), admin token set.
    pub fn start_on(config: &str, store: &str) -> Server {
        Server::start_with(
            config,
            "sluice.yaml",
            Options {
                store: Some(store),
                ..Options::default()
            },
        )
    }

    pub fn start_with(config: &str, file_name: &str, options: Options<'_>) -> Server {
        let dir = TempDir::new();
        let path = dir.write(file_name, config);
        let mut command = sluice();
        command
            .args(["serve", "--log-level", "info"])
            .args(options.args)
            .env_remove("RUST_LOG")
            .env_remove("SLUICE_ADMIN_TOKEN")
            .envs(OTEL_VARS.iter().map(|v| (v, "")))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if options.config_flag {
            command.arg("--config").arg(&path);
        }
        if let Some(listen) = options.listen {
            command.args(["--listen", listen]);
        }
        if let Some(store) = options.store {
            command.args(["--store", store]);
        }
        for var in SERVE_VARIABLES {
            command.env_remove(var);
        }
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
        if let Some(token) = options.admin_token {
            command.env("SLUICE_ADMIN_TOKEN", token);
        }
        let mut child = command.spawn().expect("the sluice binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let lines = log.clone();
        let mut tee = options.log_file.map(|name| {
            std::fs::File::create(dir.path().join(name)).expect("the log file can be created")
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(file) = tee.as_mut() {
                    let _ = writeln!(file, "{line}");
                }
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    // Text or JSON lines: the address ends at a space or a quote.
                    let addr = rest
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let _ = tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start: {:?}", log.lock().unwrap());
            }
        };
        Server {
            child,
            base: format!("http://{addr}"),
            config: path,
            dir,
            log,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Sends a signal by name (`HUP`, `TERM`).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be waited on") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// POSTs a JSON body; returns status, headers and the JSON answer.
    pub async fn post(&self, path: &str, body: &str) -> Answer {
        self.send(self.http.post(self.url(path)).body(body.to_string()))
            .await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.http.get(self.url(path))).await
    }

    /// An admin request with the given token (None: no Authorization header).
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &str,
        token: Option<&str>,
    ) -> Answer {
        let mut request = self
            .http
            .request(method, self.url(path))
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request).await
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        Answer {
            status,
            headers,
            json,
            text,
        }
    }

    /// One decision on `/v1/check`.
    pub async fn check(&self, rule: &str, attributes: serde_json::Value) -> Answer {
        let body = serde_json::json!({ "rule": rule, "attributes": attributes });
        self.post("/v1/check", &body.to_string()).await
    }

    /// The value of a metric line that starts with `series` (0 when absent).
    pub async fn metric(&self, series: &str) -> f64 {
        let text = self.get("/metrics").await.text;
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub json: serde_json::Value,
    pub text: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `error.message` of a JSON error answer.
    pub fn error(&self) -> &str {
        self.json["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no JSON error in {self:?}"))
    }

    /// The `error.code` of a JSON error answer.
    pub fn code(&self) -> &str {
        self.json["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no JSON error code in {self:?}"))
    }
}

/// Polls `probe` until it returns Some, or fails after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// How long a test waits for something it caused to show (a reload applied, a listener up, a
/// store back): a bound on waiting, never a measure of speed, so it is generous. A reload
/// applies within 150 ms of debounce and a parse on a quiet machine; a loaded one may take
/// seconds, and a test that waits passes as soon as the change shows.
pub const WITHIN: Duration = Duration::from_secs(60);

/// The version `/v1/rules` reports for a file's text (its SHA-1).
pub fn version_of(text: &str) -> String {
    sha1_smol::Sha1::from(text.as_bytes()).digest().to_string()
}

/// Waits until the server reports `version` as the rules in force.
pub async fn wait_for_version(server: &Server, version: &str) {
    eventually(WITHIN, "the new version", || async {
        (server.get("/v1/rules").await.json["version"] == version).then_some(())
    })
    .await;
}

/// A small config used by most tests.
pub const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
rules:
  employee:
    message: slow down
    limits:
      - { by: [id], rate: 5/10s, algorithm: sliding_log }
  login:
    limits:
      - { name: per_ip, by: [ip], rate: 2/1m, algorithm: sliding_window, block: 15m }
  pair:
    limits:
      - { by: [member], rate: 2/120s, algorithm: sliding_log }
      - { by: [ip], rate: 3/120s, algorithm: sliding_log }
  bucket:
    limits:
      - { by: [ip], rate: 10/1s, algorithm: token_bucket, burst: 4 }
  shaping:
    limits:
      - { by: [tenant], rate: 10/1s, algorithm: leaky_bucket, burst: 5 }
  off:
    enabled: false
    limits:
      - { by: [id], rate: 1/1m }
  jobs:
    limits:
      - { by: [tenant], algorithm: concurrency, max_leases: 2, lease: 30s }
";
