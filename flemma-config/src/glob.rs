//! The glob dialect of tool names (spec §5.4): `*` matches any run of characters, dots
//! included; everything else is literal; the match is anchored at both ends.

/// Whether `name` matches `pattern`.
///
/// ```
/// assert!(flemma_config::glob_match("flemma.*", "flemma.jobs.status"));
/// assert!(flemma_config::glob_match("*_status", "job_status"));
/// assert!(!flemma_config::glob_match("flemma.*", "flemma"));
/// assert!(flemma_config::glob_match("bash", "bash"));
/// ```
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p = pattern.as_bytes();
    let n = name.as_bytes();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((star_p, star_n)) = star {
            pi = star_p + 1;
            ni = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn matches() {
        for (pattern, name, expected) in [
            ("*", "anything.at.all", true),
            ("*", "", true),
            ("a*c", "abbc", true),
            ("a*c", "abcd", false),
            ("*.*", "a.b", true),
            ("flemma.*", "flemma.", true),
            ("?", "?", true),
            ("?", "a", false),
            ("[ab]", "a", false),
            ("mcp.*.read", "mcp.fs.read", true),
            ("mcp.*.read", "mcp.fs.write", false),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} ~ {name}");
        }
    }
}
