//! Rule scripts: one script per rule spec that decides all its limits in one call, at the cost
//! of their one-limit scripts together rather than of the general decision.
//!
//! The general decision reads every limit's numbers and options from its arguments into tables
//! and runs each algorithm through generic look and record functions: for two limits it costs
//! Redis about 3.5× one limit's script. A rule script is written for its limits instead
//! ([`many_text`]): `lua/now.lua`, `lua/idiv.lua` (when a part divides) and `lua/many_head.lua`,
//! then each limit's constants and the look of its `lua/<algorithm>.lua#many` part, then the
//! records, made only once every enforcing limit passes, then the reply. A call carries the time and each limit's
//! cost. Each part's locals carry the limit's number (the part's `@`), so a limit's look and its
//! record share them.
//!
//! A limit with a block or a penalty (guarded) is taken too, as its one-limit script takes it: a
//! penalty's violations are read first (`lua/many_violations.lua`), and the reply then carries
//! every limit's violations and warning; its denial, which blocks or counts a violation, and a
//! block marker in its key (a block in force or over) are left to the general decision.
//!
//! Invariants: a rule script restates `lua/decide.lua` for the rules it takes, and takes only
//! rules of [`MAX_LIMITS`] or fewer limits, each with an algorithm that has a part, without
//! `count_denied` (those keep the general decision); anything it does not expect in a key, and
//! any denial by a guarded limit, it leaves to the general decision having written nothing.

use std::fmt::Write;

use super::constants::declare;
use super::one_script::{self, Spec};
use super::source::{self, NOW};
use crate::model::{Algorithm, Micros};

/// Most limits a rule script decides (Lua allows a function 200 locals, and each limit's part
/// keeps up to 20).
pub const MAX_LIMITS: usize = 8;

const PERIOD: &str = "--@period\n";
const FRESH: &str = "--@fresh\n";
const UNDO: &str = "--@undo\n";

/// A penalized limit's violations and warning, read before its look (its violations key and
/// warn_after written in).
const VIOLATIONS: &str = include_str!("lua/many_violations.lua");

/// The look and the record of a limit of `spec`, if a rule script can decide it.
fn part(spec: &Spec) -> Option<(&'static str, &'static str)> {
    if spec.count_denied {
        return None;
    }
    let (look, record) = source::forms(spec.algorithm).many.as_ref()?;
    Some((look, record))
}

/// The opening of a rule script whose limits are all marked fixed windows, from `marked`, their
/// `fixed_window.lua#many_marked`: on Redis `TIME` it counts each of the `limits` limits in its
/// marked window, completes the keys of the windows it starts (a quota's, once `TIME` says its
/// period holds Redis' time) and answers, or undoes what it counted and reads `TIME` for the
/// decision that follows.
fn marked_counts(marked: &str, limits: usize) -> Option<String> {
    let (count, rest) = marked.split_once(PERIOD)?;
    let (period, rest) = rest.split_once(FRESH)?;
    let (fresh, undo) = rest.split_once(UNDO)?;
    let each = |part: &str| {
        (1..=limits)
            .map(|n| part.replace('@', &n.to_string()))
            .collect::<String>()
    };
    let values = (1..=limits)
        .map(|n| format!("r_{n}, ttl_{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "\n-- counted in marked windows, without the time\nif not now then\nlocal all, fresh = true, false\n{}\
         if all and fresh then\n  local t = redis.call('TIME')\n  now = t[1] * 1000000 + t[2]\n{}end\n\
         if all then\n{}  return {{ {values} }}\nend\n{}\
         local t = redis.call('TIME')\nnow = t[1] * 1000000 + t[2]\n\
         px, pexpire, expiry_from = 'PXAT', 'PEXPIREAT', now\nend\n",
        each(count),
        each(period),
        each(fresh),
        each(undo),
    ))
}

