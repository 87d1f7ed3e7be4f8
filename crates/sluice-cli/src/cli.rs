//! The command line: `sluice serve | validate | check | bench | limits | simulate | import`, and the logging flags they share.
//!
//! Flags override the environment variable each names in `--help`, the environment overrides the
//! config file, and the file overrides the built-in defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Distributed rate limiter: decision service, rule file validation, one-off checks.
#[derive(Debug, Parser)]
#[command(name = "sluice", version = crate::version::version(), about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Logging flags.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP decision service.
    Serve(ServeArgs),
    /// Check a rule file; exit 0 when valid, 1 with every error of the file when not.
    Validate(ValidateArgs),
    /// Decide one request and print the decision as JSON; exit 0 when allowed, 1 when denied,
    /// 2 on an error, 3 when the store did not answer and the rule's fail policy decided.
    #[command(after_help = CHECK_EXIT_STATUS)]
    Check(CheckArgs),
    /// Load tool: drive a store (or a running service) and report decisions/s and latency.
    Bench(crate::bench::BenchArgs),
    /// Set, read, list and remove identities' run-time limits on a running service (admin API).
    Limits(LimitsArgs),
    /// Print what an identity has used of a rule's limits on a running service, consuming
    /// nothing; exit 0 when every limit has room, 1 when one is over.
    Usage(UsageArgs),
    /// Replay traffic through the algorithms or a rule file on a simulated clock; report how
    /// each admits against an exact sliding log, with plots.
    Simulate(Box<sluice_simulate::SimulateArgs>),
    /// Turn an envoyproxy/ratelimit or Limitador configuration into a Sluice rule file (and the
    /// Envoy mapping), reporting on standard error what could not be carried over exactly.
    Import(crate::import::ImportArgs),
    /// Print a shell completion script (`sluice completions bash > /etc/bash_completion.d/sluice`).
    Completions(CompletionsArgs),
    /// Print the manual page in roff (`sluice man | man -l -`), or write one page per command.
    Man(ManArgs),
    /// Print the JSON Schema of rule files (editors complete and check fields with it).
    Schema,
}

/// Logging settings, shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log filter: a level (`debug`) or `tracing` directives (`sluice=debug,tower=warn`).
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,
    /// Log line format.
    #[arg(long, global = true, value_enum, env = "SLUICE_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `sluice serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The rule file (.yaml, .yml or .toml); watched and reloaded on change and on SIGHUP.
    #[arg(long, short, env = "SLUICE_CONFIG")]
    pub config: PathBuf,
    /// Address to listen on (overrides `listen`; default 127.0.0.1:8080).
    #[arg(long, env = "SLUICE_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address for the Envoy rate-limit service over gRPC (overrides `grpc_listen`; off unless
    /// one of them is set).
    #[arg(long, env = "SLUICE_GRPC_LISTEN")]
    pub grpc_listen: Option<SocketAddr>,
    /// Store URL (overrides `store.url`): memory://, redis://host:port/db, rediss://...
    // A Redis URL may hold a password: `--help` does not echo the variable's value.
    #[arg(long, env = "SLUICE_STORE", hide_env_values = true)]
    pub store: Option<String>,
    /// On SIGTERM or Ctrl-C, how long requests in flight get to finish before their connections
    /// are cut (overrides `server.shutdown_timeout`; default 10s).
    #[arg(long, env = "SLUICE_SHUTDOWN_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub shutdown_timeout: Option<Duration>,
}

/// `sluice completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

/// `sluice man`.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write `sluice.1` and a page for each command (`sluice-serve.1`, ...) into this directory
    /// instead of printing `sluice.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `sluice validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// The rule file.
    pub file: PathBuf,
    /// How to report: text (errors on standard error) or one JSON object on standard output,
    /// for CI.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// How `validate` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A summary, or one line per error.
    Text,
    /// One JSON object: `valid`, `errors` (each with line, column, rule, field, message,
    /// suggestion), `warnings`.
    Json,
}

/// The exit status of `sluice check`, shown under its `--help`.
const CHECK_EXIT_STATUS: &str = "Exit status:
  0  allowed (a lease, reservation or settlement: it was held)
  1  denied (or the lease or reservation was not held)
  2  an error: the file is invalid, the rule unknown, an attribute missing, the store unreachable
     at start
  3  degraded: the store did not answer in time, so the rule's fail policy (`fail: open`,
     `closed` or `local`) decided; the JSON shows that decision with \"degraded\": true";

