//! `Name`: a rule's, a limit's or an attribute's name as a decision carries it.
//!
//! Every decision repeats the names of its rule, its limits and the attributes that formed each
//! identity. Copying them into fresh strings would cost allocations per check, and sharing them
//! through reference counts would make every check of a rule write to the same counters from
//! every thread. So rule compilation *interns* its names: each distinct name is stored once for
//! the life of the process and a `Name` of it is a plain pointer, copied for free.
//!
//! Invariant: interning is bounded. At most [`MAX_INTERNED`] distinct names (and
//! [`MAX_INTERNED_BYTES`] bytes) are ever kept; past that, names are reference-counted instead.
//! Only rule compilation interns (names from the operator's rules), never a name read from input.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most distinct names interned by one process.
pub const MAX_INTERNED: usize = 65_536;
/// Most bytes of interned names kept by one process.
pub const MAX_INTERNED_BYTES: usize = 4 << 20;

/// An immutable name, cheap to clone (see the module docs). Compares, hashes, orders, prints and
/// serializes as the string it holds.
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    Interned(&'static str),
    Shared(Arc<str>),
}

struct Interner {
    names: HashSet<&'static str>,
    bytes: usize,
}

static INTERNER: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    Mutex::new(Interner {
        names: HashSet::new(),
        bytes: 0,
    })
});

impl Name {
    /// The interned name `text`, stored once per process; reference-counted instead once the
    /// process has interned `MAX_INTERNED` (65,536) names or `MAX_INTERNED_BYTES` (4 MiB) of them.
    pub fn interned(text: &str) -> Name {
        let mut interner = INTERNER.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&kept) = interner.names.get(text) {
            return Name(Repr::Interned(kept));
        }
        if interner.names.len() >= MAX_INTERNED || interner.bytes + text.len() > MAX_INTERNED_BYTES
        {
            return Name::from(text);
        }
        let kept: &'static str = Box::leak(text.into());
        interner.names.insert(kept);
        interner.bytes += kept.len();
        Name(Repr::Interned(kept))
    }

    /// The name as a string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Interned(text) => text,
            Repr::Shared(text) => text,
        }
    }
}

impl Deref for Name {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name(Repr::Shared(text.into()))
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name(Repr::Shared(text.into()))
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.as_str().to_string()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    /// Never interned: a decision read from input must not grow the process's names.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Name, D::Error> {
        String::deserialize(deserializer).map(Name::from)
    }
}

/// Whether two names (or other short texts: a key's parts, an identity) are equal. Names are
/// mostly a few bytes long: up to 16 they are compared as two overlapping words each, where a
/// slice comparison calls `memcmp` (in the memory store, three calls a lookup, about a twentieth
/// of a decision on a hot key; in a request's attributes, one per name looked at).
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    let half = |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap_or([0; 4]));
    match n {
        0..4 => a.iter().zip(b).all(|(x, y)| x == y),
        4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_print_and_serialize_as_strings() {
        // (Whether it is interned depends on the caps, which another test fills.)
        let a = Name::interned("name-test-login");
        assert_eq!(a, Name::from("name-test-login"));
        assert_eq!(a, "name-test-login");
        assert_eq!("name-test-login", a);
        assert_eq!(a.to_string(), "name-test-login");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"name-test-login\"");
        let read: Name = serde_json::from_str("\"name-test-login\"").unwrap();
        assert_eq!(read, a);
    }

    #[test]
    fn interning_stops_at_its_caps() {
        // The only test that fills the caps: before it, names are interned once.
        let interned = Name::interned("name-test-kept");
        let again = Name::interned(&String::from("name-test-kept"));
        assert!(std::ptr::eq(interned.as_str(), again.as_str()));
        let is_interned = |name: &Name| matches!(name.0, Repr::Interned(_));
        // The byte cap: large names reach it first (interned names are never freed).
        let big = |i: usize| format!("{i:08}{}", "x".repeat(64 * 1024));
        let mut i = 0;
        while is_interned(&Name::interned(&big(i))) {
            i += 1;
            assert!(
                i <= MAX_INTERNED_BYTES / (64 * 1024),
                "interned past the byte cap"
            );
        }
        assert!(
            is_interned(&Name::interned("name-test-small")),
            "small names still fit"
        );
        // The count cap.
        let mut i = 0;
        while is_interned(&Name::interned(&format!("name-test-{i}"))) {
            i += 1;
            assert!(i <= MAX_INTERNED, "interned past the count cap");
        }
        // Past the caps: names are reference-counted (each call its own), yet equal as strings.
        let (a, b) = (
            Name::interned("name-test-late"),
            Name::interned("name-test-late"),
        );
        assert!(!is_interned(&a));
        assert!(!std::ptr::eq(a.as_str(), b.as_str()));
        assert_eq!(a, b);
        // Names interned before still are.
        assert!(std::ptr::eq(
            interned.as_str(),
            Name::interned("name-test-kept").as_str()
        ));
    }

    #[test]
    fn short_texts_compare_as_slices_do_at_every_length() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(same_bytes(&a, &a.clone()), "length {n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] = b'#';
                assert!(!same_bytes(&a, &b), "length {n}, differing at {at}");
            }
            let longer = [a.as_slice(), b"z"].concat();
            assert!(
                !same_bytes(&a, &longer) && !same_bytes(&longer, &a),
                "lengths {n} and {}",
                n + 1
            );
        }
    }
}