/// The text of the rule script for limits of `specs`, in order, on a store whose shortest
/// expiry to write is `min_ttl` (see `RedisOptions::min_ttl`); none unless there are 2 to
/// [`MAX_LIMITS`] of them and each has a part.
pub fn many_text(specs: &[Spec], min_ttl: Micros) -> Option<String> {
    if !(2..=MAX_LIMITS).contains(&specs.len()) {
        return None;
    }
    let parts = specs.iter().map(part).collect::<Option<Vec<_>>>()?;
    // Lua makes a script's local function anew on every call: idiv only where a part divides.
    let divides = parts
        .iter()
        .any(|(look, record)| look.contains("idiv(") || record.contains("idiv("));
    let marked = specs
        .iter()
        .all(|s| !s.guarded && one_script::marked(s, min_ttl))
        .then(|| source::forms(specs[0].algorithm).many_marked.as_deref())
        .flatten();
    let mut text = format!(
        "local min_ttl, time_deferred, now_at = {}, {}, {}\n{NOW}{}{}",
        min_ttl.get(),
        marked.is_some(),
        specs.len() + 1,
        if divides {
            include_str!("lua/idiv.lua")
        } else {
            ""
        },
        include_str!("lua/many_head.lua")
    );
    // KEYS: each limit's state key, followed by its violations key if it has a penalty.
    let mut key = 1;
    let mut violations_keys = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let n = i + 1;
        let _ = write!(
            text,
            "\n-- limit {n}\nlocal key_{n}, cost_text_{n} = KEYS[{key}], ARGV[{n}]\n\
             local cost_{n} = cost_text_{n} == '1' and 1 or tonumber(cost_text_{n})\n\
             local limit_{n}, window_{n}, capacity_{n} = {}, {}, {}\n",
            spec.count, spec.window_us, spec.capacity,
        );
        if spec.algorithm == Algorithm::FixedWindow {
            // A quota's period, written in: its start, end and slot (`fixed_window.lua#many`).
            let _ = match spec.period {
                Some((start, end, slot)) => writeln!(
                    text,
                    "local start_{n}, finish_{n}, period_slot_{n} = {start}, {end}, {slot}"
                ),
                None => writeln!(text, "local start_{n} = false"),
            };
        }
        violations_keys.push(key + 1);
        key += if spec.warn_after.is_some() { 2 } else { 1 };
    }
    if let Some(marked) = marked {
        text.push_str(&marked_counts(marked, specs.len())?);
    }
    let mut records = String::new();
    let mut enforced = Vec::new();
    let mut reply = String::from("return { now");
    let guarded = specs.iter().any(|s| s.guarded);
    for (i, (spec, (look, record))) in specs.iter().zip(parts).enumerate() {
        let n = (i + 1).to_string();
        if let Some(warn_after) = spec.warn_after {
            text.push_str(
                &VIOLATIONS
                    .replace("violations_key_@", &format!("KEYS[{}]", violations_keys[i]))
                    .replace("warn_after_@", &warn_after.to_string())
                    .replace('@', &n),
            );
        } else if guarded {
            let _ = writeln!(text, "local violations_{n}, warning_{n} = 0, 0");
        } else if record.contains("violations_@") {
            let _ = writeln!(text, "local violations_{n} = 0");
        }
        text.push_str(&look.replace('@', &n));
        if spec.guarded {
            // Its denial blocks or counts a violation: the general decision's to make.
            let _ = writeln!(text, "if not allowed_{n} then\n  return {{}}\nend");
        }
        let _ = write!(
            records,
            "if allowed_{n} then\n{}end\n",
            record.replace('@', &n)
        );
        if !spec.shadow {
            enforced.push(format!("allowed_{n}"));
        }
        let _ = write!(
            reply,
            ", allowed_{n} and 1 or 0, remaining_{n}, reset_{n}, retry_{n}"
        );
        if guarded {
            let _ = write!(reply, ", violations_{n}, warning_{n}");
        }
    }
    if enforced.is_empty() {
        enforced.push("true".to_string());
    }
    let _ = write!(
        text,
        "\n-- every enforcing limit passes: the admitted ones record\nif {} then\n{records}end\n{reply} }}\n",
        enforced.join(" and ")
    );
    // The shared constants the script names, after its own numbers (which `shared_script` reads
    // as its first line).
    let (numbers, body) = text.split_once('\n')?;
    Some(format!("{numbers}\n{}{body}", declare(body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::constants::FIXED_WINDOW_M;

    fn spec(algorithm: Algorithm, count: u64) -> Spec {
        Spec::plain(algorithm, count)
    }

    #[test]
    fn every_part_has_a_look_and_a_record_and_every_name_is_numbered() {
        for algorithm in Algorithm::ALL {
            let Some((look, record)) = source::forms(algorithm).many.as_ref() else {
                assert!(
                    source::forms(algorithm).one.is_none(),
                    "{algorithm}: a one-limit script without a rule part"
                );
                continue;
            };
            assert!(look.contains("local allowed_@") && look.contains("remaining_@"));
            assert!(record.contains("remaining_@ ="), "{}", algorithm.name());
            assert!(!record.contains(source::RECORD));
        }
        let text = many_text(
            &[spec(Algorithm::Gcra, 10), spec(Algorithm::FixedWindow, 100)],
            Micros::ZERO,
        )
        .expect("a rule script");
        assert!(!text.contains('@'), "every part's names are numbered");
        assert!(text.starts_with(&format!(
            "local min_ttl, time_deferred, now_at = 0, false, 3\n{}{NOW}",
            declare(&text)
        )));
        assert!(declare(&text).contains("FIXED_WINDOW_M"));
        assert!(text.contains("local limit_2, window_2, capacity_2 = 100, 60000000, 100\n"));
        assert!(text.contains("if allowed_1 and allowed_2 then\n"));
        assert!(text.ends_with(
            "return { now, allowed_1 and 1 or 0, remaining_1, reset_1, retry_1, \
             allowed_2 and 1 or 0, remaining_2, reset_2, retry_2 }\n"
        ));
        // The gcra divides; two fixed windows do not, and their script defines no idiv.
        let idiv = "local function idiv(";
        assert!(text.contains(idiv));
        let windows = [Algorithm::FixedWindow; 2].map(|a| spec(a, 5));
        let text = many_text(&windows, Micros::ZERO).expect("a rule script");
        assert!(!text.contains(idiv) && !text.contains("idiv("));
    }

    /// Two quotas of 2 a day written for `period`'s bounds, run on a real Redis on its own time,
    /// for keys `a` and `b`.
    fn quotas_in(
        server: &sluice_test_support::RedisServer,
        period: crate::model::PeriodBounds,
    ) -> String {
        let mut quota = spec(Algorithm::FixedWindow, 2);
        quota.window_us = 25 * 3_600_000_000;
        quota.period = Some((
            period.start.get(),
            period.end.get(),
            super::super::keys::period_slot(period.start),
        ));
        let text = many_text(&[quota, quota], Micros::ZERO).expect("a rule script");
        server.cli(&["EVAL", &text, "2", "a", "b", "1", "1"])
    }

    #[test]
    fn a_rule_of_quotas_counts_in_the_period_written_in_and_leaves_another_to_the_general_decision()
    {
        use crate::clock::{Clock, SystemClock};
        use crate::model::{Period, PeriodUnit};
        let server = sluice_test_support::RedisServer::start();
        let day = Period::new(PeriodUnit::Day);
        let today = day.bounds_at(SystemClock.now_us());
        let yesterday = day.bounds_at(today.start - Micros::new(1));
        assert_eq!(
            quotas_in(&server, yesterday),
            "",
            "another period: nothing decided"
        );
        assert_eq!(server.cli(&["DBSIZE"]), "0", "nothing written");
        // Counted in the period's keys without reading TIME but to start them: each key's value
        // (its period's slot and count) and PTTL, as fixed windows in their marked windows.
        let slot = super::super::keys::period_slot(today.start) as i64;
        let counted = quotas_in(&server, today);
        let values: Vec<i64> = counted.lines().map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), 4, "{counted}");
        let left_ms = (today.end - SystemClock.now_us()).as_millis() as i64;
        for pair in values.chunks(2) {
            assert_eq!(pair[0], -(slot * FIXED_WINDOW_M as i64 + 1));
            assert!(
                (pair[1] - left_ms).abs() < 5_000,
                "{pair:?}, {left_ms} ms left"
            );
        }
        // Both keys end with the day, to the millisecond.
        for key in ["a", "b"] {
            let expiry: u64 = server.cli(&["PEXPIRETIME", key]).parse().unwrap();
            assert_eq!(expiry, today.end.as_millis(), "{key}");
        }
        quotas_in(&server, today);
        let denied = quotas_in(&server, today);
        assert_eq!(denied.lines().nth(1), Some("0"), "{denied}");
        // The most limits a rule script takes, every one a quota, stay within Lua's locals.
        let mut quota = spec(Algorithm::FixedWindow, 2);
        quota.period = Some((today.start.get(), today.end.get(), 1));
        let text = many_text(&[quota; MAX_LIMITS], Micros::ZERO).expect("a rule script");
        let mut args = vec!["EVAL".to_string(), text, MAX_LIMITS.to_string()];
        args.extend((0..MAX_LIMITS).map(|i| format!("k{i}")));
        args.extend((0..MAX_LIMITS).map(|_| "1".to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let answer = server.cli(&args);
        assert_eq!(answer.lines().count(), 2 * MAX_LIMITS, "{answer}");
    }

    #[test]
    fn a_rule_of_marked_fixed_windows_counts_first() {
        let window = spec(Algorithm::FixedWindow, 5);
        let text = many_text(&[window; 3], Micros::ZERO).expect("a rule script");
        assert!(!text.contains('@'), "every part's names are numbered");
        assert!(text.starts_with("local min_ttl, time_deferred, now_at = 0, true, 4\n"));
        let counts = text
            .find("if not now then\nlocal all, fresh = true, false\n")
            .expect("counts");
        assert!(text.find("local limit_3,").expect("constants") < counts);
        assert!(counts < text.find("redis.pcall('GET', key_1)").expect("the look"));
        assert!(text.contains("return { r_1, ttl_1, r_2, ttl_2, r_3, ttl_3 }\n"));
        assert!(text.contains("redis.call('INCRBY', key_3, cost_text_3)"));
        // A window the count starts is written once TIME is read, before the answer.
        let time = text
            .find("if all and fresh then\n  local t = redis.call('TIME')\n")
            .expect("the time, for fresh windows");
        let fresh = time + text[time..].find("if all then\n").expect("fresh windows");
        assert!(
            fresh
                < text
                    .find("redis.call('SET', key_3, ")
                    .expect("a new window's key")
        );
        // Any other limit, a guarded one, or a store that keeps keys longer: no such count.
        let guarded = Spec {
            guarded: true,
            ..window
        };
        let odd = Spec {
            window_us: 1500,
            ..window
        };
        for other in [guarded, odd, spec(Algorithm::Gcra, 5)] {
            let text = many_text(&[window, other], Micros::ZERO).expect("a rule script");
            assert!(!text.contains("local all, fresh"), "{other:?}");
        }
        let text = many_text(&[window; 2], Micros::new(1000)).expect("a rule script");
        assert!(!text.contains("local all, fresh"));
    }

    #[test]
    fn a_guarded_limit_reads_its_violations_and_leaves_its_denials() {
        let gcra = spec(Algorithm::Gcra, 10);
        let penalized = Spec {
            guarded: true,
            warn_after: Some(3),
            ..spec(Algorithm::SlidingWindow, 5)
        };
        let blocking = Spec {
            guarded: true,
            ..spec(Algorithm::FixedWindow, 7)
        };
        let text = many_text(&[penalized, gcra, blocking], Micros::ZERO).expect("a rule script");
        assert!(!text.contains('@'), "every part's names are numbered");
        // KEYS: the penalized limit's state and violations keys, then one state key each.
        assert!(text.contains("local key_1, cost_text_1 = KEYS[1], ARGV[1]\n"));
        assert!(text.contains("redis.call('GET', KEYS[2])"));
        assert!(text.contains(">= 3 then"), "its warn_after");
        assert!(text.contains("local key_2, cost_text_2 = KEYS[3], ARGV[2]\n"));
        assert!(text.contains("local key_3, cost_text_3 = KEYS[4], ARGV[3]\n"));
        assert!(text.contains("local violations_2, warning_2 = 0, 0\n"));
        assert!(text.contains("if not allowed_1 then\n  return {}\nend"));
        assert!(text.contains("if not allowed_3 then\n  return {}\nend"));
        assert!(
            !text.contains("if not allowed_2 then\n  return {}"),
            "a plain limit answers"
        );
        assert!(text.ends_with("retry_3, violations_3, warning_3 }\n"));
    }

    #[test]
    fn only_rules_of_a_few_limits_without_count_denied_get_a_rule_script() {
        let gcra = spec(Algorithm::Gcra, 10);
        let shadow = Spec {
            shadow: true,
            ..gcra
        };
        let text = many_text(&[gcra, shadow], Micros::ZERO).expect("a rule script");
        assert!(
            text.contains("if allowed_1 then\n"),
            "a shadow limit does not stop the others"
        );
        assert!(
            many_text(&[gcra], Micros::ZERO).is_none(),
            "one limit has its own"
        );
        assert!(many_text(&[gcra; MAX_LIMITS], Micros::ZERO).is_some());
        assert!(many_text(&[gcra; MAX_LIMITS + 1], Micros::ZERO).is_none());
        for odd in [
            Spec {
                count_denied: true,
                ..gcra
            },
            spec(Algorithm::LeakyBucket, 10),
            spec(Algorithm::Concurrency, 10),
        ] {
            assert!(many_text(&[gcra, odd], Micros::ZERO).is_none(), "{odd:?}");
        }
    }
}