/// `sluice check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The rule file.
    #[arg(long, short, env = "SLUICE_CONFIG")]
    pub config: PathBuf,
    /// Store URL (overrides `store.url`).
    #[arg(long)]
    pub store: Option<String>,
    /// Units to consume; 0 only looks.
    #[arg(long, default_value_t = 1)]
    pub cost: u64,
    /// Instead of checking, release this lease (the `lease` of an admitted decision on a rule
    /// with a concurrency limit); exit 0 when it was held.
    // Tokens are URL-safe base64, so one may start with `-`.
    #[arg(
        long,
        value_name = "LEASE",
        allow_hyphen_values = true,
        conflicts_with_all = ["renew", "settle", "rule"]
    )]
    pub release: Option<String>,
    /// Instead of checking, extend this lease by its `lease` duration; exit 0 when it was held.
    #[arg(
        long,
        value_name = "LEASE",
        allow_hyphen_values = true,
        conflicts_with_all = ["settle", "rule"]
    )]
    pub renew: Option<String>,
    /// `--cost` is an estimate: an admitted check prints a `reservation` to settle.
    #[arg(long, conflicts_with_all = ["release", "renew", "settle"])]
    pub reserve: bool,
    /// Instead of checking, settle this reservation at `--cost` (what the request really cost);
    /// exit 0 when it was settled.
    #[arg(
        long,
        value_name = "RESERVATION",
        allow_hyphen_values = true,
        conflicts_with = "rule"
    )]
    pub settle: Option<String>,
    /// The rule to check.
    #[arg(required_unless_present_any = ["release", "renew", "settle"])]
    pub rule: Option<String>,
    /// The request's identity, as `name=value` pairs (`member=m1 ip=203.0.113.9`).
    #[arg(value_parser = parse_attribute)]
    pub attributes: Vec<(String, String)>,
}

impl From<ServeArgs> for sluice_server::ServeOptions {
    fn from(args: ServeArgs) -> Self {
        sluice_server::ServeOptions {
            config: args.config,
            listen: args.listen,
            grpc_listen: args.grpc_listen,
            store: args.store,
            shutdown_timeout: args.shutdown_timeout,
        }
    }
}

/// `sluice limits`.
#[derive(Debug, Clone, Args)]
pub struct LimitsArgs {
    /// The service's base URL.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The admin token (the value of the variable the service's `admin_token_env` names).
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    pub token: String,
    /// What to do.
    #[command(subcommand)]
    pub action: LimitsAction,
}

/// `sluice usage`.
#[derive(Debug, Clone, Args)]
pub struct UsageArgs {
    /// The service's base URL.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The rule.
    pub rule: String,
    /// The identity, as `name=value` pairs (`tenant=42`).
    #[arg(value_parser = parse_attribute)]
    pub attributes: Vec<(String, String)>,
}

/// The rule, limit and identity a run-time limit belongs to.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The rule.
    pub rule: String,
    /// The limit's id, when the rule has several settable limits.
    #[arg(long)]
    pub limit: Option<String>,
    /// The identity, as `name=value` pairs (`customer=42`).
    #[arg(value_parser = parse_attribute, required = true)]
    pub attributes: Vec<(String, String)>,
}

/// `sluice limits <action>`.
#[derive(Debug, Clone, Subcommand)]
pub enum LimitsAction {
    /// Set an identity's run-time limit: `sluice limits set api --rate 5000/1m customer=42`; on a
    /// quota `--quota 50000` and, by the month, `--anchor 15` (the billing day), either or both.
    Set {
        /// Where.
        #[command(flatten)]
        target: Target,
        /// Units per window; the window must be the limit's.
        #[arg(long, required_unless_present_any = ["max_leases", "quota", "anchor"])]
        rate: Option<String>,
        /// Capacity (token bucket, GCRA, leaky bucket); defaults to the rate's count.
        #[arg(long)]
        burst: Option<u64>,
        /// For a concurrency limit: leases held at once.
        #[arg(long, conflicts_with_all = ["rate", "burst"])]
        max_leases: Option<u64>,
        /// For a quota: units per period.
        #[arg(long, conflicts_with_all = ["rate", "burst", "max_leases"])]
        quota: Option<u64>,
        /// For a monthly quota: the day (1-31) each of the identity's months begins on; the
        /// identity keeps what it used this period.
        #[arg(long, conflicts_with_all = ["rate", "burst", "max_leases"])]
        anchor: Option<u8>,
    },
    /// Print an identity's run-time limit; exit 1 when none is set.
    Get {
        /// Whose.
        #[command(flatten)]
        target: Target,
    },
    /// List run-time limits: of every settable limit, or of one rule (and limit).
    List {
        /// The rule.
        rule: Option<String>,
        /// The limit's id (with a rule).
        #[arg(long, requires = "rule")]
        limit: Option<String>,
    },
    /// Remove an identity's run-time limit; exit 1 when none was set.
    Remove {
        /// Whose.
        #[command(flatten)]
        target: Target,
    },
}

/// A duration as the rule file writes one (`10s`, `500ms`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    sluice::model::parse_duration(text).map_err(|e| e.to_string())
}

