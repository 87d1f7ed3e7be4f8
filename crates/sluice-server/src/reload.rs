//! Hot reload: parse → validate → compile → swap, on a change of the file or on SIGHUP.
//!
//! The file's *directory* is watched (debounced), so replacing the file by rename, as editors and
//! Kubernetes ConfigMaps do, is seen as well as an in-place write. Any change in the directory
//! re-reads the file; only a different text (by SHA-1) is applied, so unrelated files cost one
//! read. A changed file is applied only once it has read the same for `reload.quiet` (250ms by
//! default): a file caught half-written — empty, cut before half its rules, `burst: 200` cut to
//! `burst: 20` — may still be valid, and must not be put in force; each wait for a file that was
//! still changing is logged and counted (`result="unsettled"`, the label's published value). SIGHUP reloads at once, even
//! when the text is unchanged. A file that does not validate is logged with its reason, counted
//! as `sluice_config_reloads_total{result="error"}`, and the rules in force stay. A file without
//! rules replacing rules in force is refused (`result="no_rules"`) unless it sets
//! `reload.allow_no_rules: true`. Counters survive a reload because store keys are by rule and limit id, not by
//! the rule's version. Listen address, store and admin settings are fixed at start: a change to
//! them is logged as needing a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::Notify;

use crate::config::{Config, ConfigError};
use crate::error::ServeError;
use crate::metrics;
use crate::state::{AppState, Live, now_ms};

/// How long file events are gathered before one reload (well under the 1 s promise).
const DEBOUNCE: Duration = Duration::from_millis(150);

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// New rules are in force.
    Applied,
    /// The file is the one in force; nothing to do.
    Unchanged,
    /// The file was refused; the old rules stay. Carries the reason.
    Refused(String),
}

/// Reloads the rule file as it is now. With `force`, applies it even if its text is unchanged.
pub fn reload(state: &AppState, force: bool) -> Reloaded {
    let Some(path) = &state.config_path else {
        return Reloaded::Unchanged;
    };
    apply(state, path, Config::load(path), force)
}

/// Reloads the rule file once it has read the same for `quiet` (see the module docs).
///
/// `refused` remembers the last file refused (its version, or its error), so that events that
/// leave it as it is (a log file written in the same directory, say) neither log nor count it
/// again: each pass is quiet unless the file differs both from the rules in force and from the
/// last refusal, which keeps a log in the watched directory from feeding the watcher forever.
pub async fn reload_when_quiet(
    state: Arc<AppState>,
    quiet: Duration,
    refused: &mut Option<String>,
) -> Reloaded {
    let Some(path) = state.config_path.clone() else {
        return Reloaded::Unchanged;
    };
    // File reads block; keep them off the request threads. A read task cannot panic short of a
    // bug; it is then a read that failed, which the next change retries.
    let read = |path: PathBuf| async move {
        match tokio::task::spawn_blocking(move || Config::load(&path)).await {
            Ok(loaded) => Some(loaded),
            Err(error) => {
                tracing::error!(%error, "reading the config file failed");
                None
            }
        }
    };
    let Some(mut seen) = read(path.clone()).await else {
        return Reloaded::Unchanged;
    };
    if let Ok(config) = &seen
        && config.version == state.live.load().version
    {
        *refused = None;
        return Reloaded::Unchanged;
    }
    if refused.as_deref() == Some(fingerprint(&seen).as_str()) {
        return Reloaded::Unchanged;
    }
    tracing::info!(file = %path.display(), ?quiet, "config file changed; applying it once it has read the same for a while");
    // Bounded: a file rewritten faster than it can stay quiet is taken as it is after a while.
    for _ in 0..40 {
        tokio::time::sleep(quiet).await;
        let Some(now) = read(path.clone()).await else {
            return Reloaded::Unchanged;
        };
        if same(&seen, &now) {
            return remember(refused, fingerprint(&now), apply(&state, &path, now, false));
        }
        tracing::info!(file = %path.display(), "config file still changing; waiting for it to stay the same");
        metrics::reload("unsettled");
        seen = now;
    }
    remember(
        refused,
        fingerprint(&seen),
        apply(&state, &path, seen, false),
    )
}

/// What identifies one read of the file: its version, or its error.
fn fingerprint(read: &Result<Config, ConfigError>) -> String {
    match read {
        Ok(config) => config.version.clone(),
        Err(error) => error.to_string(),
    }
}

/// Whether two reads of the file gave the same text (or the same error).
fn same(a: &Result<Config, ConfigError>, b: &Result<Config, ConfigError>) -> bool {
    fingerprint(a) == fingerprint(b)
}

/// Records a refusal so that the same file is not refused again until it changes.
fn remember(refused: &mut Option<String>, read: String, reloaded: Reloaded) -> Reloaded {
    *refused = matches!(reloaded, Reloaded::Refused(_)).then_some(read);
    reloaded
}

