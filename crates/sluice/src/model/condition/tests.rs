use super::*;

fn condition(yaml_json: &str) -> Condition {
    serde_json::from_str(yaml_json).expect("a valid condition")
}

#[test]
fn every_matcher_form() {
    let c = condition(
        r#"{"method": "POST", "plan": ["pro", "enterprise"], "path": {"prefix": "/api/"},
            "member": {"present": true}, "debug": {"present": false},
            "ip": {"cidr": ["203.0.113.0/24", "2001:db8::/32"]}, "tenant": {"not": ["a", "b"]}}"#,
    );
    let mut attrs = vec![
        ("method", "POST"),
        ("plan", "pro"),
        ("path", "/api/x"),
        ("member", "m1"),
        ("ip", "203.0.113.7"),
        ("tenant", "c"),
    ];
    assert!(c.holds(attrs.as_slice()));
    attrs[5].1 = "a";
    assert!(!c.holds(attrs.as_slice()), "not");
    attrs[5].1 = "c";
    attrs[4].1 = "2001:db8:1:2::/64";
    assert!(c.holds(attrs.as_slice()), "a network inside the range");
    attrs[4].1 = "2001:db9::1";
    assert!(!c.holds(attrs.as_slice()), "outside every network");
    attrs[4].1 = "not-an-address";
    assert!(!c.holds(attrs.as_slice()));
    attrs[4].1 = "203.0.113.255";
    attrs.push(("debug", "1"));
    assert!(!c.holds(attrs.as_slice()), "present: false");
    attrs.pop();
    attrs[3].1 = "";
    assert!(!c.holds(attrs.as_slice()), "an empty value is absent");
    assert!(Condition::default().holds(&[("a", "b")]));
}

#[test]
fn scalars_compare_as_text_and_round_trip() {
    let c = condition(r#"{"tenant": 42, "beta": true, "ip": {"cidr": "10.0.0.0/8"}}"#);
    assert!(c.holds(&[("tenant", "42"), ("beta", "true"), ("ip", "10.1.2.3")]));
    let back: Condition = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
    assert_eq!(back, c);
}

#[test]
fn bad_matchers_are_refused_with_the_reason() {
    let error = |text: &str| {
        serde_json::from_str::<Condition>(text)
            .unwrap_err()
            .to_string()
    };
    assert!(error(r#"{"ip": {"cidr": ["300.0.0.0/8"]}}"#).contains("not a network"));
    assert!(error(r#"{"ip": {"cidr": ["10.0.0.1/8"]}}"#).contains("host bits"));
    assert!(error(r#"{"p": {"prefix": "a", "present": true}}"#).contains("one form"));
    assert!(error(r#"{"p": {"regex": "a"}}"#).contains("unknown matcher"));
    assert!(error(r#"{"p": {}}"#).contains("empty matcher"));
    let bad_name = condition(r#"{"Plan": "pro"}"#);
    assert_eq!(bad_name.validate().unwrap_err().field, "Plan");
    let empty_set = condition(r#"{"plan": []}"#);
    assert_eq!(empty_set.validate().unwrap_err().field, "plan");
}

#[test]
fn implication_finds_shadowed_conditions() {
    let implies = |a: &str, b: &str| condition(a).implies(&condition(b));
    assert!(implies(r#"{"plan": "pro"}"#, r#"{"plan": ["pro", "ent"]}"#));
    assert!(!implies(
        r#"{"plan": ["pro", "free"]}"#,
        r#"{"plan": ["pro", "ent"]}"#
    ));
    assert!(implies(
        r#"{"plan": "pro", "ip": "1"}"#,
        r#"{"plan": "pro"}"#
    ));
    assert!(!implies(
        r#"{"plan": "pro"}"#,
        r#"{"plan": "pro", "ip": "1"}"#
    ));
    assert!(implies(
        r#"{"p": {"prefix": "/api/v1"}}"#,
        r#"{"p": {"prefix": "/api/"}}"#
    ));
    assert!(implies(
        r#"{"p": "/api/x"}"#,
        r#"{"p": {"prefix": "/api/"}}"#
    ));
    assert!(implies(
        r#"{"ip": {"cidr": ["10.1.0.0/16"]}}"#,
        r#"{"ip": {"cidr": ["10.0.0.0/8"]}}"#
    ));
    assert!(implies(r#"{"p": "x"}"#, r#"{"p": {"present": true}}"#));
    assert!(
        implies(r#"{"p": "x"}"#, "{}"),
        "an empty condition holds for all"
    );
    assert!(!implies(
        r#"{"p": {"not": "x"}}"#,
        r#"{"p": {"present": true}}"#
    ));
}
