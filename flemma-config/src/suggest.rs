//! "Did you mean".

/// The candidate closest to `word` by Levenshtein distance, when it is at most 3 away (ties:
/// the first found).
///
/// ```
/// assert_eq!(flemma_config::did_you_mean("bsh", ["bash", "read"]), Some("bash"));
/// assert_eq!(flemma_config::did_you_mean("something", ["bash"]), None);
/// ```
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(&str, usize)> = None;
    for candidate in candidates {
        let distance = levenshtein(word, candidate);
        if distance <= 3 && best.is_none_or(|(_, d)| distance < d) {
            best = Some((candidate, distance));
        }
    }
    best.map(|(c, _)| c)
}

/// Edit distance over characters.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("bash", "bash"), 0);
        assert_eq!(did_you_mean("gerp", ["grep", "read"]), Some("grep"));
        assert_eq!(
            did_you_mean("rad", ["read", "rag"]),
            Some("read"),
            "ties keep the first"
        );
    }
}
