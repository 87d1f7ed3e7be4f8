//! A rule file cannot exhaust the memory of `sluice validate` or of a serving `sluice serve`: a
//! file above the size cap is refused, and locating lines costs time and memory linear in the
//! file's size, so a 1 MB rule name followed by 3 million newlines is refused within 2 s by a
//! process that stays under 200 MB.

use crate::common;

use std::time::{Duration, Instant};

use common::{CONFIG, Server, TempDir, WITHIN, eventually, sluice};

const MB: u64 = 1024 * 1024;

/// A 1 MB rule name, then 3 million newlines: just under the 4 MiB cap.
fn hostile_yaml() -> String {
    let mut text = String::from("rules:\n  ");
    text.push_str(&"n".repeat(1_000_000));
    text.push_str(":\n");
    text.push_str(&"\n".repeat(3_000_000));
    text.push_str("    limits: []\n");
    text
}

fn hostile_toml() -> String {
    let mut text = String::from("[rules.");
    text.push_str(&"n".repeat(1_000_000));
    text.push_str("]\n");
    text.push_str(&"\n".repeat(3_000_000));
    text.push_str("limits = 1\n");
    text
}

/// What one run of a child cost: its exit code, standard error, CPU time and peak memory, from
/// `wait4` on that child alone.
pub(crate) struct Run {
    pub(crate) code: Option<i32>,
    pub(crate) stderr: String,
    pub(crate) cpu: Duration,
    pub(crate) max_rss: u64,
}

// The child is reaped by `wait4` below, which also returns its resource usage.
#[allow(clippy::zombie_processes)]
pub(crate) fn run(command: &mut std::process::Command) -> Run {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // SAFETY: wait4 only writes into the status and usage it is given; the child is ours and
    // not yet reaped.
    let (status, usage) = unsafe {
        let mut status = 0;
        let mut usage = std::mem::zeroed::<libc::rusage>();
        assert_eq!(libc::wait4(pid, &mut status, 0, &mut usage), pid);
        (status, usage)
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stderr,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        max_rss: usage.ru_maxrss as u64 * 1024,
    }
}

/// The time bound is on the CPU time the process used (its work), with a loose wall-clock bound
/// besides: on a shared, loaded test machine wall time also measures the neighbours.
#[test]
fn validate_refuses_a_hostile_file_quickly_and_in_little_memory() {
    let dir = TempDir::new();
    for (name, text) in [
        ("hostile.yaml", hostile_yaml()),
        ("hostile.toml", hostile_toml()),
    ] {
        assert!(
            text.len() as u64 <= 4 * MB,
            "{name} stays under the size cap"
        );
        let path = dir.write(name, &text);
        let start = Instant::now();
        let done = run(sluice().arg("validate").arg(&path));
        let wall = start.elapsed();
        let head: String = done.stderr.chars().take(300).collect();
        assert_eq!(done.code, Some(1), "{name}: {head}");
        assert!(done.stderr.starts_with("error:"), "{name}: {head}");
        assert!(done.stderr.len() < 1000, "{name}: a short error: {head}…");
        assert!(
            done.cpu < Duration::from_secs(2),
            "{name} used {:?}",
            done.cpu
        );
        assert!(wall < Duration::from_secs(20), "{name} took {wall:?}");
        assert!(done.max_rss < 200 * MB, "{name}: {} MB", done.max_rss / MB);
    }
}

#[test]
fn validate_refuses_a_file_above_the_size_cap() {
    let dir = TempDir::new();
    let mut text = CONFIG.to_string();
    text.push_str(&"#".repeat(5 * MB as usize));
    let path = dir.write("big.yaml", &text);
    let output = sluice().arg("validate").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("larger than the 4194304 bytes a rule file may have"),
        "{stderr}"
    );
}

/// The peak resident set of a running process, from `/proc`.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

#[tokio::test]
async fn a_hostile_file_on_hot_reload_is_refused_and_serving_goes_on() {
    let server = Server::start(CONFIG);
    let errors = r#"sluice_config_reloads_total{result="error"}"#;
    let before = server.metric(errors).await;
    std::fs::write(&server.config, hostile_yaml()).unwrap();
    eventually(WITHIN, "the reload is refused", || async {
        (server.metric(errors).await > before).then_some(())
    })
    .await;
    let answer = server
        .check("employee", serde_json::json!({ "id": "42" }))
        .await;
    assert_eq!(answer.status, 200, "the rules in force stay: {answer:?}");
    let rss = peak_rss(server.pid());
    assert!(rss < 200 * MB, "{} MB", rss / MB);
}
