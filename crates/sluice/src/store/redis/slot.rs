//! Redis Cluster hash slots: which of the 16,384 slots a key belongs to.
//!
//! A slot is CRC16 (XMODEM) of the key's hash tag — the text between the first `{` and the next
//! `}`, when not empty — else of the whole key, modulo 16,384. Sluice puts the escaped identity in
//! the tag (see [`super::keys`]), so every key of one limit and identity shares a slot; the store
//! groups the limits of a request by slot to decide them in as few script calls as possible.

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16_384;

/// The slot of a Redis key.
pub fn of_key(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % SLOTS
}

/// The slot of every key of an identity whose escaped form is `identity` (its hash tag): what
/// [`of_key`] finds for each of them, as its test checks.
#[cfg(test)]
fn of_identity(identity: &str) -> u16 {
    crc16(identity.as_bytes()) % SLOTS
}

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster computes it.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        // CLUSTER KEYSLOT answers, Redis 7.0.
        assert_eq!(of_key(b"foo"), 12182);
        assert_eq!(of_key(b"{user1000}.following"), of_key(b"user1000"));
        assert_eq!(of_key(b"foo{}{bar}"), of_key(b"foo{}{bar}"));
        assert_eq!(of_key(b"sluice:r:l:{ip=1}:c"), of_identity("ip=1"));
    }
}