/// Puts a loaded file in force, unless it is the one in force, invalid, or without rules.
fn apply(
    state: &AppState,
    path: &Path,
    loaded: Result<Config, ConfigError>,
    force: bool,
) -> Reloaded {
    let config = match loaded {
        Ok(config) => config,
        Err(error) => return refuse(error.to_string(), "error"),
    };
    let current = state.live.load();
    if !force && config.version == current.version {
        return Reloaded::Unchanged;
    }
    if config.rules.is_empty() && !current.config.rules.is_empty() && !config.reload.allow_no_rules
    {
        return refuse(
            format!(
                "{}: the file has no rules and would remove all {} in force; set \
                 `reload.allow_no_rules: true` to mean it",
                path.display(),
                current.config.rules.len()
            ),
            "no_rules",
        );
    }
    if let Err(error) = state.limiter.set_rules(config.rules_in_force()) {
        return refuse(format!("{}: {error}", path.display()), "error");
    }
    state.limiter.set_enabled(config.enabled);
    let book = state.limiter.rules();
    state.top_denied.retain(|rule| book.contains_key(rule));
    let restart = needs_restart(&state.startup, &config);
    if !restart.is_empty() {
        tracing::warn!(
            settings = %restart.join(", "),
            "config changes that need a restart to apply; the rest is in force"
        );
    }
    tracing::info!(
        version = %config.version,
        previous = %current.version,
        rules = config.rules.len(),
        "config reloaded"
    );
    state.live.store(Arc::new(Live {
        version: config.version.clone(),
        loaded_at_ms: now_ms(),
        headers: config.headers,
        config,
    }));
    state.rlqs.rules_changed();
    metrics::reload("ok");
    Reloaded::Applied
}

fn refuse(reason: String, result: &'static str) -> Reloaded {
    tracing::error!(error = %reason, "config reload refused; the previous rules stay in force");
    metrics::reload(result);
    Reloaded::Refused(reason)
}

/// The settings that differ from those the server started with and that only a restart applies.
fn needs_restart(started: &Config, now: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    if started.listen != now.listen {
        out.push("listen");
    }
    if started.grpc_listen != now.grpc_listen {
        out.push("grpc_listen");
    }
    if started.store.url != now.store.url {
        out.push("store.url");
    }
    if started.store.prefix != now.store.prefix {
        out.push("store.prefix");
    }
    if started.store.clock != now.store.clock {
        out.push("store.clock");
    }
    if started.store.timeout != now.store.timeout {
        out.push("store.timeout");
    }
    if started.admin_token_env != now.admin_token_env {
        out.push("admin_token_env");
    }
    if started.denial_cache != now.denial_cache {
        out.push("denial_cache");
    }
    if started.server != now.server {
        out.push("server");
    }
    if started.metrics != now.metrics {
        out.push("metrics");
    }
    out
}

/// Keeps the file watcher alive; dropping it stops watching (SIGHUP handling stops with the
/// runtime).
pub struct Watch {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Starts watching the state's rule file and listening for SIGHUP.
pub fn watch(state: Arc<AppState>) -> Result<Option<Watch>, ServeError> {
    let Some(path) = state.config_path.clone() else {
        return Ok(None);
    };
    let changed = Arc::new(Notify::new());
    let signal = changed.clone();
    let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| {
        match result {
            // Reads (ours included) are not changes; reacting to them would loop.
            Ok(events) => {
                if events
                    .iter()
                    .any(|e| !matches!(e.event.kind, EventKind::Access(_)))
                {
                    signal.notify_one();
                }
            }
            Err(errors) => {
                for error in errors {
                    tracing::warn!(%error, "watching the config file");
                }
            }
        }
    })
    .map_err(ServeError::Watcher)?;
    let dir = directory_of(&path);
    debouncer
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|source| ServeError::Watch {
            dir: dir.clone(),
            source,
        })?;
    tokio::spawn(reload_loop(state, changed));
    Ok(Some(Watch {
        _debouncer: debouncer,
    }))
}

async fn reload_loop(state: Arc<AppState>, changed: Arc<Notify>) {
    #[cfg(unix)]
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; reload on file change only");
            None
        }
    };
    let mut refused = None;
    loop {
        #[cfg(unix)]
        let force = tokio::select! {
            () = changed.notified() => false,
            Some(()) = async {
                match hangup.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            } => true,
        };
        #[cfg(not(unix))]
        let force = {
            changed.notified().await;
            false
        };
        if force {
            tracing::info!("SIGHUP: reloading the config");
            let state = state.clone();
            // File reads block; keep them off the request threads.
            let _ = tokio::task::spawn_blocking(move || reload(&state, true)).await;
        } else {
            let quiet = state.live.load().config.reload.quiet;
            reload_when_quiet(state.clone(), quiet, &mut refused).await;
        }
    }
}
