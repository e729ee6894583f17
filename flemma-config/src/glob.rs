//! The glob dialect of tool names: `*` matches any run of characters, dots
//! included; everything else is literal; the match is anchored at both ends.
//!
//! One matcher serves every crate: [`GlobList`] compiles patterns with `globset` (every
//! character but `*` escaped, `*` free to cross any separator), and [`glob_match`] is the
//! one-pattern shorthand. `flemma-approval` matches `tools.auto_approve` through a
//! [`GlobList`], the `tools` list expands through [`glob_match`].

use std::collections::HashMap;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Whether `name` matches `pattern`.
///
/// A pattern without `*` is compared as it is; others are compiled on every call (tens of
/// microseconds: globset builds its matchers), so a caller matching one pattern against many
/// names, or many patterns against one name, builds a [`GlobList`] once instead.
///
/// ```
/// assert!(flemma_config::glob_match("flemma.*", "flemma.jobs.status"));
/// assert!(flemma_config::glob_match("*_status", "job_status"));
/// assert!(!flemma_config::glob_match("flemma.*", "flemma"));
/// assert!(flemma_config::glob_match("bash", "bash"));
/// ```
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if pattern.contains('*') {
        GlobList::new([pattern]).is_match(name)
    } else {
        pattern == name
    }
}

/// Tool-name patterns compiled once, to match many names.
///
/// Patterns without `*` are exact names, looked up in a hash map; the others go into one
/// `globset` set. [`GlobList::first_match`] says which pattern matched, for traces.
///
/// ```
/// use flemma_config::GlobList;
///
/// let list = GlobList::new(["read", "mcp.*", "*.read"]);
/// assert_eq!(list.first_match("read"), Some("read"));
/// assert_eq!(list.first_match("mcp.fs.read"), Some("mcp.*"));
/// assert_eq!(list.first_match("fs.read"), Some("*.read"));
/// assert_eq!(list.first_match("write"), None);
/// ```
#[derive(Debug, Clone)]
pub struct GlobList {
    patterns: Vec<String>,
    /// Pattern without `*` → its first index in `patterns`.
    exact: HashMap<String, usize>,
    globs: GlobSet,
    /// Index in `globs` → index in `patterns`.
    glob_patterns: Vec<usize>,
}

impl GlobList {
    /// Compiles `patterns`, in order.
    ///
    /// Every pattern compiles: all characters but `*` are escaped. (One the matcher still
    /// refused, which only a pattern of many kilobytes could provoke, would match nothing.)
    pub fn new<I, S>(patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let patterns: Vec<String> = patterns.into_iter().map(Into::into).collect();
        let mut exact = HashMap::new();
        let mut builder = GlobSetBuilder::new();
        let mut glob_patterns = Vec::new();
        for (index, pattern) in patterns.iter().enumerate() {
            if !pattern.contains('*') {
                exact.entry(pattern.clone()).or_insert(index);
                continue;
            }
            if let Ok(glob) = GlobBuilder::new(&escape(pattern))
                .literal_separator(false)
                .backslash_escape(false)
                .build()
            {
                builder.add(glob);
                glob_patterns.push(index);
            }
        }
        let globs = builder.build().unwrap_or_else(|_| {
            glob_patterns.clear();
            GlobSet::empty()
        });
        Self {
            patterns,
            exact,
            globs,
            glob_patterns,
        }
    }

    /// Whether any pattern matches `name`.
    pub fn is_match(&self, name: &str) -> bool {
        self.exact.contains_key(name) || self.globs.is_match(name)
    }

    /// The pattern matching `name`: the name itself when listed, else the first matching glob
    /// in list order.
    pub fn first_match(&self, name: &str) -> Option<&str> {
        if let Some(&index) = self.exact.get(name) {
            return Some(&self.patterns[index]);
        }
        if !self.globs.is_match(name) {
            return None;
        }
        let index = self
            .globs
            .matches(name)
            .into_iter()
            .map(|glob| self.glob_patterns[glob])
            .min()?;
        Some(&self.patterns[index])
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// `pattern` in globset's syntax: runs of `*` become one `*` (so none reads as `**`), every
/// other character is literal.
fn escape(pattern: &str) -> String {
    let mut escaped = String::with_capacity(pattern.len() + 8);
    let mut parts = pattern.split('*').peekable();
    while let Some(literal) = parts.next() {
        escaped.push_str(&globset::escape(literal));
        if parts.peek().is_some() && !escaped.ends_with('*') {
            escaped.push('*');
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::{GlobList, glob_match};

    #[test]
    fn matches() {
        for (pattern, name, expected) in [
            ("*", "anything.at.all", true),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*c", "abbc", true),
            ("a*c", "abcd", false),
            ("*.*", "a.b", true),
            ("flemma.*", "flemma.", true),
            ("?", "?", true),
            ("?", "a", false),
            ("[ab]", "a", false),
            ("[ab]", "[ab]", true),
            ("{a,b}", "a", false),
            ("{a,b}*", "{a,b}c", true),
            ("a\\*", "a\\b", true),
            ("a\\*", "ab", false),
            ("a**b", "axyb", true),
            ("**.read", "mcp.fs.read", true),
            ("a/*", "a/b/c", true),
            ("mcp.*.read", "mcp.fs.read", true),
            ("mcp.*.read", "mcp.fs.write", false),
            ("*ea*", "mcp.fs.read", true),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} ~ {name}");
            assert_eq!(
                GlobList::new([pattern]).is_match(name),
                expected,
                "{pattern} ~ {name} in a list"
            );
        }
    }

    #[test]
    fn exact_names_win_then_the_first_glob_in_list_order() {
        let list = GlobList::new(["*.read", "fs.*", "fs.read", "fs.*"]);
        assert_eq!(list.first_match("fs.read"), Some("fs.read"));
        assert_eq!(list.first_match("fs.write"), Some("fs.*"));
        assert_eq!(list.first_match("mcp.read"), Some("*.read"));
        assert_eq!(list.first_match("read"), None);
        assert!(!GlobList::new(Vec::<String>::new()).is_match(""));
    }
}
