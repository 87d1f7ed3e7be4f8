//! The translation of a Limitador limits file, checked on the model and read back as text.

use std::path::Path;

use sluice::model::{Matcher, OverrideOutcome};

use super::import;
use crate::import::envoy_ratelimit::tests::reads_back;
use crate::import::report::Report;

#[test]
fn the_fixture_reads_back_and_keeps_limitadors_meaning() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/limitador.yaml");
    let mut report = Report::default();
    let imported = import(&path, true, &mut report).unwrap();
    reads_back(&imported);
    let rule = &imported.rules[0].rule;
    // A variable the request lacks: the limit does not apply (rather than a missing attribute).
    let reads = &rule.limits[0];
    assert_eq!(
        reads.when.as_ref().unwrap().0["user_id"],
        Matcher::Present(true)
    );
    // `!=` holds only when the entry is there: present, and left out for the value.
    let posts = &rule.limits[1];
    assert_eq!(
        posts.when.as_ref().unwrap().0["req_path"],
        Matcher::Present(true)
    );
    assert!(matches!(
        posts.overrides[0].outcome,
        OverrideOutcome::Unlimited
    ));
    assert!(rule.limits.iter().all(|l| !l.count_denied));
    let lost = |word: &str| report.losses.iter().any(|l| l.message.contains(word));
    assert!(lost("`||` has no Sluice form"));
    assert!(lost("descriptors[1]"));
    assert!(lost("Limitador keeps one"));
    assert!(lost("first request"));
    let without_envoy = import(&path, false, &mut Report::default()).unwrap();
    assert!(without_envoy.envoy.is_empty());
    reads_back(&without_envoy);
}
