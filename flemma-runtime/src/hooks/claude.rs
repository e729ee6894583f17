//! Claude Code's vocabulary for hooks written for it (`hooks.compat = "claude"`): tool names
//! (`Bash`, `Write`, `mcp__server__tool`) and input fields (`Write.file_path`), and the way
//! back for an `updatedInput`.

use std::path::Path;

use serde_json::{Map, Value};

/// One built-in tool's Claude Code name and its fields: (ours, Claude Code's).
struct Mapping {
    ours: &'static str,
    claude: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

/// The built-in tools as Claude Code names them (the book's "Hooks" chapter: the mapping table).
const MAPPINGS: &[Mapping] = &[
    Mapping {
        ours: "bash",
        claude: "Bash",
        fields: &[
            ("command", "command"),
            ("timeout", "timeout"),
            ("label", "description"),
        ],
    },
    Mapping {
        ours: "read",
        claude: "Read",
        fields: &[
            ("path", "file_path"),
            ("offset", "offset"),
            ("limit", "limit"),
        ],
    },
    Mapping {
        ours: "write",
        claude: "Write",
        fields: &[("path", "file_path"), ("content", "content")],
    },
    Mapping {
        ours: "edit",
        claude: "Edit",
        fields: &[
            ("path", "file_path"),
            ("oldText", "old_string"),
            ("newText", "new_string"),
        ],
    },
    Mapping {
        ours: "grep",
        claude: "Grep",
        fields: &[
            ("pattern", "pattern"),
            ("path", "path"),
            ("glob", "glob"),
            ("limit", "head_limit"),
        ],
    },
    Mapping {
        ours: "find",
        claude: "Glob",
        fields: &[("pattern", "pattern"), ("path", "path")],
    },
    Mapping {
        ours: "ls",
        claude: "LS",
        fields: &[("path", "path")],
    },
];

/// The fields that hold a file path: Claude Code shows them absolute.
const PATH_FIELDS: &[&str] = &["file_path", "path"];

fn mapping(tool: &str) -> Option<&'static Mapping> {
    MAPPINGS.iter().find(|m| m.ours == tool)
}

/// A tool's name in Claude Code's vocabulary: the built-ins by their Claude Code names
/// (`bash` → `Bash`, `find` → `Glob`), an MCP server's tool `server.tool` as
/// `mcp__server__tool`, `flemma.*` and names without a dot as they are.
///
/// ```
/// use flemma_runtime::hooks::claude_tool_name;
/// assert_eq!(claude_tool_name("write"), "Write");
/// assert_eq!(claude_tool_name("fs.read_file"), "mcp__fs__read_file");
/// assert_eq!(claude_tool_name("flemma.jobs.status"), "flemma.jobs.status");
/// ```
pub fn claude_tool_name(tool: &str) -> String {
    if let Some(m) = mapping(tool) {
        return m.claude.to_owned();
    }
    match tool.split_once('.') {
        Some((server, rest)) if server != "flemma" && !server.is_empty() && !rest.is_empty() => {
            format!("mcp__{server}__{rest}")
        }
        _ => tool.to_owned(),
    }
}

/// Our name of a tool Claude Code names `claude`: its built-ins (`Bash` → `bash`, `Glob` →
/// `find`), `Task` and `Agent` → `agent`, `mcp__server__tool` → `server.tool`; `None` for any
/// other name (ours already, or one of Claude Code's tools flemma does not have).
pub(crate) fn native_tool_name(claude: &str) -> Option<String> {
    if let Some(m) = MAPPINGS.iter().find(|m| m.claude == claude) {
        return Some(m.ours.to_owned());
    }
    if matches!(claude, "Task" | "Agent") {
        return Some(crate::agents::AGENT_TOOL.to_owned());
    }
    let (server, tool) = claude.strip_prefix("mcp__")?.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then(|| format!("{server}.{tool}"))
}

/// A call's input in Claude Code's vocabulary: the built-ins' fields renamed
/// (`path` → `file_path`, `oldText` → `old_string`), relative paths made absolute from
/// `cwd`, `bash`'s `timeout` in milliseconds; other fields and other tools as they are.
///
/// ```
/// use flemma_runtime::hooks::claude_input;
/// use serde_json::json;
/// let input = json!({"label": "fix", "path": "src/a.rs", "oldText": "a", "newText": "b"});
/// let shown = claude_input("edit", &input, "/p".as_ref());
/// assert_eq!(shown, json!({"file_path": "/p/src/a.rs", "old_string": "a", "new_string": "b"}));
/// ```
pub fn claude_input(tool: &str, input: &Value, cwd: &Path) -> Value {
    let (Some(m), Value::Object(fields)) = (mapping(tool), input) else {
        return input.clone();
    };
    let mut out = Map::new();
    for (ours, theirs) in m.fields {
        if let Some(value) = fields.get(*ours) {
            out.insert((*theirs).to_owned(), shown(tool, theirs, value, cwd));
        }
    }
    Value::Object(out)
}

/// A value as Claude Code shows it: paths absolute, `Bash.timeout` in milliseconds.
fn shown(tool: &str, field: &str, value: &Value, cwd: &Path) -> Value {
    match value {
        Value::String(path) if PATH_FIELDS.contains(&field) && Path::new(path).is_relative() => {
            Value::String(cwd.join(path).to_string_lossy().into_owned())
        }
        _ if tool == "bash" && field == "timeout" => value
            .as_f64()
            .map_or_else(|| value.clone(), |s| Value::from(s * 1000.0)),
        _ => value.clone(),
    }
}