/// A `name=value` pair of the command line.
pub(crate) fn parse_attribute(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("`{text}` is not name=value")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// A container is configured through its environment: no `serve` setting may lack a variable.
    #[test]
    fn every_serve_option_reads_a_variable() {
        let command = Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        for arg in serve.get_arguments().filter(|a| !a.is_global_set()) {
            let id = arg.get_id().as_str();
            if id == "help" {
                continue;
            }
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let expected = format!("SLUICE_{}", id.to_uppercase());
            assert_eq!(env.as_deref(), Some(expected.as_str()), "--{id}");
        }
    }

    #[test]
    fn limits_takes_a_rule_an_identity_and_numbers() {
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from(["sluice", "limits", "--token", "t"].iter().chain(args))?;
            let Command::Limits(args) = cli.command else {
                panic!("parsed as limits");
            };
            Ok::<_, clap::Error>(args.action)
        };
        let set = parse(&["set", "api", "--rate", "5000/1m", "customer=42"]).unwrap();
        let LimitsAction::Set { target, rate, .. } = set else {
            panic!("parsed as set");
        };
        assert_eq!(
            (target.rule.as_str(), rate.as_deref()),
            ("api", Some("5000/1m"))
        );
        assert_eq!(
            target.attributes,
            [("customer".to_string(), "42".to_string())]
        );
        assert!(parse(&["set", "api", "customer=42"]).is_err());
        assert!(parse(&["set", "api", "--rate", "5/1m"]).is_err());
        assert!(parse(&["set", "jobs", "--max-leases", "3", "--rate", "1/1m", "t=1"]).is_err());
        // A quota's billing day stands alone, or beside its own count; never beside a rate.
        let day = parse(&["set", "plan", "--anchor", "15", "tenant=7"]).unwrap();
        let LimitsAction::Set { anchor, quota, .. } = day else {
            panic!("parsed as set");
        };
        assert_eq!((anchor, quota), (Some(15), None));
        assert!(parse(&["set", "plan", "--quota", "9", "--anchor", "31", "tenant=7"]).is_ok());
        assert!(
            parse(&[
                "set", "plan", "--anchor", "15", "--rate", "1/1m", "tenant=7"
            ])
            .is_err()
        );
        assert!(parse(&["set", "plan", "--anchor", "day", "tenant=7"]).is_err());
        assert!(parse(&["get", "api", "customer=42"]).is_ok());
        assert!(parse(&["list"]).is_ok());
        assert!(parse(&["list", "--limit", "x"]).is_err());
        assert!(parse(&["remove", "api", "--limit", "x", "customer=42"]).is_ok());
    }

    #[test]
    fn check_takes_pairs() {
        let cli = Cli::try_parse_from([
            "sluice",
            "check",
            "--config",
            "s.yaml",
            "login",
            "ip=1.2.3.4",
            "--cost",
            "3",
        ])
        .unwrap();
        let Command::Check(args) = cli.command else {
            panic!("parsed as check");
        };
        assert_eq!(args.attributes, [("ip".to_string(), "1.2.3.4".to_string())]);
        assert_eq!(args.cost, 3);
        assert!(Cli::try_parse_from(["sluice", "check", "-c", "s.yaml", "login", "ip"]).is_err());
        assert!(Cli::try_parse_from(["sluice", "check", "-c", "s.yaml"]).is_err());
    }

    #[test]
    fn check_releases_or_renews_a_lease_instead() {
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from(["sluice", "check", "-c", "s.yaml"].iter().chain(args))?;
            let Command::Check(args) = cli.command else {
                panic!("parsed as check");
            };
            Ok::<_, clap::Error>(args)
        };
        let args = parse(&["--release", "L"]).unwrap();
        assert_eq!((args.release.as_deref(), args.rule), (Some("L"), None));
        assert_eq!(
            parse(&["--renew", "L"]).unwrap().renew.as_deref(),
            Some("L")
        );
        // Tokens are URL-safe base64: a leading `-` is part of the token, not a flag.
        assert_eq!(
            parse(&["--renew", "-yQ2xL"]).unwrap().renew.as_deref(),
            Some("-yQ2xL")
        );
        assert_eq!(
            parse(&["--release", "-c"]).unwrap().release.as_deref(),
            Some("-c")
        );
        assert_eq!(
            parse(&["--settle", "-R", "--cost", "3"])
                .unwrap()
                .settle
                .as_deref(),
            Some("-R")
        );
        assert!(parse(&["--release", "L", "--renew", "L"]).is_err());
        assert!(parse(&["--release", "L", "login"]).is_err());
        let args = parse(&["--settle", "R", "--cost", "30"]).unwrap();
        assert_eq!((args.settle.as_deref(), args.cost), (Some("R"), 30));
        assert!(
            parse(&["--reserve", "--cost", "100", "llm"])
                .unwrap()
                .reserve
        );
        assert!(parse(&["--settle", "R", "--reserve"]).is_err());
    }
}
