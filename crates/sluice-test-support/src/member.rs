//! One Redis process (a `redis-server` or a `redis-sentinel`) of a multi-process set-up, which a
//! test can kill, pause, resume and restart.
//!
//! The process runs under a tiny `sh` guard whose standard input is a pipe held by this
//! [`Member`]: when the member is dropped — or the test process dies, even by `SIGKILL`, or exits
//! with the member still in a `static` shared by the tests of one binary — the pipe closes, the
//! guard's `read` returns and it kills the server. No server outlives its test binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The guard: start the server in the background, print its pid, wait for stdin to close, kill
/// it. `$0` is the program, the rest its arguments.
const GUARD: &str = r#"prog="$0"; "$prog" "$@" >/dev/null 2>&1 & pid=$!; echo "$pid"; read _; kill -9 "$pid" 2>/dev/null; wait"#;

/// A set-up of several members (a cluster, a Sentinel set-up) whose members a test kills,
/// pauses, resumes and restarts by port.
pub trait Members {
    /// The member listening on `port`.
    ///
    /// # Panics
    /// If no member does.
    fn member(&mut self, port: u16) -> &mut Member;

    /// Kills the member on `port` (as a crash would).
    fn kill(&mut self, port: u16) {
        self.member(port).kill();
    }

    /// Pauses the member on `port` (`SIGSTOP`).
    fn pause(&mut self, port: u16) {
        self.member(port).pause();
    }

    /// Resumes a paused member.
    fn resume(&mut self, port: u16) {
        self.member(port).resume();
    }

    /// Starts a killed member again with its original arguments. A cluster node rejoins with its
    /// saved cluster configuration; a Sentinel set-up's old primary starts as a primary and the
    /// sentinels turn it into a replica of the new one.
    ///
    /// # Panics
    /// If it does not come back within 10 s.
    fn restart(&mut self, port: u16) {
        if let Err(e) = self.member(port).restart() {
            panic!("could not restart the member on port {port}: {e}");
        }
    }
}

/// One server process on a loopback port.
#[derive(Debug)]
pub struct Member {
    program: &'static str,
    args: Vec<String>,
    port: u16,
    pid: Option<u32>,
    guard: Option<(Child, ChildStdin)>,
    credentials: Option<Credentials>,
}

impl Member {
    /// Starts `program args…` (which must listen on `port`) and waits until it answers `PING`.
    ///
    /// # Panics
    /// If the program is not installed (with the package to install) or does not answer within
    /// 10 s.
    pub fn start(program: &'static str, args: Vec<String>, port: u16) -> Result<Member, String> {
        let mut member = Member {
            program,
            args,
            port,
            pid: None,
            guard: None,
            credentials: None,
        };
        member.spawn()?;
        Ok(member)
    }

    fn spawn(&mut self) -> Result<(), String> {
        which(self.program);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(GUARD)
            .arg(self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning sh for {}: {e}", self.program))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .map_err(|e| format!("reading the pid of {}: {e}", self.program))?;
        let pid: u32 = line
            .trim()
            .parse()
            .map_err(|_| format!("{} printed no pid: {line:?}", self.program))?;
        self.pid = Some(pid);
        self.guard = Some((child, stdin));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !self.alive() {
                self.stop();
                return Err(format!("{} exited on port {}", self.program, self.port));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        Err(format!(
            "{} did not answer PING on port {} within 10 s",
            self.program, self.port
        ))
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the process exists (paused counts as alive).
    pub fn alive(&self) -> bool {
        self.pid.is_some_and(|pid| signal(pid, "0"))
    }

    /// Whether it answers `PING` now.
    pub fn ping(&self) -> bool {
        ping(self.port)
    }

    /// Kills it as a crash would (`SIGKILL`) and waits until it is gone.
    pub fn kill(&mut self) {
        self.stop();
    }

    /// Stops it from running (`SIGSTOP`): connections stay open, nothing is answered.
    pub fn pause(&self) {
        if let Some(pid) = self.pid {
            signal(pid, "STOP");
        }
    }

    /// Lets a paused member run again (`SIGCONT`).
    pub fn resume(&self) {
        if let Some(pid) = self.pid {
            signal(pid, "CONT");
        }
    }

    /// Starts it again with the same arguments (and the files it left in its directory).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn()
    }

    /// Runs `redis-cli -p PORT ARGS…` against it and returns the trimmed output.
    pub fn cli(&self, args: &[&str]) -> String {
        cli_as(self.port, self.credentials.as_ref(), args)
    }

    /// Makes [`Member::cli`] authenticate as `credentials` from now on.
    pub fn set_credentials(&mut self, credentials: Option<Credentials>) {
        self.credentials = credentials;
    }

    fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            signal(pid, "CONT");
            signal(pid, "KILL");
            let deadline = Instant::now() + Duration::from_secs(5);
            while signal(pid, "0") && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some((mut child, stdin)) = self.guard.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends `kill -SIG pid` (`0`: only checks the process exists). Reaped zombies do not exist.
fn signal(pid: u32, sig: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("kill -{sig} {pid} 2>/dev/null"))
        .status()
        .is_ok_and(|s| s.success())
        && (sig != "0" || !zombie(pid))
}

/// A killed child of a still running guard stays a zombie until the guard reaps it.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Whether `127.0.0.1:port` answers `PING` (a server that wants a password first, `-NOAUTH`,
/// answers too).
pub fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut buf).is_ok()
        && (&buf == b"+PONG\r\n" || &buf == b"-NOAUTH")
}

