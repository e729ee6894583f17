//! The names the model sees: `SERVER.tool`, sanitised to the tool-name rule, collisions
//! resolved deterministically.

use std::collections::BTreeSet;

use flemma_ids::ToolName;

/// The longest wire name (`server__tool`) the providers accept (OpenAI and Anthropic allow 64
/// characters of `[A-Za-z0-9_-]`).
pub const MAX_WIRE_NAME: usize = 64;

/// The name a server's tool is registered under, before collisions: `SERVER.TOOL`, where the
/// tool's name keeps its letters, digits, `_`, `-` and `.` (segments), every other character
/// becomes `_`, runs of `_` shrink to one (a `__` would read as a separator on the wire) and
/// empty segments are dropped.
///
/// ```
/// use flemma_mcp::registered_name;
///
/// assert_eq!(registered_name("everything", "get-sum"), "everything.get-sum");
/// assert_eq!(registered_name("fs", "read file"), "fs.read_file");
/// assert_eq!(registered_name("fs", "a__b"), "fs.a_b");
/// assert_eq!(registered_name("gh", "repos.list"), "gh.repos.list");
/// assert_eq!(registered_name("x", "?"), "x._");
/// ```
pub fn registered_name(server: &str, tool: &str) -> ToolName {
    let mut collapsed = String::with_capacity(tool.len());
    for c in tool.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
            c
        } else {
            '_'
        };
        if !(c == '_' && collapsed.ends_with('_')) {
            collapsed.push(c);
        }
    }
    // `collapsed` holds no `__` and no character outside the rule; `sanitized` drops the
    // empty segments and joins the namespace.
    ToolName::sanitized(&format!("{server}.{collapsed}"))
}

/// One tool's registered name, and what changed about it (for a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assigned {
    /// The tool's name on the server.
    pub(crate) original: String,
    /// Its name in the registry.
    pub(crate) name: ToolName,
    /// Set when `name` is not `SERVER.original`: why.
    pub(crate) note: Option<String>,
}

/// Names for a server's tools, in the order given (the server's list order): each gets
/// [`registered_name`]; a name already given to an earlier tool gets the first free suffix
/// `-2`, `-3`, … Tools are sorted by their server name first, so the result does not depend
/// on the order the server lists them in.
pub(crate) fn assign(server: &str, tools: &[&str]) -> Vec<Assigned> {
    let mut sorted: Vec<&str> = tools.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut taken = BTreeSet::new();
    let mut assigned = Vec::with_capacity(sorted.len());
    for original in sorted {
        let base = registered_name(server, original);
        let mut name = base.clone();
        let mut n = 2;
        while taken.contains(&name) {
            // A `-N` suffix keeps the rule (no `__`, no empty segment).
            name = ToolName::sanitized(&format!("{base}-{n}"));
            n += 1;
        }
        let note = if taken.contains(&base) {
            Some(format!(
                "tool '{original}' registered as '{name}': '{base}' is another tool's name"
            ))
        } else if name.as_str() != format!("{server}.{original}") {
            Some(format!(
                "tool '{original}' registered as '{name}' (the tool-name rule)"
            ))
        } else {
            None
        };
        taken.insert(name.clone());
        assigned.push(Assigned {
            original: original.to_owned(),
            name,
            note,
        });
    }
    assigned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collisions_get_suffixes_in_name_order_whatever_the_list_order() {
        let names = |tools: &[&str]| -> Vec<(String, String)> {
            assign("s", tools)
                .into_iter()
                .map(|a| (a.original, a.name.to_string()))
                .collect()
        };
        let expected = vec![
            ("a b".to_owned(), "s.a_b".to_owned()),
            ("a?b".to_owned(), "s.a_b-2".to_owned()),
            ("a_b".to_owned(), "s.a_b-3".to_owned()),
        ];
        assert_eq!(names(&["a_b", "a?b", "a b"]), expected);
        assert_eq!(names(&["a b", "a_b", "a?b"]), expected);
    }

    #[test]
    fn notes_say_why_a_name_changed() {
        let assigned = assign("s", &["ok", "not ok", "not_ok"]);
        let notes: Vec<Option<&str>> = assigned.iter().map(|a| a.note.as_deref()).collect();
        assert_eq!(
            notes,
            [
                Some("tool 'not ok' registered as 's.not_ok' (the tool-name rule)"),
                Some("tool 'not_ok' registered as 's.not_ok-2': 's.not_ok' is another tool's name"),
                None,
            ]
        );
    }
}
