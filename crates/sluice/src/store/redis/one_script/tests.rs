use super::*;

fn spec(algorithm: Algorithm, count: u64) -> Spec {
    Spec {
        guarded: true,
        warn_after: Some(3),
        ..Spec::plain(algorithm, count)
    }
}

/// The constants line of a script, as `name = value` pairs.
fn constants(text: &str) -> Vec<(String, String)> {
    let line = text.lines().next().expect("constants");
    let (names, values) = line
        .strip_prefix("local ")
        .and_then(|l| l.split_once(" = "))
        .expect("local <names> = <values>");
    names
        .split(", ")
        .map(str::to_string)
        .zip(values.split(", ").map(str::to_string))
        .collect()
}

fn constant(text: &str, name: &str) -> String {
    constants(text)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .expect("the constant is written")
}

#[test]
fn a_script_opens_with_its_constants_then_the_algorithms_script() {
    let gcra = spec(Algorithm::Gcra, 100);
    let text = one_text(&gcra, Micros::ZERO).expect("gcra has a one-limit script");
    let (first, body) = text.split_once('\n').expect("two parts");
    assert_eq!(
        first,
        "local min_ttl, limit, window, capacity, count_denied, guarded, warn_after, \
         time_deferred, packed_slots, now_at = 0, 100, 60000000, 100, false, true, 3, true, \
         false, 2"
    );
    let gcra_body = source::forms(Algorithm::Gcra)
        .one
        .as_deref()
        .expect("a one-limit GCRA");
    let code = format!("{NOW}{}", write_marker_answers(gcra_body));
    let declared = declare(&code);
    assert!(declared.contains("MARKER_BYTE"), "{declared}");
    assert_eq!(body, format!("{declared}{code}"));
    // Every reply ends with the violations and the warning, which an unguarded limit's
    // script leaves out.
    for algorithm in Algorithm::ALL {
        let Some(body) = source::forms(algorithm).one.as_deref() else {
            continue;
        };
        let returns = body.matches("return { now,").count();
        assert_eq!(body.matches(GUARD_VALUES).count(), returns, "{algorithm}");
        let plain = one_text(&Spec::plain(algorithm, 10), Micros::ZERO).expect("a script");
        assert!(!plain.contains("violations, warning }"), "{algorithm}");
        // A marker's answer is written where each script asks for it: no function is made.
        let guarded = one_text(&spec(algorithm, 10), Micros::ZERO).expect("a script");
        let mut lines = guarded
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"));
        assert!(!lines.any(|l| l.contains("from_marker")), "{algorithm}");
        assert_eq!(
            guarded
                .matches("string.byte(held, 1) == MARKER_BYTE")
                .count(),
            body.matches("return from_marker(").count(),
            "{algorithm}"
        );
        assert!(body.contains("return from_marker("), "{algorithm}");
        // `time_deferred` is a boolean, the packed answer's modulus a number or false: one
        // meaning each.
        assert!(matches!(
            constant(&guarded, "time_deferred").as_str(),
            "true" | "false"
        ));
    }
    let unpenalized = Spec {
        warn_after: None,
        ..gcra
    };
    let text = one_text(&unpenalized, Micros::ZERO).expect("a script");
    assert_eq!(constant(&text, "warn_after"), "nil");
    let leaky = spec(Algorithm::LeakyBucket, 100);
    assert_eq!(
        one_text(&leaky, Micros::ZERO),
        None,
        "no one-limit leaky bucket"
    );
    assert_eq!(
        one_text(&spec(Algorithm::Concurrency, 1), Micros::ZERO),
        None
    );
}

#[test]
fn only_a_fixed_window_of_whole_ms_packs_and_a_guarded_gcra_reads_the_time_late() {
    // Only a fixed window of whole ms counts in marked windows, and only where keys live no
    // longer than their state matters. Such a script packs its admissions into one number, with
    // the slots' modulus written in (`codec::marked`); a limit whose numbers leave none reads TIME.
    let fixed = Spec::plain(Algorithm::FixedWindow, 10);
    let timing = |spec: &Spec, min_ttl: u64| {
        let text = one_text(spec, Micros::new(min_ttl)).expect("a script");
        (
            constant(&text, "time_deferred"),
            constant(&text, "packed_slots"),
        )
    };
    let packed = |spec: &Spec, min_ttl: u64| timing(spec, min_ttl).1 != "false";
    assert_eq!(
        timing(&fixed, 0),
        (
            "true".to_string(),
            super::super::constants::FIXED_WINDOW_SLOTS.to_string()
        )
    );
    let huge = Spec {
        count: 1 << 40,
        ..fixed
    };
    assert_eq!(timing(&huge, 0), ("false".into(), "false".into()));
    assert!(!packed(&fixed, 1));
    let odd = Spec {
        window_us: 1500,
        ..fixed
    };
    assert!(!packed(&odd, 0));
    let guarded = Spec {
        guarded: true,
        ..fixed
    };
    assert!(packed(&guarded, 0));
    assert_eq!(
        timing(&Spec::plain(Algorithm::Gcra, 10), 0),
        ("false".into(), "false".into())
    );
    // A GCRA limit with a block or a penalty reads TIME after its key.
    let blocked_gcra = Spec {
        warn_after: None,
        ..spec(Algorithm::Gcra, 10)
    };
    assert_eq!(timing(&blocked_gcra, 0), ("true".into(), "false".into()));
    assert_eq!(timing(&blocked_gcra, 1), ("false".into(), "false".into()));
}