/// Who a `redis-cli` call authenticates as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The ACL user (`None`: the default user, as `requirepass` has it).
    pub user: Option<String>,
    /// The password.
    pub password: String,
}

/// Runs `redis-cli -p PORT ARGS…` and returns its trimmed output.
pub fn cli(port: u16, args: &[&str]) -> String {
    cli_as(port, None, args)
}

/// Runs `redis-cli -p PORT ARGS…` as `credentials` and returns its trimmed output.
pub fn cli_as(port: u16, credentials: Option<&Credentials>, args: &[&str]) -> String {
    which("redis-cli");
    let mut command = Command::new("redis-cli");
    command.args(["-p", &port.to_string()]);
    if let Some(c) = credentials {
        // The password through the environment keeps it out of `ps` and out of redis-cli's
        // warning on stderr.
        command.env("REDISCLI_AUTH", &c.password);
        if let Some(user) = &c.user {
            command.args(["--user", user]);
        }
    }
    let out = command.args(args).output().expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Fails the test with the package to install when `program` is missing.
pub fn which(program: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(program).is_file()));
    if !found {
        let package = match program {
            "redis-sentinel" => "redis-sentinel",
            "redis-cli" => "redis-tools",
            "chromium" => "chromium",
            "chromedriver" => "chromium-driver",
            _ => "redis-server",
        };
        panic!(
            "{program} is not installed; tests that need it cannot run. Run scripts/test (it \
             installs it) or `apt-get install {package}`."
        );
    }
}

/// A fresh directory for one set-up's files, under the system temp dir: `sluice-{kind}-{pid}-{n}`.
///
/// A set-up shared by the tests of one binary lives in a `static`, which is never dropped: its
/// servers stop with the binary (see the module docs) but its directory stays. So the first
/// directory a test binary makes removes those of test binaries that have ended.
pub fn fresh_dir(kind: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended_dirs);
    let dir = std::env::temp_dir().join(format!(
        "sluice-{kind}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the temp dir is writable");
    dir
}

/// Removes the [`fresh_dir`] directories of processes that no longer run.
fn remove_ended_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(dir_owner) else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The process a [`fresh_dir`] name says made it: `sluice-{kind}-{pid}-{n}`.
fn dir_owner(name: &str) -> Option<u32> {
    let (rest, n) = name.strip_prefix("sluice-")?.rsplit_once('-')?;
    let (_kind, pid) = rest.rsplit_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Polls `done` every 20 ms until it holds or `within` passes; returns whether it held.
pub fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The arguments every test `redis-server` shares: loopback, no persistence, files in `dir`.
pub fn server_args(port: u16, dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--dir",
        &dir,
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directories_of_ended_processes_are_removed_and_the_others_kept() {
        let ended = std::env::temp_dir().join(format!("sluice-sweep-{}-0", u32::MAX));
        let mine = fresh_dir("sweep");
        std::fs::create_dir_all(&ended).expect("the temp dir is writable");
        remove_ended_dirs();
        assert!(!ended.exists());
        assert!(mine.exists());
        std::fs::remove_dir_all(&mine).expect("removable");
    }

    #[test]
    fn only_fresh_dir_names_have_an_owner() {
        assert_eq!(dir_owner("sluice-cluster-123-4"), Some(123));
        assert_eq!(dir_owner("sluice-redis-9-40123"), Some(9));
        assert_eq!(dir_owner("sluice-x12"), None);
        assert_eq!(dir_owner("sluice-cluster-abc-1"), None);
        assert_eq!(dir_owner("other-cluster-1-2"), None);
    }
}