/// The input a call runs with, from an `updatedInput` written in Claude Code's vocabulary:
/// the mapped fields renamed back onto `original` (so fields Claude Code does not know, such
/// as `label`, are kept), a path that is `original`'s made absolute kept as `original` wrote
/// it; other tools take `updated` as it is.
///
/// ```
/// use flemma_runtime::hooks::native_input;
/// use serde_json::json;
/// let original = json!({"label": "list", "command": "ls"});
/// let updated = json!({"command": "ls -a"});
/// assert_eq!(native_input("bash", &updated, &original, "/p".as_ref()), json!({"label": "list", "command": "ls -a"}));
/// ```
pub fn native_input(tool: &str, updated: &Value, original: &Value, cwd: &Path) -> Value {
    let (Some(m), Value::Object(theirs), Value::Object(ours)) = (mapping(tool), updated, original)
    else {
        return updated.clone();
    };
    let mut out = ours.clone();
    for (name, value) in theirs {
        let Some((native, _)) = m.fields.iter().find(|(_, t)| t == name) else {
            // A field Claude Code's tool has and ours does not: left out (the schema would
            // refuse it).
            continue;
        };
        let unchanged = ours
            .get(*native)
            .is_some_and(|o| shown(tool, name, o, cwd) == *value);
        if !unchanged {
            let value = if tool == "bash" && name == "timeout" {
                value
                    .as_f64()
                    .map_or_else(|| value.clone(), |ms| Value::from(ms / 1000.0))
            } else {
                value.clone()
            };
            out.insert((*native).to_owned(), value);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_builtin_maps_there_and_back() {
        let cwd = Path::new("/work");
        let cases = [
            (
                "bash",
                json!({"label": "l", "command": "ls", "timeout": 2.5}),
            ),
            (
                "read",
                json!({"label": "l", "path": "a.txt", "offset": 3, "limit": 9}),
            ),
            (
                "write",
                json!({"label": "l", "path": "/abs/a.txt", "content": "x"}),
            ),
            (
                "edit",
                json!({"label": "l", "path": "a", "oldText": "o", "newText": "n"}),
            ),
            (
                "grep",
                json!({"label": "l", "pattern": "p", "path": "src", "glob": "*.rs", "limit": 5}),
            ),
            (
                "find",
                json!({"label": "l", "pattern": "*.rs", "path": "."}),
            ),
            ("ls", json!({"label": "l", "path": "."})),
        ];
        for (tool, input) in cases {
            let shown = claude_input(tool, &input, cwd);
            // Every field but the label (bash's is Claude Code's `description`) is shown.
            let fields = input.as_object().map_or(0, serde_json::Map::len);
            let label = usize::from(tool != "bash");
            assert_eq!(
                shown.as_object().map(serde_json::Map::len),
                Some(fields - label),
                "{tool}"
            );
            assert_eq!(native_input(tool, &shown, &input, cwd), input, "{tool}");
        }
        assert_eq!(
            claude_input("bash", &json!({"command": "x", "timeout": 2.5}), cwd)["timeout"],
            json!(2500.0)
        );
    }

    /// The fields mapped are those the built-in tools read (their input types' names on the
    /// wire): a hook written for Claude Code sees them, and its rewrite reaches the tool.
    #[test]
    fn the_mapped_fields_are_the_tools_own() {
        for m in MAPPINGS {
            let builtin = flemma_schema::builtin::get(m.ours).unwrap();
            let schema = builtin
                .input
                .to_json_schema(flemma_schema::Mode::Lenient)
                .unwrap();
            for (ours, _) in m.fields {
                assert!(
                    schema["properties"].get(*ours).is_some(),
                    "{}.{ours} is not an input of {}",
                    m.ours,
                    m.ours
                );
            }
        }
        let edit = flemma_schema::builtin::inputs::EditInput {
            label: "fix".into(),
            path: "a.rs".into(),
            old_text: "a".into(),
            new_text: "b".into(),
        };
        let input = serde_json::to_value(&edit).unwrap();
        let shown = claude_input("edit", &input, Path::new("/p"));
        assert_eq!(
            (&shown["old_string"], &shown["new_string"]),
            (&json!("a"), &json!("b"))
        );
        let updated = json!({"file_path": "/p/a.rs", "old_string": "a", "new_string": "c"});
        let rewritten = native_input("edit", &updated, &input, Path::new("/p"));
        let read = flemma_schema::builtin::inputs::EditInput::from_call(&rewritten).unwrap();
        assert_eq!(read.new_text, "c");
    }

    #[test]
    fn a_rewrite_in_claude_vocabulary_lands_on_our_fields() {
        let cwd = Path::new("/w");
        let original = json!({"label": "w", "path": "a.txt", "content": "x"});
        let updated = json!({"file_path": "/w/b.txt", "content": "y", "unknown": 1});
        assert_eq!(
            native_input("write", &updated, &original, cwd),
            json!({"label": "w", "path": "/w/b.txt", "content": "y"})
        );
        // A tool without a mapping takes the update as it is.
        assert_eq!(native_input("deploy", &updated, &original, cwd), updated);
    }
}
