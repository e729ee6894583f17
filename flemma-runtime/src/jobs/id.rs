//! Fresh job ids.

use flemma_ids::JobId;

/// The characters of a job id's random part.
const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A fresh job id (`job_` and eight characters of `[a-z0-9]` from the OS's randomness),
/// drawn again while `taken` says it is in use, at most 100 times.
pub fn new_job_id(taken: impl Fn(&str) -> bool) -> JobId {
    let mut id = random_id();
    for _ in 0..100 {
        if !taken(&id) {
            break;
        }
        id = random_id();
    }
    JobId::sanitized(&id)
}

fn random_id() -> String {
    let mut bytes = [0_u8; 8];
    fill_random(&mut bytes);
    let mut id = String::with_capacity(12);
    id.push_str("job_");
    id.extend(
        bytes
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
    );
    id
}

/// OS randomness; a clock- and counter-based fallback where the OS gives none.
fn fill_random(bytes: &mut [u8]) {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::io::Read as _;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(bytes))
        .is_ok()
    {
        return;
    }
    for (i, byte) in bytes.iter_mut().enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        hasher.write_usize(i);
        *byte = hasher.finish().to_le_bytes()[0];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_have_the_spec_shape() {
        let id = new_job_id(|_| false);
        let rest = id.as_str().strip_prefix("job_").unwrap_or_default();
        assert_eq!(rest.len(), 8);
        assert!(rest.bytes().all(|b| ALPHABET.contains(&b)));
    }

    #[test]
    fn taken_ids_are_drawn_again() {
        let first = new_job_id(|_| false);
        let next = new_job_id(|id| id == first.as_str());
        assert_ne!(first, next);
    }
}
