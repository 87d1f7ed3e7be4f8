//! How the memory store names a key: `rule\0limit\0identity` in one piece, inline when short.
//!
//! A lookup compares the request's three parts with the stored bytes directly, so a check needs
//! no joined key of its own, and a key of up to [`INLINE`] bytes (a rule, a limit id and an IPv4
//! or user identity) lives inside its table entry: no allocation to create it, no pointer to
//! follow to compare it. No part contains a NUL (names and escaped identities are printable), so
//! the joined form is unambiguous.

use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroU8;

use crate::model::same_bytes;
use crate::store::{KeyRef, LimitKey};

impl KeyRef<'_> {
    fn joined_len(&self) -> usize {
        self.rule.len() + self.limit_id.len() + self.identity.len() + 2
    }

    /// The key's hash under the store's seed. No separators: the parts are compared one by one
    /// on lookup, so `ab`+`c` and `a`+`bc` colliding costs a comparison, never a wrong answer.
    pub(super) fn hash_with(&self, seed: &impl BuildHasher) -> u64 {
        let mut h = seed.build_hasher();
        h.write(self.rule.as_bytes());
        h.write(self.limit_id.as_bytes());
        h.write(self.identity.as_bytes());
        h.finish()
    }
}

/// Keys up to this many bytes are stored inline (with the packed state, it keeps an entry to
/// one cache line).
pub(super) const INLINE: usize = 31;

/// A key as held by the store.
///
/// A joined key is never empty (it holds two separators), so an inline length of zero is free
/// to stand for the heap form: the compiler keeps the variant there, and the bytes get the byte a
/// separate tag would take.
#[derive(Debug)]
pub(super) enum StoredKey {
    Inline { len: NonZeroU8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

const _: () = assert!(std::mem::size_of::<StoredKey>() == INLINE + 1);

impl StoredKey {
    pub(super) fn new(key: KeyRef<'_>) -> StoredKey {
        let len = key.joined_len();
        let parts = [
            key.rule.as_bytes(),
            b"\0",
            key.limit_id.as_bytes(),
            b"\0",
            key.identity.as_bytes(),
        ];
        if let Some(inline_len) = NonZeroU8::new(len as u8).filter(|_| len <= INLINE) {
            let mut bytes = [0; INLINE];
            let mut at = 0;
            for part in parts {
                bytes[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            StoredKey::Inline {
                len: inline_len,
                bytes,
            }
        } else {
            StoredKey::Heap(parts.concat().into_boxed_slice())
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..usize::from(len.get())],
            StoredKey::Heap(bytes) => bytes,
        }
    }

    /// Whether this is `key`.
    pub(super) fn is(&self, key: KeyRef<'_>) -> bool {
        let b = self.bytes();
        if b.len() != key.joined_len() {
            return false;
        }
        let (rule, rest) = b.split_at(key.rule.len());
        let (limit, identity) = rest[1..].split_at(key.limit_id.len());
        same_bytes(rule, key.rule.as_bytes())
            && same_bytes(limit, key.limit_id.as_bytes())
            && same_bytes(&identity[1..], key.identity.as_bytes())
            && rest[0] == 0
            && identity[0] == 0
    }

    /// The same hash as [`KeyRef::hash_with`] of this key.
    pub(super) fn hash_with(&self, seed: &impl BuildHasher) -> u64 {
        let mut h = seed.build_hasher();
        for part in self.bytes().splitn(3, |&b| b == 0) {
            h.write(part);
        }
        h.finish()
    }

    /// The key in its owned form (for listings).
    pub(super) fn limit_key(&self) -> LimitKey {
        let mut parts = self
            .bytes()
            .splitn(3, |&b| b == 0)
            .map(String::from_utf8_lossy);
        let mut next = || parts.next().unwrap_or_default();
        LimitKey {
            rule: next().as_ref().into(),
            limit_id: next().as_ref().into(),
            identity: next().into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rule: &str, limit: &str, identity: &str) -> LimitKey {
        LimitKey {
            rule: rule.into(),
            limit_id: limit.into(),
            identity: identity.into(),
        }
    }

    #[test]
    fn short_keys_are_inline_long_ones_on_the_heap_and_both_round_trip() {
        let short = key("login", "ip", "ip=203.0.113.9");
        let long = key("login", "ip-gcra-1m", &format!("ip=~{}", "a".repeat(40)));
        // 31 bytes joined, then 32.
        let longest_inline = key("bench", "user-gcra-366d", "user=12345");
        let shortest_on_heap = key("bench", "user-gcra-366d", "user=123456");
        for (k, inline) in [
            (&short, true),
            (&long, false),
            (&longest_inline, true),
            (&shortest_on_heap, false),
        ] {
            let stored = StoredKey::new(k.into());
            assert_eq!(matches!(stored, StoredKey::Inline { .. }), inline);
            assert!(stored.is(k.into()));
            assert_eq!(&stored.limit_key(), k);
        }
    }

    #[test]
    fn a_stored_key_hashes_as_its_parts_do() {
        let seed = foldhash::fast::RandomState::default();
        for k in [
            key("login", "ip", "ip=203.0.113.9"),
            key("login", "ip", &format!("ip=~{}", "a".repeat(40))),
            key("r", "l", ""),
        ] {
            let parts = KeyRef::from(&k);
            assert_eq!(
                StoredKey::new(parts).hash_with(&seed),
                parts.hash_with(&seed)
            );
        }
    }

    #[test]
    fn parts_are_compared_where_they_are_not_only_as_a_whole() {
        let stored = StoredKey::new((&key("ab", "c", "d")).into());
        assert!(!stored.is((&key("a", "bc", "d")).into()));
        assert!(!stored.is((&key("ab", "c", "e")).into()));
        assert!(!stored.is((&key("ab", "c", "")).into()));
        assert!(stored.is((&key("ab", "c", "d")).into()));
    }
}
