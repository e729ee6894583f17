//! Option paths: `.`-separated segments, where a segment in double quotes may hold dots.
//!
//! Tool names may contain `.` (`mcp.fs.read`), so the table of such a tool is written with the
//! name quoted, as TOML writes the key: `tools."mcp.fs.read".cwd`. Tables built by nesting
//! (`[tools."mcp.fs.read"]` in TOML, `{"tools": {"mcp.fs.read": {...}}}` in JSON,
//! `flemma.opt.tools["mcp.fs.read"]` in Lua) keep each key as one segment. An unquoted
//! `tools.mcp.fs.read.cwd` names the key `fs.read.cwd` of a tool `mcp`: nothing guesses where a
//! tool name ends.

use crate::error::ConfigError;

/// The segments of a path, quotes removed.
///
/// # Errors
///
/// [`ConfigError::UnknownOption`] for an empty segment or an unclosed quote.
pub(crate) fn split(path: &str) -> Result<Vec<&str>, ConfigError> {
    let malformed = || ConfigError::UnknownOption {
        path: path.to_owned(),
        suggestion: None,
    };
    let mut segments = Vec::new();
    let mut rest = path;
    loop {
        let (segment, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or_else(malformed)?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        if segment.is_empty() {
            return Err(malformed());
        }
        segments.push(segment);
        if after.is_empty() {
            return Ok(segments);
        }
        rest = after.strip_prefix('.').ok_or_else(malformed)?;
    }
}

/// Appends one key to a path (an empty parent gives the key as it is: top-level keys of a
/// file or a frontmatter are paths), quoting the key when it holds a `.`.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{}", quote(key))
    }
}

/// Joins segments into the canonical spelling: quotes only where a segment holds a `.`.
pub(crate) fn canonical(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| quote(s))
        .collect::<Vec<_>>()
        .join(".")
}

fn quote(segment: &str) -> std::borrow::Cow<'_, str> {
    if segment.contains('.') {
        format!("\"{segment}\"").into()
    } else {
        segment.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_segments_keep_their_dots() {
        assert_eq!(
            split("tools.\"mcp.fs.read\".cwd").ok(),
            Some(vec!["tools", "mcp.fs.read", "cwd"])
        );
        assert_eq!(split("tools.bash").ok(), Some(vec!["tools", "bash"]));
        assert_eq!(split("\"a.b\"").ok(), Some(vec!["a.b"]));
        for bad in ["", "a..b", "a.", ".a", "a.\"b", "a.\"b\"c", "a.\"\""] {
            assert!(split(bad).is_err(), "{bad}");
        }
        assert_eq!(
            canonical(&["tools", "mcp.fs.read", "cwd"]),
            "tools.\"mcp.fs.read\".cwd"
        );
        assert_eq!(
            canonical(&split("tools.\"bash\".cwd").unwrap_or_default()),
            "tools.bash.cwd"
        );
        assert_eq!(join("tools", "mcp.fs"), "tools.\"mcp.fs\"");
        assert_eq!(join("", "tools.max_concurrent"), "tools.max_concurrent");
    }
}
