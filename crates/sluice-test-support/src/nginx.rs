//! A real nginx (Debian's `nginx-light` or `nginx`) on a free loopback port, owned by one test.
//!
//! [`Nginx::start`] writes the config the test generates for a port into a prefix directory of
//! its own (config, pid file, logs and temp files all live there: `-p PREFIX -e error.log`),
//! runs `nginx -g 'daemon off; master_process off;'` in the foreground as a child, waits until
//! the port accepts connections, and stops it on drop. Without a master process nginx is one
//! process, the child itself: killing it leaves no worker behind to hold ports or files. No system service is used or touched. A missing nginx is a
//! test failure saying how to install it, never a silent skip.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::free_port;

/// Where Debian installs the binary (outside a normal user's PATH).
const DEBIAN_NGINX: &str = "/usr/sbin/nginx";

/// An nginx process started for one test.
#[derive(Debug)]
pub struct Nginx {
    port: u16,
    prefix: PathBuf,
    child: Child,
}

impl Nginx {
    /// Starts nginx on a free port with the config `config(port)` returns, and waits until it
    /// accepts connections. Relative paths in the config resolve under the prefix directory.
    ///
    /// # Panics
    /// If nginx is not installed, refuses the config, or does not come up.
    pub fn start(config: impl Fn(u16) -> String) -> Nginx {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let mut last_error = String::new();
        // A free port can be taken between probing and binding; retry on a new one.
        for _ in 0..5 {
            let port = free_port();
            let prefix = std::env::temp_dir().join(format!(
                "sluice-nginx-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&prefix);
            std::fs::create_dir_all(&prefix).expect("the temp dir is writable");
            // Workers may run as an unprivileged user: let them write temp files.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&prefix, std::fs::Permissions::from_mode(0o777));
            }
            let path = prefix.join("nginx.conf");
            std::fs::write(&path, config(port)).expect("the temp dir is writable");
            match spawn(&prefix, &path, port) {
                Ok(child) => {
                    return Nginx {
                        port,
                        prefix,
                        child,
                    };
                }
                Err(error) => {
                    last_error = error;
                    let _ = std::fs::remove_dir_all(&prefix);
                }
            }
        }
        panic!("could not start nginx: {last_error}");
    }

    /// The port nginx listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The error log so far, for assertion messages.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

/// The nginx binary: on PATH, else where Debian puts it.
fn binary() -> PathBuf {
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("nginx");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from(DEBIAN_NGINX)
}

fn spawn(prefix: &Path, config: &Path, port: u16) -> Result<Child, String> {
    let nginx = binary();
    if !nginx.is_file() {
        panic!(
            "nginx is not installed ({} not found); tests that go through nginx cannot run. \
             Run scripts/test (it installs it) or `apt-get install nginx-light`.",
            nginx.display()
        );
    }
    let mut child = Command::new(&nginx)
        .arg("-p")
        .arg(prefix)
        .arg("-e")
        .arg(prefix.join("error.log"))
        .arg("-c")
        .arg(config)
        .args(["-g", "daemon off; master_process off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", nginx.display()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            let log = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
            return Err(format!(
                "nginx exited with {status} on port {port}: {stderr}{log}"
            ));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "nginx did not accept connections on port {port} within 10 s"
    ))
}
