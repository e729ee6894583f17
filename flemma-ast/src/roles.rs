//! Role markers that name no role flemma knows (`@User:`, `@you:`, `@Assistent:`).
//!
//! The Flemma plugin parses such a message like `@System:` and drops it from provider requests: the
//! text is kept but never sent. A newcomer who writes `@User:` would see an empty request and no
//! reason, so the checks (`flemma check`, the language server) and the request builder report each
//! such marker, with the role it most likely meant.
//!
//! ```
//! use flemma_ast::{Role, parse, unknown_roles};
//!
//! let doc = parse("@User:\nHello\n");
//! let found = unknown_roles(&doc);
//! assert_eq!(found[0].line, 1);
//! assert_eq!(
//!     found[0].message,
//!     "@User: is not a role: its message is not sent (did you mean @You:?)"
//! );
//! assert_eq!(Role::from_marker("assistent").suggestion(), Some(Role::Assistant));
//! ```

use flemma_ids::Severity;

use crate::ast::{Diagnostic, DiagnosticKind, Document, Role};

/// Words people use for a role under another name.
const ALIASES: &[(&str, Role)] = &[
    ("user", Role::You),
    ("human", Role::You),
    ("me", Role::You),
    ("ai", Role::Assistant),
    ("model", Role::Assistant),
    ("bot", Role::Assistant),
    ("agent", Role::Assistant),
    ("claude", Role::Assistant),
    ("gpt", Role::Assistant),
    ("gemini", Role::Assistant),
    ("developer", Role::System),
    ("instructions", Role::System),
];

impl Role {
    /// Whether flemma sends messages of this role (`@System:`, `@You:`, `@Assistant:`).
    pub fn is_known(&self) -> bool {
        !matches!(self, Role::Other(_))
    }

    /// For a role flemma does not know, the role it most likely means: the same word in
    /// another case, a misspelling (at most two edits), or a common other name (`User`,
    /// `Human` for `You`; `AI`, `Model` for `Assistant`). `None` for a known role or a word
    /// too far from every role.
    pub fn suggestion(&self) -> Option<Role> {
        let Role::Other(word) = self else {
            return None;
        };
        let lower = word.to_lowercase();
        if let Some((_, role)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
            return Some(role.clone());
        }
        [Role::You, Role::Assistant, Role::System]
            .into_iter()
            .map(|role| (distance(&lower, &role.as_str().to_lowercase()), role))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, role)| role)
    }
}

/// A warning for each message whose role marker names no role flemma knows, on the
/// marker's line: `@User: is not a role: its message is not sent (did you mean @You:?)`.
pub fn unknown_roles(doc: &Document) -> Vec<Diagnostic> {
    doc.messages
        .iter()
        .filter(|m| !m.role.is_known())
        .map(|m| Diagnostic {
            kind: DiagnosticKind::Role,
            severity: Severity::Warning,
            message: unknown_role_message(&m.role),
            line: m.span.start_line,
        })
        .collect()
}

fn unknown_role_message(role: &Role) -> String {
    let word = role.as_str();
    match role.suggestion() {
        Some(meant) => format!(
            "@{word}: is not a role: its message is not sent (did you mean @{}:?)",
            meant.as_str()
        ),
        None => format!(
            "@{word}: is not a role: its message is not sent (the roles are @System:, @You: and @Assistant:)"
        ),
    }
}

/// Levenshtein distance over characters (the words are one marker long).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let cases = [
            ("User", Some(Role::You)),
            ("you", Some(Role::You)),
            ("YOU", Some(Role::You)),
            ("Yuo", Some(Role::You)),
            ("Assistent", Some(Role::Assistant)),
            ("assistant", Some(Role::Assistant)),
            ("Model", Some(Role::Assistant)),
            ("system", Some(Role::System)),
            ("Sytem", Some(Role::System)),
            ("Notes", None),
            ("Q", None),
        ];
        for (word, meant) in cases {
            assert_eq!(Role::from_marker(word).suggestion(), meant, "{word}");
        }
        assert_eq!(Role::You.suggestion(), None);
    }

    #[test]
    fn a_word_far_from_every_role_lists_them() {
        let doc = crate::parse("@You:\nhi\n\n@Notes:\nmine\n");
        let found = unknown_roles(&doc);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].line, 4);
        assert_eq!(
            found[0].message,
            "@Notes: is not a role: its message is not sent (the roles are @System:, @You: and @Assistant:)"
        );
    }
}
