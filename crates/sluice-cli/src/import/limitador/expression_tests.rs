//! The expression subset: what parses, and what is refused rather than misread.
use super::*;

fn e(key: &str) -> Entry {
    Entry {
        descriptor: 0,
        key: key.into(),
        legacy: false,
    }
}

#[test]
fn the_subset_parses() {
    assert_eq!(
        condition("descriptors[0].m == 'GET'").unwrap(),
        [Test::Equals(e("m"), "GET".into())]
    );
    assert_eq!(
        condition("descriptors[0]['req.method'] != \"POST\"").unwrap(),
        [Test::Not(Box::new(Test::Equals(
            e("req.method"),
            "POST".into()
        )))]
    );
    assert_eq!(
        condition("'GET' == descriptors[0].m").unwrap(),
        [Test::Equals(e("m"), "GET".into())]
    );
    assert_eq!(
        condition("descriptors[0].p.startsWith('/api/') && descriptors[0].m in ['GET', 'HEAD']")
            .unwrap(),
        [
            Test::Prefix(e("p"), "/api/".into()),
            Test::OneOf(e("m"), vec!["GET".into(), "HEAD".into()])
        ]
    );
    assert_eq!(
        condition("!has(descriptors[0].u)").unwrap(),
        [Test::Not(Box::new(Test::Present(e("u"))))]
    );
    assert_eq!(
        condition("'u' in descriptors[0]").unwrap(),
        [Test::Present(e("u"))]
    );
    assert_eq!(
        condition("!(descriptors[0].m != 'x')").unwrap(),
        [Test::Equals(e("m"), "x".into())]
    );
    let legacy = condition("req.method == 'GET'").unwrap();
    assert_eq!(
        legacy,
        [Test::Equals(
            Entry {
                descriptor: 0,
                key: "req.method".into(),
                legacy: true
            },
            "GET".into()
        )]
    );
    assert_eq!(variable("descriptors[1]['user']").unwrap().descriptor, 1);
    assert_eq!(
        variable("user_id").unwrap(),
        Entry {
            descriptor: 0,
            key: "user_id".into(),
            legacy: true
        }
    );
}

#[test]
fn the_rest_is_refused_not_misread() {
    for src in [
        "descriptors[0].a == 'x' || descriptors[0].b == 'y'",
        "size(descriptors[0].a) > 3",
        "descriptors[0].a == 'x' extra",
        "limit.name == 'x'",
        "descriptors[0].a.endsWith('x')",
        "'unterminated",
        "descriptors[0].a == 1",
        "!(descriptors[0].a == 'x' && descriptors[0].b == 'y')",
        &"(".repeat(100),
        "",
    ] {
        assert!(condition(src).is_err(), "{src}");
    }
    assert!(variable("descriptors[0].a + 'x'").is_err());
}
